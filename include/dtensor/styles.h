/*
 * dtensor/styles.h - parallel styles and the planner (PyTorch's
 * torch.distributed.tensor.parallel: ColwiseParallel, RowwiseParallel,
 * SequenceParallel, PrepareModuleInput/Output, parallelize_module), plus
 * TorchShard-style conveniences.
 *
 * A style is declarative: the layouts a module's inputs arrive in
 * (input_layouts), the layouts its forward needs (desired_input_layouts), the
 * layout its output leaves in (output_layouts), whether the output is handed
 * on as a local tensor (use_local_output), and how the module's parameters
 * are partitioned. dt_parallelize_module applies a plan of styles keyed by
 * FQN patterns: it replaces parameter slots with distributed tensors (the
 * partition) and adds forward hooks to the matched modules (input: wrap a
 * local input with dt_from_local in its input layout, redistribute it to the
 * desired layout; output: redistribute to the output layout, dt_to_local when
 * use_local_output). The modules themselves never change.
 *
 * Layouts are placements along the ONE tensor-parallel mesh dim named at
 * parallelize time (styles act on a 1-d slice of the mesh, as in PyTorch);
 * parameters become distributed tensors on that slice. Defaults (PyTorch 2.x):
 *
 *   style              params                          input -> desired   output     local out
 *   colwise  Linear    weight S(0), bias S(0)          R -> R             S(-1)      true
 *            Embedding weight S(1)                     R -> R             S(-1)      true
 *   rowwise  Linear    weight S(1), bias R (added once) S(-1) -> S(-1)    R          true
 *            Embedding weight S(0) (vocabulary)        R -> R             R          true
 *   sequence LayerNorm params R                        S(1) (kept)        S(1)       false
 *   prepare_input      -                               given -> given     -          false
 *   prepare_output     -                               -                  given      true
 *   pairwise FeedForward w1 colwise, w2 rowwise; Attention wq/wk/wv colwise,
 *            wo rowwise; a Sequential's Linears colwise/rowwise in turn;
 *            MultiheadAttention in_proj_weight and in_proj_bias _S(0,sf=3)
 *            (each rank the q, k and v rows of its heads, PyTorch's
 *            _StridedShard(0, split_factor=3)), out_proj rowwise
 *            (PyTorch 2.0's PairwiseParallel; input R, output R, one all-reduce)
 *
 * Rowwise output R all-reduces the Partial sum of the shards; output S(1)
 * reduce-scatters it along the sequence (sequence parallelism), and a colwise
 * layer with input S(1) all-gathers first. A colwise output layer with output
 * S(-1) and use_local_output false hands vocabulary-sharded logits to
 * dt_cross_entropy, which computes the loss without gathering them.
 *
 * Objects: dt_style and dt_plan are refcounted / owned handles; not
 * thread-safe (build them on one thread; a built plan may be read by many).
 */
#ifndef DTENSOR_STYLES_H
#define DTENSOR_STYLES_H

#include <stdio.h>

#include "dtensor/nn.h"
#include "dtensor/placement.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ layouts */

/**
 * The layout of one module input or output along the tensor-parallel mesh
 * dim: a placement, or "none" (leave that input alone: not a tensor, or not
 * to be touched). Text form: "S(1)", "R", "P(sum)", "None".
 */
typedef struct dt_layout {
    bool present;
    dt_placement placement;
} dt_layout;

/** The layout with placement @p p; the "none" layout. Values, nothing to free. */
DT_API dt_layout dt_layout_of(dt_placement p);
DT_API dt_layout dt_layout_none(void);

/* ================================================================ styles */

typedef struct dt_style dt_style;

typedef enum dt_style_kind {
    DT_STYLE_COLWISE = 0,
    DT_STYLE_ROWWISE,
    DT_STYLE_SEQUENCE,
    DT_STYLE_PREPARE_INPUT,
    DT_STYLE_PREPARE_OUTPUT,
    DT_STYLE_PAIRWISE,
    DT_STYLE_USER, /* a style a program defines (dt_style_ops) */
    DT_STYLE_KIND_COUNT
} dt_style_kind;

enum {
    DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS = 1u << 0,
    DT_STYLE_PARAM_FIELD_DESIRED_INPUT_LAYOUTS = 1u << 1,
    DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT = 1u << 2,
    DT_STYLE_PARAM_FIELD_DESIRED_OUTPUT_LAYOUT = 1u << 3,
    DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT = 1u << 4,
    DT_STYLE_PARAM_FIELD_SEQUENCE_DIM = 1u << 5,
    DT_STYLE_PARAM_FIELD_PREPARE_INPUT = 1u << 6,
    DT_STYLE_PARAM_FIELD_PREPARE_OUTPUT = 1u << 7,
};

/**
 * A prepare function, as the `_prepare_input` / `_prepare_output` of
 * PyTorch's first tensor-parallel styles: it turns a module's input (before
 * its forward) or output (after) into what comes next, on the style's 1-d
 * mesh @p mesh; a new reference in *out. The dt_make_* helpers below are
 * prepare functions; a wrapper fixes their extra arguments (the dim).
 */
typedef dt_status (*dt_prepare_fn)(dt_tensor *t, dt_mesh *mesh, dt_tensor **out);

/**
 * Options of a style (field-masked; NULL = every default of the table above).
 * input_layouts / desired_input_layouts have n_inputs entries (1 to
 * DT_MODULE_MAX_INPUTS; default 1 for the styles with one input).
 * Which fields a kind takes:
 *   colwise, rowwise: INPUT_LAYOUTS (1 entry), OUTPUT_LAYOUT, USE_LOCAL_OUTPUT
 *     (the desired input is fixed by the partition, as in PyTorch), or instead
 *     of the layouts PREPARE_INPUT (input 0) and/or PREPARE_OUTPUT: functions
 *     that do the whole step (PyTorch 1.13's _prepare_input/_prepare_output);
 *   sequence: SEQUENCE_DIM (default 1), USE_LOCAL_OUTPUT;
 *   prepare_input: INPUT_LAYOUTS and DESIRED_INPUT_LAYOUTS (required, the same
 *     n_inputs), USE_LOCAL_OUTPUT (hand the prepared inputs on as local);
 *   prepare_output: OUTPUT_LAYOUT and DESIRED_OUTPUT_LAYOUT (required),
 *     USE_LOCAL_OUTPUT;
 *   pairwise: none.
 * A field a kind does not take is an error naming it.
 */
typedef struct dt_style_params {
    uint64_t field_mask;
    int n_inputs;
    dt_layout input_layouts[DT_MODULE_MAX_INPUTS];
    dt_layout desired_input_layouts[DT_MODULE_MAX_INPUTS];
    dt_layout output_layout;
    dt_layout desired_output_layout;
    bool use_local_output;
    int sequence_dim;
    dt_prepare_fn prepare_input;  /* replaces the input layouts of input 0 */
    dt_prepare_fn prepare_output; /* replaces the output layouts and use_local_output */
} dt_style_params;

/**
 * A new style of @p kind with options @p p (NULL: defaults): the built-in
 * style of that kind (dt_style_create_ops with its dt_style_ops; a user style
 * is made from its own ops). Caller releases.
 * Errors: DT_ERR_INVALID_ARG naming a field the kind does not take, a missing
 * required field, n_inputs out of range, a Shard layout on a negative dim
 * other than -1 or on a dim no tensor has (>= DT_MAX_DIMS), a sequence_dim
 * outside 0..DT_MAX_DIMS-1, or a Partial desired input.
 */
DT_API dt_status dt_style_create(dt_style_kind kind, const dt_style_params *p, dt_style **out);
/** Shorthands with default options. */
DT_API dt_status dt_style_colwise(dt_style **out);
DT_API dt_status dt_style_rowwise(dt_style **out);
DT_API dt_status dt_style_sequence(dt_style **out);
DT_API dt_status dt_style_pairwise(dt_style **out);

/** Reference counting (not thread-safe): retain returns @p s; release frees
 * it with the last reference. Both accept NULL. */
DT_API dt_style *dt_style_retain(dt_style *s);
DT_API void dt_style_release(dt_style *s);

/** The kind of @p s: the built-in style its ops are, DT_STYLE_USER for any
 * other ops (DT_STYLE_KIND_COUNT for NULL). A query only: styles run by their
 * ops (dt_style_get_ops), never by kind. */
DT_API dt_style_kind dt_style_get_kind(const dt_style *s);
/** "colwise", "rowwise", "sequence", "prepare_input", "prepare_output", "pairwise", "user". */
DT_API const char *dt_style_kind_name(dt_style_kind k);
/**
 * The style in the plan text form, its name (dt_style_ops.name) and the
 * options given: "colwise(output=S(-1), local=false)". snprintf rule.
 */
DT_API int dt_style_format(const dt_style *s, char *buf, size_t len);

/**
 * Whether @p s can be applied to @p m, and nothing else: it asks the
 * style's dt_style_ops for its whole plan (placements, io, the styles of its
 * children, recursively) and checks it. DT_OK, or the style's refusal naming
 * the style, the module and the reason (DT_ERR_UNSUPPORTED for rowwise on a
 * LayerNorm: "style 'rowwise' refused 'norm': it cannot shard a LayerNorm
 * ..."), DT_ERR_INVALID_ARG for a parameter already distributed, on
 * Attention projections heads that do not divide by @p tp_size, or a
 * placement or io layout the style gave that cannot be. @p fqn is only used
 * in messages. Not collective; changes nothing.
 */
DT_API dt_status dt_style_check(const dt_style *s, dt_module *m, const char *fqn, int tp_size);

/* ================================================================ plans */

typedef struct dt_plan dt_plan;

/** An empty plan. Caller destroys. Errors: DT_ERR_NO_MEMORY. */
DT_API dt_status dt_plan_create(dt_plan **out);
/** Free @p p and release its styles. NULL-safe. */
DT_API void dt_plan_destroy(dt_plan *p);

/**
 * Append an entry: the modules whose FQN matches @p fqn_pattern get @p style
 * (retained). A pattern is dot-separated segments; a segment matches one
 * path segment and may hold glob characters (fnmatch: `*`, `?`, `[..]`) and
 * alternatives separated by `|` ("layers.*.attention.wq|wk|wv"). The empty
 * pattern "" is the root module itself.
 * Errors: DT_ERR_INVALID_ARG for an empty segment ("a..b").
 */
DT_API dt_status dt_plan_add(dt_plan *p, const char *fqn_pattern, dt_style *style);

/** Number of entries (0 for NULL). */
DT_API int dt_plan_size(const dt_plan *p);
/** Entry @p i: pattern and style, borrowed; NULL out of range. */
DT_API const char *dt_plan_pattern_at(const dt_plan *p, int i);
DT_API dt_style *dt_plan_style_at(const dt_plan *p, int i);

/**
 * Parse the plan text form into a new plan:
 *
 *     # comment to the end of the line
 *     layers.*.attention.wq|wk|wv = colwise
 *     layers.*.attention.wo = rowwise(output=S(1))
 *     layers.*.feed_forward = prepare_input(input=S(1), desired=R)
 *     output = colwise(input=S(1), output=S(-1), local=false)
 *     = rowwise          (an empty key: the root module itself)
 *
 * Entries are separated by ';' or newlines. Style names: any registered
 * style (dt_style_find): colwise, rowwise, sequence, prepare_input,
 * prepare_output, pairwise (PyTorch's class names ColwiseParallel, ... are
 * accepted too) and the program's own (dt_style_register). Options (those
 * the style takes, dt_style_ops.options): input=, desired= (or
 * desired_input=), output=, desired_output=, local= (or use_local_output=,
 * true/false), seq_dim= ; a layout list of several inputs is written in
 * brackets: input=[S(1), None].
 * Errors: DT_ERR_INVALID_ARG naming the bad token and the entry.
 */
DT_API dt_status dt_plan_parse(const char *text, dt_plan **out);
/** dt_plan_parse on the contents of file @p path (DT_ERR_SYSTEM naming it if unreadable). */
DT_API dt_status dt_plan_load(const char *path, dt_plan **out);

/**
 * The spec's default tensor-parallel plan of the reference GPT (shared spec
 * gpt.md): tok_embeddings rowwise, attention wq|wk|wv colwise, wo rowwise,
 * feed_forward w1 colwise, w2 rowwise, output colwise with S(-1) logits kept
 * distributed. With @p sequence_parallel: the norms are SequenceParallel,
 * tok_embeddings and the rowwise layers reduce-scatter to S(1) and keep the
 * residual stream a distributed S(1) tensor (local=false), pos_embeddings'
 * output is sliced to S(0) (positions follow the sequence shards), attention
 * and feed_forward all-gather their S(1) input once (prepare_input), and the
 * output layer takes S(1). The text of either plan: dt_plan_gpt_default_text.
 */
DT_API dt_status dt_plan_gpt_default(bool sequence_parallel, dt_plan **out);
/** The plan text dt_plan_gpt_default parses (static, borrowed): a start for --plan files. */
DT_API const char *dt_plan_gpt_default_text(bool sequence_parallel);

/**
 * Collective over the @p tp_dim slice of @p mesh (parameters are distributed
 * there, with dt_distribute: no communication). Apply @p plan to the tree of
 * @p root: every entry's pattern is matched against the FQNs, every matched
 * module is checked (dt_style_check), and only when everything is valid are
 * parameter slots replaced and hooks added. Errors, with the model untouched:
 * DT_ERR_NOT_FOUND naming @p tp_dim when the mesh has no such dim, or a
 * plan key that matches no module; DT_ERR_INVALID_ARG naming a module matched
 * by two keys, or a Shard dim the module's input cannot have (an Embedding's
 * ids have at most DT_MAX_DIMS - 1 dims); the errors of dt_style_check.
 * Other shard dims are checked at the first forward, where the rank of each
 * input and output is known: a Linear takes inputs of any rank, so
 * colwise(output=S(7)) is valid for 8-dim inputs and fails only on a forward
 * with fewer dims ("shard dim 7 is out of range for a tensor of 3 dims").
 * Run it on every rank of the slice with the same plan (the checks are
 * deterministic, so every rank fails alike). Parameters keep their values:
 * each rank keeps its shard of the full tensor it held.
 */
DT_API dt_status dt_parallelize_module(dt_module *root, dt_mesh *mesh, const dt_plan *plan,
                                       const char *tp_dim);

/**
 * Print, per module FQN of @p root that holds parameters or a plan entry,
 * the style (or "-"), each parameter's placements, global and local shape and
 * bytes on this rank, and totals. Before dt_parallelize_module it shows what
 * the plan would do on @p mesh (which may be virtual); after it, the actual
 * parameters. @p plan may be NULL (only the current parameters).
 * Errors: as dt_parallelize_module's matching; nothing is changed.
 * Not collective.
 */
DT_API dt_status dt_plan_explain(dt_module *root, dt_mesh *mesh, const dt_plan *plan,
                                 const char *tp_dim, FILE *f);

/**
 * Parameter bytes this rank holds for @p root's subtree (local shards of
 * distributed parameters, whole local ones). Not collective.
 */
DT_API int64_t dt_module_param_bytes_local(dt_module *root);

/* ================================================================ TorchShard-style conveniences */

/**
 * TorchShard's ParallelLinear(in, out, bias, dim): a Linear (dt_linear_create)
 * parallelized over the @p tp_dim slice of @p mesh with
 *   dim -1 (TorchShard None): not parallelized, an ordinary Linear;
 *   dim 0: rowwise (RowParallelLinear): input features sharded, the input is
 *          the S(-1) local shard, the output replicated (all-reduce);
 *   dim 1: colwise (ColumnParallelLinear): output features sharded, the input
 *          replicated, the output this rank's S(-1) local shard.
 * A thin wrapper: dt_linear_create then dt_parallelize_module with the default
 * colwise / rowwise style on the root. Weights are zero: initialise them with
 * dt_param_init (by global index, so any tp size gives the same full weights).
 * Collective over the slice. Errors: DT_ERR_INVALID_ARG for another @p dim;
 * those of dt_linear_create and dt_parallelize_module.
 */
DT_API dt_status dt_parallel_linear_create(int64_t in_features, int64_t out_features, bool bias,
                                           int dim, dt_mesh *mesh, const char *tp_dim,
                                           dt_module **out);

/**
 * TorchShard's parallel_cross_entropy: mean cross entropy of
 * vocabulary-sharded @p logits (a distributed tensor whose class dim, the
 * last, is Shard on its mesh: a colwise output layer with use_local_output
 * false) against replicated @p targets ids; the logits are never gathered
 * (max and sum of exponentials are all-reduced). The loss is a replicated
 * distributed scalar (dt_to_local for its value). A thin wrapper over
 * dt_cross_entropy's sharding rule. Collective over the logits' mesh.
 * Errors: DT_ERR_INVALID_ARG when @p logits is not distributed or not sharded
 * along its last dim (naming its placements); those of dt_cross_entropy.
 */
DT_API dt_status dt_parallel_cross_entropy(dt_tensor *logits, dt_tensor *targets, dt_tensor **loss);

/* ================================================================ the style interface */

/*
 * Every style, built-in or a program's own, is a dt_style_ops: the built-in
 * colwise, rowwise, sequence, prepare_input, prepare_output and pairwise are
 * dt_style_ops the library registers under their names before any program
 * runs (dt_style_find("colwise")), and they run through the same calls as a
 * program's style: dt_parallelize_module asks every matched module's style
 * for its parameter placements (plan_params), input/output preparation
 * (plan_io) and the styles it applies to children (children), checks all of
 * it, and only then swaps parameter slots and adds hooks.
 */

/** One placement a style gives: parameter slot @p name of the module. */
typedef struct dt_style_param_placement {
    const char *name;
    dt_placement placement; /* on the tp mesh dim */
} dt_style_param_placement;

/** Most parameters one module of a style places (plan_params). */
#define DT_STYLE_MAX_PARAMS 16
/** Most children one style applies other styles to (children). */
#define DT_STYLE_MAX_CHILDREN 64

/**
 * How a style prepares a module's inputs before its forward and its output
 * after it (PyTorch's _prepare_input_fn / _prepare_output_fn), as
 * dt_style_ops.plan_io fills it. Input i < n_inputs: input_fn[i], when set,
 * does the whole step; otherwise a local input is taken as this rank's piece
 * in layout input[i] (None: left as it is) and a distributed one as it is,
 * then redistributed to desired_input[i] (None: kept) and, with
 * local_inputs, handed on as its local tensor. input_last_dim[i] is the
 * global size of input i's last dim when it is taken as S(-1) and the style
 * knows it (no exchange), else -1 (dt_from_local infers the global shape with
 * one small all-gather). The output likewise: output_fn, or output /
 * desired_output / local_output. A pre hook is added when n_inputs > 0, a
 * post hook when the output has a layout, a function or local_output.
 */
typedef struct dt_style_io {
    int n_inputs; /* 0..DT_MODULE_MAX_INPUTS */
    dt_layout input[DT_MODULE_MAX_INPUTS];
    dt_layout desired_input[DT_MODULE_MAX_INPUTS]; /* never Partial */
    dt_prepare_fn input_fn[DT_MODULE_MAX_INPUTS];
    int64_t input_last_dim[DT_MODULE_MAX_INPUTS];
    bool local_inputs;
    dt_layout output;
    dt_layout desired_output; /* never Partial */
    dt_prepare_fn output_fn;
    bool local_output;
} dt_style_io;

/** A style applied to a module below the one a composite style is given (children). */
typedef struct dt_style_child {
    dt_module *module; /* a descendant of that module */
    dt_style *style;   /* one reference: the library releases it */
} dt_style_child;

/* dt_style_ops.field_mask: the members after prepare_output that are set. */
enum {
    DT_STYLE_OPS_FIELD_OPTIONS = 1u << 0,  /* options, required_options, defaults */
    DT_STYLE_OPS_FIELD_PLAN_IO = 1u << 1,  /* plan_io */
    DT_STYLE_OPS_FIELD_CHILDREN = 1u << 2, /* children */
};

/**
 * A parallel style, as a subclass of PyTorch's ParallelStyle: how it places a
 * module's parameters on the tp mesh dim, how it prepares the module's inputs
 * and output, and which other styles it applies to the module's children.
 * Keep it alive while styles use it (a static const is typical).
 *
 * The first form (field_mask 0) has name, plan_params and the two prepare
 * functions; field_mask names each later member that is set (a member set
 * without its bit is refused, so nothing is silently ignored).
 *
 * Every callback runs while dt_parallelize_module (or dt_style_check,
 * dt_plan_explain) checks the plan, before anything changes: @p m still holds
 * its full parameters (dt_plan_explain after parallelizing: the distributed
 * ones; their shapes are global either way). Callbacks must not change @p m
 * and may run more than once per module; an error they return
 * (dt_set_error with the reason) refuses the module, the library adds the
 * style's name and the module's FQN, and the model is left untouched.
 */
typedef struct dt_style_ops {
    uint64_t field_mask; /* DT_STYLE_OPS_FIELD_* */
    /** The name plan text uses ("layers.*.moe = my_style"). Required. */
    const char *name;
    /**
     * (optional) The placements of @p m's own parameters (slots of @p m)
     * into @p out, at most DT_STYLE_MAX_PARAMS, their count in *n (0 on entry;
     * 0 is fine). An error refuses @p m.
     */
    dt_status (*plan_params)(dt_module *m, const char *fqn, dt_style_param_placement *out, int *n);
    /** (optional) Prepare input 0 before the module's forward (io.input_fn[0]). */
    dt_prepare_fn prepare_input;
    /** (optional) Prepare the output after it (io.output_fn). */
    dt_prepare_fn prepare_output;

    /* ---- DT_STYLE_OPS_FIELD_OPTIONS */
    /** The dt_style_params fields (DT_STYLE_PARAM_FIELD_*) the style takes, in
     * C (dt_style_create_ops) and in plan text ("my_style(output=R)"); others
     * are refused naming them. */
    uint64_t options;
    /** ... and those that must be given. */
    uint64_t required_options;
    /**
     * (optional) Fill the options @p p does not give (fields not in
     * p->field_mask) with the style's defaults, and refuse combinations it
     * cannot take (an error with the reason). The layouts given are already
     * checked (Shard dims -1..DT_MAX_DIMS-1, no Partial desired layout).
     */
    dt_status (*defaults)(dt_style_params *p);

    /* ---- DT_STYLE_OPS_FIELD_PLAN_IO */
    /**
     * How @p m's inputs and output are prepared, into @p io, which holds the
     * first form's prepare functions on entry (n_inputs 1 with input_fn[0]
     * when prepare_input is set, else 0; input_last_dim all -1). The style's
     * options: dt_style_options(@p s). After it, options PREPARE_INPUT and
     * PREPARE_OUTPUT, when given, replace input 0's step and the output's.
     */
    dt_status (*plan_io)(const dt_style *s, dt_module *m, dt_style_io *io);

    /* ---- DT_STYLE_OPS_FIELD_CHILDREN */
    /**
     * (composite styles, PyTorch 2.0's PairwiseParallel) The styles to apply
     * to modules below @p m, into @p out (at most DT_STYLE_MAX_CHILDREN, count
     * in *n, 0 on entry). Each child goes through the same calls as a
     * matched module (its parameters, its hooks, its own children); the
     * library releases every out[i].style, also when the callback fails.
     */
    dt_status (*children)(const dt_style *s, dt_module *m, const char *fqn, dt_style_child *out,
                          int *n);
} dt_style_ops;

/**
 * Register @p ops under ops->name so plan text can use it; the built-in styles
 * are registered from the start (with PyTorch's class names as aliases:
 * ColwiseParallel, ...). Not thread-safe with parsing; typically at start-up.
 * Errors: DT_ERR_INVALID_ARG for NULL entries, bad field masks (as
 * dt_style_create_ops), a name a built-in style or another registered style
 * has (naming it), or a name plan text cannot hold; DT_ERR_NO_MEMORY past 64
 * registered styles.
 */
DT_API dt_status dt_style_register(const dt_style_ops *ops);

/**
 * The style registered under @p name (a built-in one, one of its aliases, or
 * a program's) into *out, borrowed. Errors: DT_ERR_NOT_FOUND naming @p name.
 */
DT_API dt_status dt_style_find(const char *name, const dt_style_ops **out);

/**
 * A new style of @p ops (registered or not) with options @p p (NULL: the
 * style's defaults); caller releases. dt_style_create(kind, p) is this call
 * with the built-in style of that kind. Errors: DT_ERR_INVALID_ARG for NULL
 * entries, unknown bits in ops->field_mask or ops->options, a later member
 * set without its field bit, required options the style does not take;
 * for @p p the errors of dt_style_create (fields the style does not take,
 * missing required ones, bad layouts) and those of ops->defaults, each
 * naming the style.
 */
DT_API dt_status dt_style_create_ops(const dt_style_ops *ops, const dt_style_params *p,
                                     dt_style **out);
/** dt_style_create_ops(@p ops, NULL, @p out). */
DT_API dt_status dt_style_from_ops(const dt_style_ops *ops, dt_style **out);

/** The ops of @p s (borrowed; NULL for NULL). */
DT_API const dt_style_ops *dt_style_get_ops(const dt_style *s);
/**
 * The options of @p s (borrowed, alive with @p s; NULL for NULL): field_mask
 * holds the fields given, every other field the style's default.
 */
DT_API const dt_style_params *dt_style_options(const dt_style *s);

/* ================================================================ prepare helpers */

/*
 * PyTorch's tensor-parallel helpers (torch.distributed.tensor.parallel, 1.13
 * and 2.0), with their semantics, as C calls and dt_prepare_fn's. @p mesh may
 * be NULL when @p t is distributed (its mesh is used); it must have one dim.
 * Inputs may be local (taken as this rank's piece, no communication) or
 * distributed (redistributed: collective over the mesh); outputs must be
 * distributed. A new reference in *out. Errors: DT_ERR_INVALID_ARG naming the
 * helper for NULL arguments, a mesh that is not 1-d ("mesh has 2 dims,
 * expected 1"), a local tensor without a mesh, a local output; those of
 * dt_from_local / dt_redistribute.
 */
/** Input -> Replicate: a local tensor is taken as the whole (every rank's copy). */
DT_API dt_status dt_make_input_replicate_1d(dt_tensor *t, dt_mesh *mesh, dt_tensor **out);
/** Input taken as Shard(0) (a local tensor: this rank's rows), then -> Replicate. */
DT_API dt_status dt_make_input_reshard_replicate(dt_tensor *t, dt_mesh *mesh, dt_tensor **out);
/** Input -> Shard(@p dim): a local tensor is this rank's piece along @p dim. */
DT_API dt_status dt_make_input_shard_1d(dt_tensor *t, dt_mesh *mesh, int dim, dt_tensor **out);
/** dt_make_input_shard_1d on the last dim. */
DT_API dt_status dt_make_input_shard_1d_last_dim(dt_tensor *t, dt_mesh *mesh, dt_tensor **out);
/** Output -> Replicate (distributed). */
DT_API dt_status dt_make_output_replicate_1d(dt_tensor *t, dt_mesh *mesh, dt_tensor **out);
/** Output -> Shard(@p dim) (distributed). */
DT_API dt_status dt_make_output_shard_1d(dt_tensor *t, dt_mesh *mesh, int dim, dt_tensor **out);
/** Output -> Replicate, then its local tensor (the whole output on every rank). */
DT_API dt_status dt_make_output_tensor(dt_tensor *t, dt_mesh *mesh, dt_tensor **out);
/** Output -> Shard(0), then its local tensor (this rank's rows). */
DT_API dt_status dt_make_output_reshard_tensor(dt_tensor *t, dt_mesh *mesh, dt_tensor **out);
/** The output's local tensor as it is (no communication). */
DT_API dt_status dt_make_sharded_output_tensor(dt_tensor *t, dt_mesh *mesh, dt_tensor **out);

#ifdef __cplusplus
}
#endif
#endif /* DTENSOR_STYLES_H */
