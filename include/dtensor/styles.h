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
 * A new style of @p kind with options @p p (NULL: defaults). Caller releases.
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

/** The kind of @p s (DT_STYLE_KIND_COUNT for NULL). */
DT_API dt_style_kind dt_style_get_kind(const dt_style *s);
/** "colwise", "rowwise", "sequence", "prepare_input", "prepare_output", "pairwise". */
DT_API const char *dt_style_kind_name(dt_style_kind k);
/**
 * The style in the plan text form, options that differ from the defaults
 * included: "colwise(output=S(-1), local=false)". snprintf rule.
 */
DT_API int dt_style_format(const dt_style *s, char *buf, size_t len);

/**
 * Whether @p s can be applied to @p m, and nothing else: DT_OK, or
 * DT_ERR_UNSUPPORTED naming the module type and the style (e.g. rowwise on a
 * LayerNorm), DT_ERR_INVALID_ARG for a parameter already distributed or, on
 * Attention projections, heads that do not divide by @p tp_size.
 * @p fqn is only used in messages. Not collective; changes nothing.
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
 * Entries are separated by ';' or newlines. Style names: colwise, rowwise,
 * sequence, prepare_input, prepare_output, pairwise (PyTorch's class names
 * ColwiseParallel, ... are accepted too). Options: input=, desired= (or
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

/* ================================================================ user styles */

/** One placement a user style gives: parameter slot @p name of the module. */
typedef struct dt_style_param_placement {
    const char *name;
    dt_placement placement; /* on the tp mesh dim */
} dt_style_param_placement;

/** Most parameters one module of a user style places. */
#define DT_STYLE_MAX_PARAMS 16

/**
 * A style the library does not ship, as a subclass of PyTorch's
 * ParallelStyle: how it places a module's own parameters on the tp mesh dim,
 * and how it prepares the module's input and output. Keep it alive while
 * styles use it (a static const is typical).
 */
typedef struct dt_style_ops {
    /** The name plan text uses ("layers.*.moe = my_style"). Required. */
    const char *name;
    /**
     * The placements of @p m's own parameters (slots of @p m) into @p out,
     * at most DT_STYLE_MAX_PARAMS, their count in *n (0 is fine). An error
     * (DT_ERR with the reason) refuses @p m; dt_parallelize_module then
     * changes nothing (every match is checked before any is applied).
     * Required.
     */
    dt_status (*plan_params)(dt_module *m, const char *fqn, dt_style_param_placement *out, int *n);
    /** (optional) Prepare input 0 before the module's forward. */
    dt_prepare_fn prepare_input;
    /** (optional) Prepare the output after it. */
    dt_prepare_fn prepare_output;
} dt_style_ops;

/**
 * Register @p ops under ops->name so plan text can use it. Not thread-safe
 * with parsing; typically at start-up. Errors: DT_ERR_INVALID_ARG for NULL
 * entries, a name a built-in style or another registered style has, or a
 * name plan text cannot hold; DT_ERR_NO_MEMORY past 64 styles.
 */
DT_API dt_status dt_style_register(const dt_style_ops *ops);
/** A style of @p ops (registered or not); caller releases. Errors: NULL entries. */
DT_API dt_status dt_style_from_ops(const dt_style_ops *ops, dt_style **out);

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
