/*
 * dtensor/data_parallel.h - data parallelism over a mesh dim: DDP and fully
 * sharded data parallel (ZeRO-1/2/3), composable with tensor parallelism on a
 * (dp, tp) mesh, and a per-rank memory report.
 *
 * Every rank of the dp dim runs the same model on its own rows of the global
 * batch; gradients are summed over dp after being scaled by `grad_scale`
 * (default 1/dp: the mean of equal local batches; for uneven local batches
 * pass n_local / B so the result is the gradient of the global-batch mean).
 *
 *   DDP    parameters stay as they are (replicated over dp); each gradient is
 *          copied into a bucket as soon as backward produced it and a bucket is
 *          all-reduced (non-blocking) as soon as it is full, so communication
 *          overlaps the rest of backward.
 *   ZeRO-1 every parameter slot holds this rank's dp shard (see below), so an
 *          optimizer created afterwards keeps state for the shard only; the
 *          full (tp-local) parameters are all-gathered at each forward (all
 *          gathers posted when the forward starts, each unit (see ZeRO-3)
 *          waiting for its own) and kept; gradients all-reduced in full, each
 *          rank keeps its slice.
 *   ZeRO-2 as ZeRO-1, gradients reduce-scattered straight into the shards.
 *   ZeRO-3 as ZeRO-2, and the gathered parameters exist only while a unit
 *          (default: every child of the root that owns parameters, and every
 *          child of a parameterless child: for the GPT tok_embeddings,
 *          pos_embeddings, layers.i, norm, output) runs: gathered just before
 *          its forward (the next unit's gather prefetched, non-blocking), freed
 *          after it, gathered again just before its backward (the previous
 *          unit prefetched), freed once its gradients were reduce-scattered.
 *
 * The dp shard of a parameter: the parameter as tensor parallelism left it (a
 * distributed tensor on the tp slice, or a local tensor) is split over dp
 * along its first tensor dim that no other mesh dim shards (torch.chunk rule,
 * uneven shards allowed). The slot then holds a distributed tensor on the whole
 * mesh with Shard(k) on dp and the parameter's placements on the other dims, so
 * dt_full_tensor, dt_module_print, dt_save_full and dt_clip_grad_norm see the
 * exact full weights and gradients. A parameter every dim of which is already
 * sharded (a column-parallel bias) is split over dp along dim 0 all the same:
 * dp splits each tp piece, a strided shard (dt_strided_shard, "_S(0)" on dp,
 * PyTorch's _StridedShard), so under ZeRO no parameter is replicated over dp.
 * Only a 0-dim parameter stays replicated.
 *
 * Gradients come from autograd's public hooks (autograd.h), as in PyTorch's
 * DDP and FSDP2. Each parameter's gradient accumulates into one leaf - the
 * parameter itself (DDP) or the gathered tensor the module computes on
 * (ZeRO) - whose post-accumulate-grad hook, registered by dt_fully_shard,
 * runs once per backward when that gradient is complete (after the last of
 * its uses: a tensor used twice, as a tied embedding and output head, is
 * reduced once, from the sum) and starts its reduction (non-blocking). A
 * gradient hook on the model's output says backward began; ZeRO-3's on each
 * unit's output re-gathers the unit. A reduction found complete while
 * backward goes on is installed at once (its buffers freed); when the
 * backward pass ends (a queued callback) the rest are waited for and
 * installed on the slots' tensors, added to the gradients they had (so
 * backward passes accumulate). A parameter that got no gradient is counted
 * out then (DDP: zeros in its bucket, which is then all-reduced at the end of
 * backward with the buckets after it; ZeRO: no gradient), as PyTorch's
 * find_unused_parameters; every rank must use the same parameters, and reach
 * them only through the model's forward. One forward per backward.
 * Hooks of your own on a DDP parameter run next to DDP's, in registration
 * order, and see this pass's local gradient (unscaled, not reduced, without
 * what .grad held before backward); after dt_backward .grad holds the reduced
 * gradient added to what it held. Under ZeRO the slot holds the shard, which
 * autograd never reaches: its gradient is installed, no hook of it runs.
 *
 * Order: parallelize for tp first (dt_parallelize_module), then
 * dt_fully_shard / dt_ddp_apply, then create the optimizer.
 * Thread safety: as the module tree (one thread).
 */
#ifndef DTENSOR_DATA_PARALLEL_H
#define DTENSOR_DATA_PARALLEL_H

#include "dtensor/mesh.h"
#include "dtensor/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Data-parallel styles (only append). */
typedef enum dt_dp_stage {
    DT_DP_DDP = 0,
    DT_DP_ZERO1,
    DT_DP_ZERO2,
    DT_DP_ZERO3,
} dt_dp_stage;

/** "ddp", "zero1", "zero2", "zero3" ("invalid" otherwise). Static. */
DT_API const char *dt_dp_stage_name(dt_dp_stage stage);
/** Parse one of the names above; DT_ERR_INVALID_ARG naming the text otherwise. */
DT_API dt_status dt_dp_stage_parse(const char *text, dt_dp_stage *out);

enum {
    DT_FSDP_PARAM_FIELD_STAGE = 1u << 0,
    DT_FSDP_PARAM_FIELD_BUCKET_BYTES = 1u << 1,
    DT_FSDP_PARAM_FIELD_UNITS = 1u << 2,
    DT_FSDP_PARAM_FIELD_PREFETCH = 1u << 3,
    DT_FSDP_PARAM_FIELD_CPU_OFFLOAD = 1u << 4,
    DT_FSDP_PARAM_FIELD_GRAD_SCALE = 1u << 5,
    DT_FSDP_PARAM_FIELD_REDUCE_DTYPE = 1u << 6,
    DT_FSDP_PARAM_FIELD_PARAM_DTYPE = 1u << 7,
    DT_FSDP_PARAM_FIELD_OUTPUT_DTYPE = 1u << 8,
};

/** Options of dt_fully_shard / dt_ddp_apply (field-masked; NULL = defaults). */
typedef struct dt_fsdp_params {
    uint64_t field_mask;
    dt_dp_stage stage;     /* default DT_DP_ZERO3 (dt_ddp_apply forces DT_DP_DDP) */
    size_t bucket_bytes;   /* DDP bucket capacity, default 4 MiB (>= 1 parameter per bucket) */
    const char *units;     /* ZeRO units: comma-separated FQN patterns ('*' = one segment),
                              default: see the top of this file */
    bool prefetch;         /* ZeRO-3: gather the next unit while this one runs, default true */
    bool cpu_offload;      /* ZeRO on a device (sim, cuda): the dp shards (f32 master weights)
                              and so the optimizer state and step live in host memory; each
                              unit's parameters are copied/gathered to the device for compute
                              (prefetched as without offload), gradients reduced on the device
                              and copied to the host. A no-op for DDP and on CPU ranks. */
    double grad_scale;     /* factor on this rank's gradients before the dp sum, default 1/dp */
    dt_dtype reduce_dtype; /* what gradients are sent and summed in over dp, as FSDP2's
                              MixedPrecisionPolicy.reduce_dtype: DT_DTYPE_F32 (default) or
                              DT_DTYPE_BF16 (half the bytes; each partial sum is taken in f32
                              and rounded to bf16); the gradient installed is f32 either way */
    dt_dtype param_dtype;  /* what ZeRO gathers parameters in, as FSDP2's param_dtype:
                              DT_DTYPE_F32 (default) or DT_DTYPE_BF16 (each rank sends its f32
                              master shard rounded to bf16, half the bytes, and the module
                              computes on those values); DDP gathers nothing */
    dt_dtype output_dtype; /* what the model's forward output is cast to, as FSDP2's
                              output_dtype: DT_DTYPE_F32 (default: as computed) or
                              DT_DTYPE_BF16 (the root's output rounded to bf16 values, kept
                              f32, its gradient rounded likewise: dt_round_to_dtype); the
                              outputs of ZeRO-3 units inside the model are not cast */
} dt_fsdp_params;

/**
 * Make @p root data parallel over mesh dim @p dp_dim of @p mesh with the
 * stage of @p p (default ZeRO-3), in place: parameter slots are replaced by
 * their dp shards (ZeRO) and forward hooks are added to @p root (and to the
 * ZeRO-3 units); the state lives with the hooks (freed with the model).
 * Call once per model, after tensor parallelism (parameters distributed on a
 * slice of @p mesh that excludes @p dp_dim, or local) and before creating the
 * optimizer. A dp dim of size 1 is allowed (nothing is communicated).
 * Collective over the dp dim only in the sense that every dp rank must make
 * the same call; no communication happens here.
 * Errors: DT_ERR_NOT_FOUND naming @p dp_dim; DT_ERR_INVALID_ARG for a bad
 * stage, grad_scale <= 0, a reduce_dtype, param_dtype or output_dtype other
 * than f32 or bf16, a unit pattern that matches nothing, a parameter that
 * does not require grad (DDP: frozen parameters are not supported), a
 * parameter that is not f32 or is distributed on a mesh whose dims are not
 * dims of @p mesh other than @p dp_dim, or a model already made data parallel;
 * DT_ERR_UNSUPPORTED on a virtual mesh or for one tensor in two slots (tied
 * weights). On error the model is unchanged.
 */
DT_API dt_status dt_fully_shard(dt_module *root, dt_mesh *mesh, const char *dp_dim,
                                const dt_fsdp_params *p);

/**
 * Gradient accumulation without communication, as DDP's no_sync() and FSDP2's
 * set_requires_gradient_sync(False): while @p sync is false, backward passes
 * of the data-parallel model @p root (the module given to dt_fully_shard /
 * dt_ddp_apply) send nothing; each rank keeps its own gradients (scaled by
 * grad_scale) summed in a buffer of the tp-local parameter size (under ZeRO
 * that is the unsharded size: the memory FSDP's no_sync costs too), and the
 * parameters' gradients are not touched. The next backward with @p sync true
 * adds them to its own and reduces the sum once, so after it the gradients
 * equal those of one synced backward per micro-batch, with one reduction.
 * Call between iterations (not while a backward is pending). Not collective,
 * but every dp rank must make the same calls. Errors: DT_ERR_INVALID_ARG when
 * @p root is not a data-parallel root or a backward is pending.
 */
DT_API dt_status dt_dp_set_gradient_sync(dt_module *root, bool sync);

/** dt_fully_shard with the stage forced to DT_DP_DDP (other fields as given). */
DT_API dt_status dt_ddp_apply(dt_module *root, dt_mesh *mesh, const char *dp_dim,
                              const dt_fsdp_params *p);

/** What dt_gpt_memory_estimate models: a train_gpt run (zero-initialise, then set). */
typedef struct dt_memory_estimate_config {
    dt_gpt_config gpt;
    int dp, tp;                    /* mesh shape (1, 1: one rank) */
    bool sequence_parallel;        /* the default plan's SequenceParallel variant */
    bool data_parallel;            /* a dp dim with a style (false: dp must be 1) */
    dt_dp_stage stage;             /* with data_parallel */
    bool cpu_offload;              /* a no-op on CPU ranks, as in dt_fully_shard */
    const char *optim;             /* "sgd" or "adamw" (NULL: adamw) */
    double momentum;               /* sgd: 0 keeps no state */
    int64_t batch, seq;            /* global batch (split over dp as train_gpt does) and T */
    bool eager_init;               /* the full model on every rank before sharding (--eager-init;
                                      also what one rank does) */
    bool activation_checkpointing; /* the blocks layers.* checkpointed (dt_module_checkpoint):
                                      each keeps its input, recomputed in backward */
} dt_memory_estimate_config;

/** Per-rank bytes of the largest rank, by category (peak of each, as dt_memory_stats). */
typedef struct dt_memory_estimate {
    int64_t peak[DT_MEM_CATEGORY_COUNT]; /* peak live bytes of each category */
    int64_t total_peak;                  /* peak of the sum (not the sum of the peaks) */
    const char *peak_at;                 /* "init", "forward", "backward", "optimizer step" */
    int64_t model_bytes;                 /* the whole model's f32 parameters */
} dt_memory_estimate;

/**
 * Host bytes per rank that training the GPT of @p c with train_gpt's loop
 * will hold, before anything is allocated: parameters (shards, ZeRO's
 * gathered copies), gradients, optimizer state, activations (what autograd
 * saves, the backward's temporaries), communication buffers (packed ZeRO
 * gathers and reductions) and the total. Derived by replaying, on a ledger,
 * what the model's ops, the default tensor-parallel plan, the data-parallel
 * style and the optimizer allocate and free, in their order, for a first
 * and a steady training step (styles/data_parallel/memory_estimate.c); the
 * measured dt_memory_stats peaks are its counterpart. Pure: no allocation
 * of tensors, no communication.
 * Errors: DT_ERR_INVALID_ARG naming a bad size, dp/tp, optimizer or stage.
 */
DT_API dt_status dt_gpt_memory_estimate(const dt_memory_estimate_config *c,
                                        dt_memory_estimate *out);

/**
 * Print @p e as a table (MiB by category, the total peak and when it
 * happens) to @p f; with @p measured (a rank's dt_memory_stats, may be NULL)
 * a measured column and measured / estimate ratios next to it.
 */
DT_API void dt_memory_estimate_print(const dt_memory_estimate *e, const dt_memory_stats *measured,
                                     FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* DTENSOR_DATA_PARALLEL_H */
