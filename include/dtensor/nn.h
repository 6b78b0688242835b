/*
 * dtensor/nn.h - modules with fully qualified names, the reference GPT,
 * losses, optimizers and the token-file reader.
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
 * "Attention", "FeedForward", "Block", "Sequential", "GPT".
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

/* ================================================================ the reference GPT */

/** Sizes of the GPT of the spec (docs: shared spec gpt.md). */
typedef struct dt_gpt_config {
    int64_t vocab_size;
    int64_t max_seq_len;
    int64_t dim;
    int64_t n_layers;
    int64_t n_heads; /* head_dim = dim / n_heads */
    int64_t ffn_dim;
} dt_gpt_config;

/** Fill @p out with the preset "tiny" or "small". Errors: NOT_FOUND naming it. */
DT_API dt_status dt_gpt_config_preset(const char *name, dt_gpt_config *out);

/**
 * Build the GPT: children "tok_embeddings", "pos_embeddings", "layers"
 * (Sequential of Blocks "0".."n-1"), "norm", "output" (Linear, no bias), and
 * initialise it with dt_gpt_init(model, seed). Forward: ids [B, T] (T <=
 * max_seq_len) -> logits [B, T, vocab_size]. Inside dt_nn_deferred_begin/end
 * the parameters are deferred (no storage; dt_gpt_init's rules are kept for
 * dt_module_materialize). Not collective.
 * Errors: DT_ERR_INVALID_ARG naming a bad size.
 */
DT_API dt_status dt_gpt_create(const dt_gpt_config *cfg, uint64_t seed, dt_module **out);
/** The configuration of a "GPT" module. Borrowed; NULL for another type. */
DT_API const dt_gpt_config *dt_gpt_get_config(const dt_module *gpt);

/**
 * (Re)initialise every parameter by the spec: Linear and Embedding weights
 * Normal(0, 0.02), "wo" and "w2" weights Normal(0, 0.02 / sqrt(2 n_layers)),
 * biases 0, LayerNorm weight 1 and bias 0. Each weight is filled with
 * dt_tensor_fill_normal by global index under the seed dt_param_seed(seed,
 * fqn), so values depend only on (seed, FQN, global index): a sharded
 * (distributed) parameter gets exactly its slice of the full tensor, and every
 * mesh sees the same full weights. Not collective.
 */
DT_API dt_status dt_gpt_init(dt_module *gpt, uint64_t seed);

/**
 * The per-parameter seed: splitmix64(seed XOR fnv1a64(fqn)), where fnv1a64 is
 * 64-bit FNV-1a over the FQN's bytes (offset basis 0xcbf29ce484222325, prime
 * 0x100000001b3) and splitmix64(z) = z += 0x9e3779b97f4a7c15,
 * z = (z ^ z>>30) * 0xbf58476d1ce4e5b9, z = (z ^ z>>27) * 0x94d049bb133111eb,
 * z ^ z>>31.
 */
DT_API uint64_t dt_param_seed(uint64_t seed, const char *fqn);

/**
 * Fill @p param with Normal(0, std) by global index under
 * dt_param_seed(seed, fqn), or with the constant @p value when @p std is 0.
 * A distributed @p param fills its local shard with the elements at the
 * shard's global offset (dt_tensor_fill_normal's global_shape/offset), so the
 * shards of every rank together equal the full tensor filled the same way.
 * Not collective. Errors: DT_ERR_INVALID_ARG for a negative std, a Partial
 * placement, or a deferred @p param (use dt_module_param_init).
 */
DT_API dt_status dt_param_init(dt_tensor *param, const char *fqn, uint64_t seed, double std,
                               double value);
/**
 * dt_param_init on the parameter in slot @p name of @p owner, @p fqn naming
 * it: when the parameter is deferred nothing is written and the rule is kept
 * for dt_module_materialize (dt_gpt_init works this way). Not collective.
 * Errors: as dt_param_init; DT_ERR_NOT_FOUND naming a missing slot.
 */
DT_API dt_status dt_module_param_init(dt_module *owner, const char *name, const char *fqn,
                                      uint64_t seed, double std, double value);

/* ---------------------------------------------------------------- deferred initialisation */

/*
 * A model bigger than one rank's memory is built without storage, sharded,
 * then materialised shard by shard (PyTorch's meta device + to_empty +
 * reset_parameters):
 *
 *     dt_nn_deferred_begin();
 *     dt_status s = dt_gpt_create(&cfg, seed, &gpt);  // shapes and init rules only
 *     dt_nn_deferred_end();
 *     dt_parallelize_module(gpt, mesh, plan, "tp");   // specs and local shapes
 *     dt_fully_shard(gpt, mesh, "dp", &fsdp);         // (or dt_ddp_apply)
 *     dt_module_materialize(gpt);                     // each rank its shards
 *
 * Each parameter's slot remembers how it is initialised (the default rule of
 * its layer, then dt_module_param_init's, e.g. dt_gpt_init's); every rule
 * draws by global index, so the materialised shards hold exactly the values a
 * full initialisation followed by sharding gives, on any mesh.
 */

/**
 * Until the matching dt_nn_deferred_end, the built-in layers of this thread
 * (and dt_gpt_create) make deferred parameters: shape, dtype and device, no
 * storage. Nests. Not collective. A deferred model may be moved
 * (dt_module_to: only the device changes), printed, parallelized
 * (dt_parallelize_module, dt_fully_shard, dt_ddp_apply); running it
 * (dt_module_forward) or creating an optimizer on it fails with
 * DT_ERR_INVALID_ARG naming the first deferred parameter's FQN.
 */
DT_API void dt_nn_deferred_begin(void);
/** Leave one level of dt_nn_deferred_begin (nothing when none is open). */
DT_API void dt_nn_deferred_end(void);
/** Whether this thread is inside dt_nn_deferred_begin/end. */
DT_API bool dt_nn_deferred_active(void);
/** Whether @p param (a local tensor, or a distributed one's local shard) has no storage yet. */
DT_API bool dt_param_is_deferred(const dt_tensor *param);
/** Number of deferred parameters in the subtree of @p root (0 for NULL). */
DT_API int dt_module_num_deferred(const dt_module *root);
/**
 * Allocate every deferred parameter of the subtree, as it is now placed (the
 * local shard of a distributed one, tagged DT_MEM_PARAMETER, on its device),
 * and fill it by its slot's rule at its global offset. Parameters that have
 * storage are left alone, so a second call does nothing. Not collective.
 * Errors: DT_ERR_NO_MEMORY (or the budget's error) naming the FQN and the
 * bytes; DT_ERR_INVALID_ARG for a Partial parameter. On error the parameters
 * before the failing one are materialised, the rest still deferred.
 */
DT_API dt_status dt_module_materialize(dt_module *root);

/* ================================================================ incremental decoding */

/*
 * Text generation re-runs the GPT on one new token at a time. A KV cache
 * keeps every Attention's keys and values of the positions seen so far, so a
 * step computes the new positions only (Hugging Face's past_key_values):
 *
 *     dt_kv_cache *c;  dt_kv_cache_create(gpt, 1, cfg.max_seq_len, &c);
 *     dt_gpt_forward_cached(gpt, c, prompt_ids, &logits);   // [1, P] -> [1, P, V]
 *     for (...) dt_gpt_forward_cached(gpt, c, next_id, &logits);   // [1, 1] -> [1, 1, V]
 *
 * The cache holds what each Attention computes on: under column-sharded
 * wq/wk/wv with local outputs (the spec's tp plan) its local heads only, so
 * the cache is sharded by head like the projections, with no communication
 * of its own. The training forward (dt_module_forward) is unchanged.
 */

typedef struct dt_kv_cache dt_kv_cache;

/**
 * A cache for @p gpt (a "GPT" module, possibly parallelized; borrowed: it must
 * outlive the cache) for @p batch sequences of up to @p max_len positions
 * (<= the model's max_seq_len). Keys and values are allocated at the first
 * forward, per Attention, shaped [batch, local heads, max_len, head_dim] on
 * the device and in the dtype of its projections' outputs. Not collective.
 * Errors: DT_ERR_INVALID_ARG (not a GPT, batch < 1, max_len outside
 * [1, max_seq_len], naming the value), DT_ERR_NO_MEMORY.
 */
DT_API dt_status dt_kv_cache_create(dt_module *gpt, int64_t batch, int64_t max_len,
                                    dt_kv_cache **out);
/** Free the cache and its tensors. NULL-safe. */
DT_API void dt_kv_cache_destroy(dt_kv_cache *c);
/** Positions cached so far (the next forward's first position); 0 for NULL. */
DT_API int64_t dt_kv_cache_length(const dt_kv_cache *c);
/**
 * Bytes of keys and values this rank holds (the layers allocated so far): a
 * tp rank of the spec's plan holds 1/tp of a single process's. 0 for NULL.
 */
DT_API int64_t dt_kv_cache_nbytes(const dt_kv_cache *c);
/** Forget every position (keeps the memory): the next forward starts at 0. NULL-safe. */
DT_API void dt_kv_cache_reset(dt_kv_cache *c);

/**
 * Run @p gpt on @p ids [batch, T] as positions L..L+T-1, L =
 * dt_kv_cache_length(c): each Attention appends the new keys and values to
 * the cache and attends over positions 0..L+T-1 (causal among the new ones),
 * then the cache length becomes L+T. *logits: [batch, T, vocab_size] as the
 * model's forward gives them (under the spec's tp plan a distributed tensor
 * sharded on the vocabulary: dt_full_tensor gathers it). Goes through
 * dt_module_forward, so parallel styles' hooks run: collective whenever the
 * model's forward is (every rank of its mesh calls it with the same ids).
 * Records no autograd history. On error the cache length is unchanged.
 * Errors: DT_ERR_INVALID_ARG (ids not [batch, T] with T >= 1, L+T over the
 * cache's max_len, a cache made for another model), DT_ERR_UNSUPPORTED when an
 * Attention's q/k/v are distributed tensors (the cache needs local heads:
 * colwise wq/wk/wv with local outputs, or no parallelism); the forward's.
 */
DT_API dt_status dt_gpt_forward_cached(dt_module *gpt, dt_kv_cache *c, dt_tensor *ids,
                                       dt_tensor **logits);

/* ================================================================ losses */

/**
 * Mean cross entropy over all positions: logits [..., C], targets [...] ids
 * (i32/i64/u16) -> scalar. Differentiable (dt_cross_entropy with no ignored
 * index). Errors: as dt_cross_entropy.
 */
DT_API dt_status dt_nn_cross_entropy(dt_tensor *logits, dt_tensor *targets, dt_tensor **loss);

/* ================================================================ optimizers */

typedef struct dt_optim dt_optim;

enum {
    DT_SGD_PARAM_FIELD_LR = 1u << 0,
    DT_SGD_PARAM_FIELD_MOMENTUM = 1u << 1,
    DT_SGD_PARAM_FIELD_WEIGHT_DECAY = 1u << 2,
};
/** SGD (PyTorch torch.optim.SGD, dampening 0, no Nesterov). */
typedef struct dt_sgd_params {
    uint64_t field_mask;
    double lr;           /* default 0.01 */
    double momentum;     /* default 0: p -= lr * g */
    double weight_decay; /* default 0 (L2: g += wd * p) */
} dt_sgd_params;

enum {
    DT_ADAMW_PARAM_FIELD_LR = 1u << 0,
    DT_ADAMW_PARAM_FIELD_BETA1 = 1u << 1,
    DT_ADAMW_PARAM_FIELD_BETA2 = 1u << 2,
    DT_ADAMW_PARAM_FIELD_EPS = 1u << 3,
    DT_ADAMW_PARAM_FIELD_WEIGHT_DECAY = 1u << 4,
};
/**
 * AdamW (PyTorch torch.optim.AdamW): p -= lr * wd * p; m = b1 m + (1-b1) g;
 * v = b2 v + (1-b2) g^2; p -= lr / (1-b1^t) * m / (sqrt(v) / sqrt(1-b2^t) + eps).
 */
typedef struct dt_adamw_params {
    uint64_t field_mask;
    double lr;           /* default 1e-3 */
    double beta1;        /* default 0.9 */
    double beta2;        /* default 0.95 (the spec's) */
    double eps;          /* default 1e-8 */
    double weight_decay; /* default 0.1 (the spec's) */
} dt_adamw_params;

/**
 * An optimizer over every parameter of @p root, in the stable order, holding a
 * reference to each tensor and its FQN. Create it after the model is final
 * (after parallelizing): it captures the slots' tensors at this moment. State
 * (momentum, exp_avg, exp_avg_sq) is allocated lazily at the first step, shaped
 * like each parameter's local data, tagged DT_MEM_OPTIMIZER.
 * Errors: DT_ERR_INVALID_ARG naming a bad hyper-parameter, or a parameter
 * with a Partial placement.
 */
DT_API dt_status dt_optim_sgd_create(dt_module *root, const dt_sgd_params *p, dt_optim **out);
DT_API dt_status dt_optim_adamw_create(dt_module *root, const dt_adamw_params *p, dt_optim **out);
/** Free the optimizer and its state. NULL-safe. */
DT_API void dt_optim_destroy(dt_optim *o);

/**
 * One update of every parameter that has a gradient (parameters without one
 * are skipped, as in PyTorch). A distributed parameter's local shard is
 * updated in place with its gradient, which autograd keeps on the shard
 * (dt_tensor_grad, autograd.h): the distributed backward must deliver it in
 * the parameter's placements (reduced, not Partial). Not collective.
 * Errors: DT_ERR_INVALID_ARG naming the FQN for a size mismatch;
 * DT_ERR_UNSUPPORTED for a non-f32 or non-contiguous parameter or gradient,
 * or a device without the fused kernel.
 */
DT_API dt_status dt_optim_step(dt_optim *o);
/** Drop every parameter's gradient (PyTorch zero_grad(set_to_none=True)). */
DT_API void dt_optim_zero_grad(dt_optim *o);
/** The learning rate (0 for NULL); set_lr replaces it for the next steps
 * (schedules), unchecked, and ignores NULL. Not collective. */
DT_API double dt_optim_lr(const dt_optim *o);
DT_API void dt_optim_set_lr(dt_optim *o, double lr);
/** Steps taken so far. */
DT_API int64_t dt_optim_step_count(const dt_optim *o);

/* ------------------------------------------------------------ lr schedules */

typedef enum dt_lr_schedule_kind {
    DT_LR_CONSTANT, /* warm-up, then the base lr */
    DT_LR_LINEAR,   /* warm-up, then linear decay to the floor at total_steps */
    DT_LR_COSINE,   /* warm-up, then half a cosine down to the floor at total_steps */
} dt_lr_schedule_kind;

enum {
    DT_LR_SCHEDULE_PARAM_FIELD_KIND = 1u << 0,
    DT_LR_SCHEDULE_PARAM_FIELD_WARMUP_STEPS = 1u << 1,
    DT_LR_SCHEDULE_PARAM_FIELD_TOTAL_STEPS = 1u << 2,
    DT_LR_SCHEDULE_PARAM_FIELD_MIN_LR_RATIO = 1u << 3,
};
/**
 * A learning-rate schedule, as Hugging Face's get_{constant,linear,cosine}_
 * schedule_with_warmup (with a floor): at step s (from 0) the lr is
 * base * s / warmup_steps while s < warmup_steps, then
 * base * (min + (1 - min) * d(p)) with p = (s - warmup) / (total - warmup)
 * clamped to 1 and d(p) = 1 (constant), 1 - p (linear) or (1 + cos(pi p)) / 2
 * (cosine).
 */
typedef struct dt_lr_schedule_params {
    uint64_t field_mask;
    dt_lr_schedule_kind kind; /* default DT_LR_COSINE */
    int64_t warmup_steps;     /* default 0 */
    int64_t total_steps;      /* where the decay ends; required (> warmup) but for constant */
    double min_lr_ratio;      /* the floor, a fraction of the base lr in [0, 1]; default 0 */
} dt_lr_schedule_params;

/**
 * The lr of schedule @p p (NULL: all defaults, which needs total_steps, so an
 * error) at @p step for @p base_lr. Pure. Errors: DT_ERR_INVALID_ARG naming
 * the bad field (total_steps <= warmup_steps for a decay, a negative step or
 * warm-up, min_lr_ratio outside [0, 1], base_lr not finite >= 0).
 */
DT_API dt_status dt_lr_schedule_value(const dt_lr_schedule_params *p, double base_lr, int64_t step,
                                      double *lr);
/**
 * Set @p o's lr for its next step from schedule @p p at its step count (call
 * it before every dt_optim_step). Not collective. Errors: as
 * dt_lr_schedule_value.
 */
DT_API dt_status dt_optim_schedule(dt_optim *o, const dt_lr_schedule_params *p, double base_lr);
/** "sgd" or "adamw". */
DT_API const char *dt_optim_name(const dt_optim *o);
/**
 * Optimizer state placed like its parameter: state @p name ("exp_avg",
 * "exp_avg_sq", "momentum_buffer") of parameter @p i of @p o as a new
 * reference: for a distributed parameter (a tp shard, a ZeRO dp shard) a
 * distributed tensor with the parameter's spec wrapping the local state (no
 * copy, no communication: dt_full_tensor of it is the full state, as a
 * single-rank run would hold it); for a local parameter the state itself.
 * Errors: DT_ERR_NOT_FOUND when the optimizer has no such state (yet: states
 * exist from the first step) or @p i is out of range.
 */
DT_API dt_status dt_optim_state_placed(const dt_optim *o, int i, const char *name, dt_tensor **out);
/** Parameters the optimizer updates, their FQNs and tensors (borrowed). */
DT_API int dt_optim_num_params(const dt_optim *o);
DT_API const char *dt_optim_param_fqn(const dt_optim *o, int i);
DT_API dt_tensor *dt_optim_param_tensor(const dt_optim *o, int i);
/**
 * State tensor @p name ("momentum_buffer"; "exp_avg", "exp_avg_sq") of
 * parameter @p i, or NULL before the first step / for an unknown name.
 * Borrowed; local (shard-shaped).
 */
DT_API dt_tensor *dt_optim_param_state(const dt_optim *o, int i, const char *name);

/* Optimizer state for checkpoints (src/nn/optim_state.c). */
/** States the optimizer keeps per parameter with its hyper-parameters (SGD
 * without momentum: 0). */
DT_API int dt_optim_num_states(const dt_optim *o);
/** Name of state @p s (0 <= s < dt_optim_num_states), or NULL. Static. */
DT_API const char *dt_optim_state_name(const dt_optim *o, int s);
/**
 * Allocate the zero state of every parameter that has none yet (what its
 * first update would allocate, so no update changes), shaped like the
 * parameter's local data, tagged DT_MEM_OPTIMIZER. Not collective.
 * Errors: DT_ERR_NO_MEMORY (the state allocated so far is kept).
 */
DT_API dt_status dt_optim_state_init(dt_optim *o);
/** Set the steps taken so far (a resumed run). DT_ERR_INVALID_ARG when < 0. */
DT_API dt_status dt_optim_set_step_count(dt_optim *o, int64_t steps);

/**
 * Scale every gradient of @p root's parameters so that their global 2-norm is
 * at most @p max_norm (PyTorch clip_grad_norm_: coefficient
 * min(1, max_norm / (norm + 1e-6)) applied to every gradient). Writes the
 * norm before clipping to @p total_norm (may be NULL).
 * The gradient of a distributed parameter is its shard's, placed like the
 * parameter: each distinct shard counts once, its squares summed over the
 * mesh dims that shard the parameter (not the replicating ones), so every rank
 * gets the norm of the full gradients. Collective over the meshes of the
 * distributed parameters (one small all-reduce per mesh dim that shards some
 * gradient): every rank must call it with the same gradients present.
 * Errors: DT_ERR_INVALID_ARG for max_norm <= 0; DT_ERR_UNSUPPORTED for a
 * Partial parameter, a non-f32/non-contiguous gradient or a virtual mesh (no
 * comms); communication errors.
 */
DT_API dt_status dt_clip_grad_norm(dt_module *root, double max_norm, double *total_norm);

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
#endif /* DTENSOR_NN_H */
