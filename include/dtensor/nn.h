/*
 * dtensor/nn.h - modules with fully qualified names, built-in layers, the
 * forward random stream, losses, the token-file reader and data-parallel
 * batches. The reference GPT (dtensor/gpt.h) and the optimizers
 * (dtensor/optim.h) have their own headers, included at the end.
 *
 * A module is a node of a tree: a type (a small vtable, dt_module_ops), a
 * local name ("wq"), named parameter slots, named children and forward hooks.
 * Its fully qualified name (FQN) is the dot-joined path of local names from
 * the root ("layers.0.attention.wq"); the root's FQN is "".
 *
 * Parameters are ordinary tensors with requires_grad set, their storage tagged
 * DT_MEM_PARAMETER. Modules read their parameters from the slots at every
 * forward (never cache them), so a parameter slot may be replaced
 * (dt_module_param_set) by a distributed tensor and the module computes on it
 * unchanged: parallel styles only change the placements of parameters and,
 * through forward hooks, of module inputs and outputs. Modules never
 * special-case parallelism.
 *
 * Parameter order is stable: depth first, a module's own parameters in
 * registration order, then each child in registration order (PyTorch's
 * named_parameters order).
 *
 * A training step (error checks omitted):
 *
 *     dt_gpt_config cfg;  dt_gpt_config_preset("tiny", &cfg);
 *     dt_module *gpt;     dt_gpt_create(&cfg, 1234, &gpt);
 *     dt_optim *opt;      dt_optim_adamw_create(gpt, NULL, &opt);   // spec defaults
 *     dt_token_data *d;   dt_token_data_open("tokens.bin", &d);
 *     for (int64_t s = 0; s < steps; s++) {
 *         dt_tensor *x, *y, *logits, *loss;
 *         dt_token_data_batch(d, s, B, T, 0, B, &x, &y);
 *         dt_optim_zero_grad(opt);
 *         dt_module_call(gpt, x, &logits);
 *         dt_nn_cross_entropy(logits, y, &loss);
 *         dt_backward(loss, NULL);
 *         dt_optim_step(opt);
 *         ... release x, y, logits, loss
 *     }
 *
 * Thread safety: a module tree must not be used by two threads at once.
 * Ownership: a child belongs to its parent (dt_module_destroy on the root frees
 * the tree); slots hold one reference to each parameter tensor.
 */
#ifndef DTENSOR_NN_H
#define DTENSOR_NN_H

#include "dtensor/mesh.h" /* dt_dp_rows and friends take the mesh */
#include "dtensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_module dt_module;

/* Upper bound on the number of inputs of one forward call. */
#define DT_MODULE_MAX_INPUTS 8

/* ================================================================ module types */

/** How the Colwise and Rowwise styles treat a module type (dt_module_ops.tp_kind). */
typedef enum dt_module_tp_kind {
    DT_MODULE_TP_NONE = 0,  /* not something Colwise/Rowwise shard */
    DT_MODULE_TP_LINEAR,    /* computes like a Linear: [..., in] -> [..., out] */
    DT_MODULE_TP_EMBEDDING, /* computes like an Embedding: ids -> [..., dim] */
} dt_module_tp_kind;

/** One parameter of a tp_kind type: the dim each style shards (-1: replicated). */
typedef struct dt_module_tp_param {
    const char *name; /* the parameter slot; NULL ends the list */
    int colwise_dim;  /* Colwise shards this dim: the output features (a Linear's dim 0) */
    int rowwise_dim;  /* Rowwise shards this dim: the input features (a Linear's dim 1) */
} dt_module_tp_param;

/**
 * The vtable of a module type. Fill one per type with designated initializers
 * and keep it alive as long as modules use it (a static const is typical).
 * The vtable is the type's identity: styles recognise the built-in Linear,
 * Embedding, LayerNorm, FeedForward and Attention by it, never by the name.
 */
typedef struct dt_module_ops {
    /** Type name reported by dt_module_type_name ("Linear"). Required. */
    const char *type_name;
    /**
     * Compute the output from @p n_in borrowed inputs; write a new reference
     * to *out. Call children through dt_module_forward so their hooks run.
     * Required.
     */
    dt_status (*forward)(dt_module *m, int n_in, dt_tensor *const *inputs, dt_tensor **out);
    /** (optional) Free the type's private data (dt_module_impl). */
    void (*destroy_impl)(void *impl);
    /**
     * (optional) Lets Colwise/Rowwise shard modules of a user type that
     * compute like a Linear (their forward calls dt_linear / dt_matmul on the
     * parameters, so the sharded products follow the placements) or an
     * Embedding; DT_MODULE_TP_NONE (0): they refuse it by name.
     */
    dt_module_tp_kind tp_kind;
    /** (with tp_kind) Its parameters and their dims, ending with a NULL name;
     *  a listed parameter the module lacks (an optional bias) is skipped. */
    const dt_module_tp_param *tp_params;
} dt_module_ops;

/**
 * A new root module of type @p ops with private data @p impl (owned: passed
 * to ops->destroy_impl when the module is destroyed, also on failure here).
 * Errors: DT_ERR_INVALID_ARG (ops or its required entries NULL), NO_MEMORY.
 */
DT_API dt_status dt_module_create(const dt_module_ops *ops, void *impl, dt_module **out);

/**
 * Free a root module and its whole subtree (children, slots' references,
 * hooks). NULL-safe. A module that has a parent is owned by it: destroying it
 * directly logs a warning and does nothing.
 */
DT_API void dt_module_destroy(dt_module *m);

/**
 * Attach the root @p child to @p parent under the local name @p name (no dots,
 * not empty, unique among parent's children). On success the parent owns the
 * child; on failure the caller still does.
 * Errors: DT_ERR_INVALID_ARG (bad or duplicate name, child already attached,
 * child is an ancestor of parent).
 */
DT_API dt_status dt_module_add_child(dt_module *parent, const char *name, dt_module *child);

/**
 * Register parameter @p t under @p name (no dots, unique among m's parameters)
 * and retain it. Marks it requires_grad and re-tags its storage
 * DT_MEM_PARAMETER (for a distributed tensor: its local shard).
 * Errors: DT_ERR_INVALID_ARG (bad/duplicate name, non-float tensor).
 */
DT_API dt_status dt_module_param_add(dt_module *m, const char *name, dt_tensor *t);

/**
 * Replace the tensor in the existing slot @p name with @p t: retains @p t,
 * releases the old one, marks @p t requires_grad and DT_MEM_PARAMETER. The
 * new tensor may have another shape or be distributed (what a parallel style
 * does); the module's forward reads the slot each time.
 * Errors: DT_ERR_NOT_FOUND naming the slot; DT_ERR_INVALID_ARG.
 */
DT_API dt_status dt_module_param_set(dt_module *m, const char *name, dt_tensor *t);

/** The tensor in m's own slot @p name, or NULL. Borrowed. */
DT_API dt_tensor *dt_module_param(const dt_module *m, const char *name);
/** Number of m's own parameter slots (not its children's). */
DT_API int dt_module_num_params(const dt_module *m);
/** Own slot @p i (0 <= i < dt_module_num_params): name and tensor, borrowed; NULL out of range. */
DT_API const char *dt_module_param_name_at(const dt_module *m, int i);
DT_API dt_tensor *dt_module_param_at(const dt_module *m, int i);

/* ---------------------------------------------------------------- tree queries */

/** The type name of @p m ("Linear", "GPT", ...; "(null)" for NULL). Static storage. */
DT_API const char *dt_module_type_name(const dt_module *m);
/** Local name in the parent ("" for a root). Borrowed. */
DT_API const char *dt_module_name(const dt_module *m);
/** The module @p m is registered under, or NULL for a root. Borrowed. */
DT_API dt_module *dt_module_parent(const dt_module *m);
/** The type's private data given to dt_module_create. Borrowed. */
DT_API void *dt_module_impl(const dt_module *m);
/** Number of direct children of @p m (0 for NULL). */
DT_API int dt_module_num_children(const dt_module *m);
/** Child @p i in registration order, or NULL. Borrowed. */
DT_API dt_module *dt_module_child_at(const dt_module *m, int i);
/** Direct child by local name, or NULL. Borrowed. */
DT_API dt_module *dt_module_child(const dt_module *m, const char *name);

/**
 * The descendant of @p root at @p fqn ("" = root itself). Borrowed.
 * Errors: DT_ERR_NOT_FOUND naming the first path segment that does not exist.
 */
DT_API dt_status dt_module_find(dt_module *root, const char *fqn, dt_module **out);

/**
 * Write m's FQN relative to its tree's root into @p buf (NUL-terminated).
 * Errors: DT_ERR_INVALID_ARG when @p len is too small (the text would be cut).
 */
DT_API dt_status dt_module_fqn(const dt_module *m, char *buf, size_t len);

/** Visitor of dt_module_foreach: @p fqn is borrowed for the call; non-DT_OK stops. */
typedef dt_status (*dt_module_visit_fn)(const char *fqn, dt_module *m, void *user);
/** Visit @p root and every descendant, pre-order, children in registration order. */
DT_API dt_status dt_module_foreach(dt_module *root, dt_module_visit_fn fn, void *user);

/**
 * Visitor of dt_module_foreach_param: @p fqn ("layers.0.attention.wq.weight")
 * and @p name ("weight") are borrowed for the call; @p owner is the module
 * holding the slot. Non-DT_OK stops the walk and is returned.
 */
typedef dt_status (*dt_param_visit_fn)(const char *fqn, dt_module *owner, const char *name,
                                       dt_tensor *param, void *user);
/** Visit every parameter of the subtree in the stable order (see top of file). */
DT_API dt_status dt_module_foreach_param(dt_module *root, dt_param_visit_fn fn, void *user);
/**
 * Move every parameter of the subtree, and its gradient, to @p device, in
 * place (PyTorch's module.to(device)): the parameter handles stay valid and
 * distributed parameters move their local shards. All or nothing: when a copy
 * fails (no memory on the device), nothing has moved. Call it before creating
 * an optimizer (its state is created on the parameters' device) and apply
 * data parallelism after it. DT_ERR_UNSUPPORTED for a device not built in.
 * Not collective.
 */
DT_API dt_status dt_module_to(dt_module *root, dt_device device);
/** Number of parameter tensors in the subtree. */
DT_API int dt_module_param_count(dt_module *root);
/** Total elements of the subtree's parameters (global numel for distributed ones). */
DT_API int64_t dt_module_param_numel(dt_module *root);

/**
 * Print the tree to @p f: one line per module (FQN and type, indented by
 * depth), one per parameter (name, global shape, dtype; for a distributed
 * one its placements, mesh and local shape), then the total elements, global
 * and on this rank. Not collective.
 */
DT_API dt_status dt_module_print(dt_module *root, FILE *f);

/* ---------------------------------------------------------------- forward and hooks */

/**
 * Run @p m: pre-hooks (which may replace inputs), ops->forward, then
 * post-hooks (which may replace the output). Inputs are borrowed; *out
 * receives a new reference. Errors: those of the hooks and the forward;
 * DT_ERR_INVALID_ARG when n_in is outside [0, DT_MODULE_MAX_INPUTS].
 */
DT_API dt_status dt_module_forward(dt_module *m, int n_in, dt_tensor *const *inputs,
                                   dt_tensor **out);
/** Shorthand for a one-input forward. */
DT_API dt_status dt_module_call(dt_module *m, dt_tensor *x, dt_tensor **out);

/**
 * Runs before forward. inputs[i] are references owned by the caller of the
 * hook; to replace one, release it and store a new reference. (PyTorch's
 * forward pre-hook; what a style's input_fn becomes.)
 */
typedef dt_status (*dt_module_pre_hook_fn)(dt_module *m, int n_in, dt_tensor **inputs, void *user);
/** Runs after forward; may replace *output the same way (release, store new). */
typedef dt_status (*dt_module_post_hook_fn)(dt_module *m, dt_tensor **output, void *user);

/**
 * Append a hook; hooks run in the order added. @p free_user (optional) is
 * called on @p user when the hook is removed or the module destroyed.
 */
DT_API dt_status dt_module_add_pre_hook(dt_module *m, dt_module_pre_hook_fn fn, void *user,
                                        void (*free_user)(void *));
DT_API dt_status dt_module_add_post_hook(dt_module *m, dt_module_post_hook_fn fn, void *user,
                                         void (*free_user)(void *));
/** Remove every hook of @p m (not of its children). */
DT_API void dt_module_clear_hooks(dt_module *m);

/**
 * Activation checkpointing (torch.utils.checkpoint per module): mark @p m so
 * that its forward under grad mode keeps none of its activations. The
 * module's own hooks run as usual; its type's forward (and so every
 * descendant, hooks included) runs with grad mode off and records one node,
 * which holds the inputs, the tensors in the parameter slots of @p m's
 * subtree, the forward random stream (dt_rng_get_state) and the autocast
 * dtype. When backward reaches that node, it re-runs the forward with grad
 * mode on from those, replaying the random stream, backpropagates through
 * the recomputed graph and hands the gradients of the inputs and of the
 * parameters on: gradients equal the plain run's bit for bit (with
 * tensor/sequence parallelism and DDP/ZeRO too: data parallelism's hooks see
 * the node as one consumer of each parameter).
 * @p enable false unmarks. Not collective; mark the same modules on every
 * rank. Errors: DT_ERR_INVALID_ARG for a NULL @p m.
 *
 * Limits: the graph must not outlive the model; a parameter of the subtree
 * the forward does not use gets a zero gradient (not none); the module must
 * compute only from its inputs and parameters (a nested backward that
 * reaches the outer graph fails with DT_ERR_INVALID_ARG); a ZeRO-3 unit
 * strictly inside a checkpointed module is refused in backward
 * (DT_ERR_UNSUPPORTED: checkpoint the unit or modules inside it); the
 * inputs must not be modified in place before backward.
 */
DT_API dt_status dt_module_checkpoint(dt_module *m, bool enable);
/** True when @p m is marked by dt_module_checkpoint; false for NULL. */
DT_API bool dt_module_is_checkpointed(const dt_module *m);
/**
 * Mark every module of @p root's tree whose FQN matches @p pattern, with the
 * plans' convention (dt_plan_add): segments separated by '.', each matching
 * one path segment with glob characters (fnmatch: '*' never crosses a '.')
 * and '|' alternatives, e.g. "layers.*" or "layers.*.attention|feed_forward".
 * @p n_marked (optional) receives the count. Not collective. Errors:
 * DT_ERR_INVALID_ARG for NULL @p root or @p pattern, an empty pattern (the
 * root itself: use dt_module_checkpoint) or an empty segment ("a..b");
 * DT_ERR_NOT_FOUND naming @p pattern when it matches no module (nothing is
 * marked).
 */
DT_API dt_status dt_module_checkpoint_matching(dt_module *root, const char *pattern, int *n_marked);

/* ================================================================ built-in layers */

/*
 * Each constructor makes a new root module with freshly allocated f32 CPU
 * parameters, initialised like PyTorch's: Linear and Embedding as their
 * constructors say below (so are the Linears inside Attention, FeedForward and
 * Block), LayerNorm weight one and bias zero. dt_gpt_create then overwrites
 * every parameter with dt_gpt_init. Types: "Linear", "Embedding", "LayerNorm",
 * "Attention", "MultiheadAttention", "FeedForward", "Block", "Sequential", "GPT".
 * All forwards take one input. The constructors are not collective.
 *
 * Default initialisation happens at creation, when the module has no parent
 * and so no FQN: each parameter is filled by global index (as dt_param_init
 * does) under the seed dt_param_seed(seed, key), where seed is the last
 * dt_nn_manual_seed's (DT_NN_DEFAULT_INIT_SEED until one is made) and key
 * stands for the FQN: the type and sizes, '#', and how many modules of that
 * type and sizes this process created before since that call (from 0), then
 * the parameter: "Linear(<in>,<out>)#<k>.weight", "Linear(<in>,<out>)#<k>.bias",
 * "Embedding(<num>,<dim>)#<k>.weight". So two layers of the same sizes (an
 * Attention's wq, wk and wv) start apart, as in PyTorch, and the values never
 * depend on the rank or the mesh: every rank of a job that builds the same
 * model in the same order (as SPMD programs do) holds the same full tensors,
 * and a parallel plan applied afterwards (dt_parallelize_module, which
 * slices each rank's full parameter) gives exactly the model a single process
 * trains. To build the same model twice in one process, call
 * dt_nn_manual_seed before each, as torch.manual_seed.
 */

/** The seed of the default initialisation before any dt_nn_manual_seed. */
#define DT_NN_DEFAULT_INIT_SEED 0

/**
 * Restart the default initialisation of new Linear and Embedding modules at
 * @p seed with every count at 0 (the rule above), like torch.manual_seed
 * before building a model. Not collective: a job calls it with the same seed
 * on every rank, or never. Thread-safe.
 */
DT_API void dt_nn_manual_seed(uint64_t seed);

/* ================================================================ forward random stream */

/** The seed of the forward random stream before any dt_rng_manual_seed. */
#define DT_RNG_DEFAULT_SEED 0x5eedULL

/** The forward random stream's whole state (counter-based: a seed and how
 *  many seeds were drawn). */
typedef struct dt_rng_state {
    uint64_t seed;
    uint64_t offset;
} dt_rng_state;

/**
 * Where random ops inside a forward take their seeds (torch's default
 * generator): dt_rng_next_seed returns splitmix64(seed ^ splitmix64(offset))
 * and advances offset. Activation checkpointing saves the state before a
 * checkpointed forward and replays it in the recompute, so dt_nn_dropout and
 * user ops drawing from the stream give the same values twice. Per thread;
 * not collective (ranks that must agree seed alike). dt_rng_manual_seed
 * restarts the stream at @p seed, offset 0.
 */
DT_API void dt_rng_manual_seed(uint64_t seed);
/** The next seed of the calling thread's forward random stream (see above). */
DT_API uint64_t dt_rng_next_seed(void);
/** The calling thread's forward random stream state. */
DT_API dt_rng_state dt_rng_get_state(void);
/** Restore a state returned by dt_rng_get_state. */
DT_API void dt_rng_set_state(dt_rng_state state);

/**
 * y = x W^T + b; parameters "weight" [out, in] and, with @p bias, "bias" [out],
 * both U(-1/sqrt(in_features), 1/sqrt(in_features)) (PyTorch's nn.Linear:
 * kaiming_uniform with a = sqrt(5)) drawn with dt_tensor_fill_uniform by
 * the default rule above. Errors: DT_ERR_INVALID_ARG naming a size <= 0;
 * DT_ERR_NO_MEMORY.
 */
DT_API dt_status dt_linear_create(int64_t in_features, int64_t out_features, bool bias,
                                  dt_module **out);
/**
 * out = weight[ids]; ids any shape (i32/i64/u16); parameter "weight" [num, dim],
 * N(0, 1) (PyTorch's nn.Embedding) drawn with dt_tensor_fill_normal by the
 * default rule above. Errors: DT_ERR_INVALID_ARG naming a size <= 0;
 * DT_ERR_NO_MEMORY.
 */
DT_API dt_status dt_embedding_create(int64_t num_embeddings, int64_t dim, dt_module **out);
/** LayerNorm over the last dim (biased variance); parameters "weight", "bias" [dim]. */
DT_API dt_status dt_layer_norm_create(int64_t dim, double eps, dt_module **out);
/**
 * Dropout (torch.nn.functional.dropout in training mode): *out = x * mask,
 * each mask element 1 / (1 - p) with probability 1 - p, else 0 (f32 @p x,
 * local or distributed: Shard and Replicate, not Partial). The mask is drawn
 * under one dt_rng_next_seed() by global index (dt_tensor_fill_uniform's
 * rule: u >= p keeps), so a shard's mask is the full tensor's slice and
 * activation checkpointing recomputes the same mask. p = 0 returns @p x
 * itself (a new reference). Differentiable (the gradient is masked the same
 * way). Not collective. Errors: DT_ERR_INVALID_ARG for NULL, p outside
 * [0, 1), a non-f32 or Partial @p x.
 */
DT_API dt_status dt_nn_dropout(dt_tensor *x, double p, dt_tensor **out);
/** A "Dropout" module (no parameters): forward = dt_nn_dropout(x, @p p).
 *  There is no eval mode: make it with p = 0 for evaluation. Errors:
 *  DT_ERR_INVALID_ARG for p outside [0, 1); DT_ERR_NO_MEMORY. */
DT_API dt_status dt_dropout_create(double p, dt_module **out);

/**
 * Causal self-attention with children "wq", "wk", "wv", "wo" (Linear dim->dim,
 * with bias). x [B, T, dim] -> [B, T, dim]. The number of heads it computes on
 * is the width of wq's output divided by head_dim = dim / n_heads, so a
 * column-sharded wq (a local output of dim/tp columns) runs on its local heads.
 * Errors: DT_ERR_INVALID_ARG when n_heads does not divide dim.
 */
DT_API dt_status dt_attention_create(int64_t dim, int64_t n_heads, dt_module **out);
/** The configuration of an "Attention" module. Errors: INVALID_ARG for another type. */
DT_API dt_status dt_attention_config(const dt_module *m, int64_t *n_heads, int64_t *head_dim);

/**
 * Self-attention with PyTorch's nn.MultiheadAttention layout and numerics
 * (batch_first=True, query = key = value = x, dropout 0): x [B, S, E] ->
 * [B, S, E]. Parameters "in_proj_weight" [3E, E] and "in_proj_bias" [3E] (the
 * q, k and v projections stacked in that order) and child "out_proj" (Linear
 * E->E with bias), so its state dict has PyTorch's names and layout. Each head
 * of head_dim = E / @p num_heads attends with softmax(q k^T / sqrt(head_dim)),
 * under a causal mask when @p causal (PyTorch's attn_mask of
 * nn.Transformer.generate_square_subsequent_mask / is_causal). Initialised as
 * PyTorch's _reset_parameters: in_proj_weight xavier_uniform (U(+-sqrt(6 /
 * 4E)), drawn by the default rule above under the key
 * "MultiheadAttention(<E>,<H>)#<k>"), both biases zero, out_proj.weight the
 * Linear default. Type "MultiheadAttention". The pairwise style shards it
 * (styles.h): every rank holds the q, k and v rows of its own heads
 * (in_proj placed _S(0,sf=3)) and the forward then computes on those heads
 * (the q, k, v thirds of such a parameter are S(0) tensors; their products
 * are handed on local). Not collective.
 * Errors: DT_ERR_INVALID_ARG when @p num_heads does not divide @p embed_dim
 * or a size is <= 0; DT_ERR_NO_MEMORY.
 */
DT_API dt_status dt_multihead_attention_create(int64_t embed_dim, int64_t num_heads, bool causal,
                                               dt_module **out);
/** The configuration of a "MultiheadAttention" module (any output may be
 *  NULL). Errors: DT_ERR_INVALID_ARG for another type. */
DT_API dt_status dt_multihead_attention_config(const dt_module *m, int64_t *num_heads,
                                               int64_t *head_dim, bool *causal);

/** w2(gelu_tanh(w1(x))): children "w1" (dim->hidden), "w2" (hidden->dim), with biases. */
DT_API dt_status dt_feed_forward_create(int64_t dim, int64_t hidden, dt_module **out);

/**
 * Pre-norm transformer block: h = x + attention(attention_norm(x));
 * out = h + feed_forward(ffn_norm(h)). Children "attention_norm", "attention",
 * "ffn_norm", "feed_forward".
 */
DT_API dt_status dt_block_create(int64_t dim, int64_t n_heads, int64_t ffn_dim, double eps,
                                 dt_module **out);

/** Runs its children in order; add them with dt_module_add_child (names "0", "1", ...). */
DT_API dt_status dt_sequential_create(dt_module **out);
/** Append @p child under the name of its index. Ownership as dt_module_add_child. */
DT_API dt_status dt_sequential_append(dt_module *seq, dt_module *child);

/* ================================================================ losses */

/**
 * Mean cross entropy over all positions: logits [..., C], targets [...] ids
 * (i32/i64/u16) -> scalar. Differentiable (dt_cross_entropy with no ignored
 * index). Errors: as dt_cross_entropy.
 */
DT_API dt_status dt_nn_cross_entropy(dt_tensor *logits, dt_tensor *targets, dt_tensor **loss);

/* ================================================================ token data */

typedef struct dt_token_data dt_token_data;

/**
 * Read a flat little-endian uint16 token file (the nanoGPT .bin layout) into
 * memory. Errors: DT_ERR_SYSTEM naming the path and errno text; DT_ERR_FORMAT
 * for an odd byte count.
 */
DT_API dt_status dt_token_data_open(const char *path, dt_token_data **out);
/** Wrap a copy of @p n tokens already in memory. */
DT_API dt_status dt_token_data_from_buffer(const uint16_t *tokens, int64_t n, dt_token_data **out);
/** Free the tokens. NULL-safe. */
DT_API void dt_token_data_close(dt_token_data *d);
/** Number of tokens (0 for NULL). */
DT_API int64_t dt_token_data_size(const dt_token_data *d);
/** Largest token id + 1 (0 for no tokens). */
DT_API int64_t dt_token_data_vocab(const dt_token_data *d);

/**
 * The batch of step @p step (spec "Data"): global batch @p batch, sequence
 * @p seq; row b takes the window starting at ((step*batch + b)*seq) mod
 * (n_tokens - seq - 1): inputs its seq tokens, targets the next seq. Only rows
 * [row_begin, row_end) are returned (a data-parallel rank's share), as i64
 * tensors [row_end - row_begin, seq] (new references).
 * Errors: DT_ERR_INVALID_ARG when the file has fewer than seq + 2 tokens or
 * the rows are out of range.
 */
DT_API dt_status dt_token_data_batch(const dt_token_data *d, int64_t step, int64_t batch,
                                     int64_t seq, int64_t row_begin, int64_t row_end,
                                     dt_tensor **inputs, dt_tensor **targets);

/* ========================================================== data-parallel batches and losses */

/* (src/nn/batch.c) What every data-parallel training loop needs: this rank's
 * rows of the global batch, and the loss of the global batch. */

/**
 * Rows [*lo, *hi) of a global batch of @p batch rows that this rank takes when
 * the batch is split over mesh dim @p dp_dim of @p mesh: coordinate r of R on
 * that dim takes [r*B/R, (r+1)*B/R) (sizes differ by at most one; every rank
 * has rows when B >= R). @p mesh NULL or @p dp_dim NULL (no data
 * parallelism): [0, batch). Works on a virtual mesh. Not collective.
 * With uneven rows, pass grad_scale = (hi - lo) / batch to dt_fully_shard /
 * dt_ddp_apply so that the gradient is the global batch's mean.
 * Errors: DT_ERR_INVALID_ARG for batch < 0 or NULL @p lo / @p hi;
 * DT_ERR_NOT_FOUND naming @p dp_dim when the mesh has no such dim.
 */
DT_API dt_status dt_dp_rows(const dt_mesh *mesh, const char *dp_dim, int64_t batch, int64_t *lo,
                            int64_t *hi);

/**
 * This rank's share of @p batch, a local tensor whose first dim is the global
 * batch (inputs, targets): a view of its rows [lo, hi) by dt_dp_rows, sharing
 * @p batch's storage, without autograd history. *out is a new reference
 * (@p batch itself, retained, when @p mesh or @p dp_dim is NULL). Not
 * collective. Errors: DT_ERR_INVALID_ARG for a NULL, 0-d or distributed
 * @p batch; those of dt_dp_rows.
 */
DT_API dt_status dt_dp_batch(dt_tensor *batch, const dt_mesh *mesh, const char *dp_dim,
                             dt_tensor **out);

/**
 * The value of a one-element tensor, local or distributed (a loss), as a
 * double. A local tensor: dt_tensor_item. A distributed one whose placements
 * are all Replicate: its local value, read without communication. Any other
 * (a Partial loss, a sharded one-element tensor): collective over its mesh
 * (dt_full_tensor with autograd off, then the item), so call it on every
 * rank of the mesh. Errors: DT_ERR_INVALID_ARG for NULL arguments or a tensor
 * that has not exactly one element; those of dt_full_tensor.
 */
DT_API dt_status dt_item(dt_tensor *t, double *out);

/**
 * The loss of the global batch when each rank of mesh dim @p dp_dim computed
 * @p loss as the mean over its rows of a @p batch-row global batch (split by
 * dt_dp_rows): the sum over the dp ranks of value * (hi - lo) / batch, in
 * double, the same on every rank. It equals the loss one process computes on
 * the whole batch, up to rounding. Reads @p loss with dt_item. Collective over
 * the @p dp_dim comm of @p mesh (one 8-byte all-reduce), and over @p loss's
 * mesh when dt_item is. @p mesh or @p dp_dim NULL: dt_item(loss), no
 * communication. Errors: those of dt_dp_rows and dt_item; batch <= 0 ->
 * DT_ERR_INVALID_ARG; DT_ERR_UNSUPPORTED on a virtual mesh (no comms);
 * communication errors.
 */
DT_API dt_status dt_dp_mean_loss(dt_tensor *loss, dt_mesh *mesh, const char *dp_dim, int64_t batch,
                                 double *out);

#ifdef __cplusplus
}
#endif

/* The GPT and the optimizers build on the module API above. */
#include "dtensor/gpt.h"
#include "dtensor/optim.h"

#endif /* DTENSOR_NN_H */
