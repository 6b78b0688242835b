/*
 * dtensor/gpt.h - the reference GPT of the spec: its config, creation and
 * initialisation, deferred (shard-at-init) creation, and incremental decoding
 * with a KV cache.
 * Included by dtensor/nn.h (and so by dtensor.h); including it alone works too.
 */
#ifndef DTENSOR_GPT_H
#define DTENSOR_GPT_H

#include "dtensor/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif
#endif /* DTENSOR_GPT_H */
