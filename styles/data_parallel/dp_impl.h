/*
 * The state behind dt_fully_shard / dt_ddp_apply (styles/data_parallel/),
 * shared by its files. Not installed.
 *
 *   dp_apply.c    validation, shards, units, hooks (the forward side)
 *   dp_gather.c   ZeRO all-gathers: storage drop/refill, prefetch, unpack
 *   dp_hooks.c    the autograd hooks: gradient ready, backward begins / ends, ZeRO-3 regather
 *   dp_grad.c     the gradient reductions: posting, completing, installing
 *   dp_pack.c     moving dp pieces of a tensor dim in and out of packed buffers
 *   memory_estimate*.c  dt_gpt_memory_estimate
 */
#ifndef DT_STYLES_DP_IMPL_H
#define DT_STYLES_DP_IMPL_H

#include "core/tensor_impl.h"
#include "dtensor/autograd.h"
#include "dtensor/data_parallel.h"
#include "dtensor/placement.h"

typedef struct dp_param {
    dt_module *owner;
    char *name; /* slot name in owner */
    char *fqn;
    int unit;
    /* the parameter as tensor parallelism left it: its spec (NULL when local) */
    dt_spec *tp_spec;
    dt_tensor *slot; /* what the slot holds between forwards (owned ref) */
    int ndim;
    int64_t lshape[DT_MAX_DIMS]; /* shape of the tp-local tensor the module computes on */
    /* dp sharding along dim k of the tp-local tensor (k < 0: replicated over dp) */
    int k;
    int64_t outer, inner;    /* elements before / after dim k */
    int64_t *klen, *koff;    /* [dp] piece of dim k held by each dp rank */
    size_t *counts, *displs; /* [dp] elements of each piece, and its offset when k == 0 */
    /* gathered tp-local tensor (ZeRO; with offload also for k < 0); storage
     * dropped between uses in ZeRO-3 */
    dt_tensor *gathered;
    bool resident;   /* gathered holds current values */
    dt_tensor *recv; /* receive buffer of a gather in flight (k > 0: packed; param_dtype) */
    dt_tensor *send; /* the shard in param_dtype, sent by a gather in flight (NULL: f32) */
    dt_work *gwork;  /* gather in flight */
    /* gradient reduction in flight */
    dt_work *rwork;
    dt_tensor *rsrc; /* the gradient sent (kept alive) */
    dt_tensor *rdst; /* the reduced gradient (ZeRO-2/3 sharded: the shard's) */
    bool rpending;
    /* this rank's gradients of backward passes without sync, to add to the
     * next synced one (f32, the tp-local shape; NULL: none) */
    dt_tensor *acc;
    /* DDP bucket */
    int bucket;
    int64_t boff;
    /* the leaf autograd accumulates the gradient into, where the dp hook
     * (dp_hooks.c) waits for it: the gathered tensor (ZeRO), else the slot's
     * local tensor (DDP; ZeRO for a parameter replicated over dp). Borrowed. */
    dt_tensor *leaf;
    /* what the slot holds during a forward: the leaf with the tp placements
     * (ZeRO; owned), or NULL when the slot's tensor is the leaf's (DDP) */
    dt_tensor *compute;
    struct dp_leaf_hook *hook; /* the hook's context (the leaf's hook list owns it) */
    dt_tensor *prior;          /* the leaf's gradient when backward began, given back at its end */
    bool ready;                /* its hook ran in this backward */
    bool left;                 /* its hook left the local gradient in .grad for later hooks */
} dp_param;

typedef struct dp_unit {
    dt_module *m;    /* NULL for the root unit 0 */
    int n, *idx;     /* its parameters */
    bool prefetched; /* a gather of the unit was posted and not yet completed */
} dp_unit;

typedef struct dp_bucket {
    dt_tensor *buf; /* flat, in the reduce dtype, gradient category */
    int64_t numel;
    int n_params, n_ready;
    dt_work *work;
} dp_bucket;

typedef struct dp_state {
    dt_dp_stage stage;
    dt_mesh *mesh;
    dt_comm *dp;
    int dp_dim, dp_size, dp_rank;
    double scale;
    dt_dtype reduce_dtype; /* what gradients are reduced in: f32 or bf16 */
    dt_dtype param_dtype;  /* what ZeRO gathers parameters in: f32 or bf16 */
    dt_dtype output_dtype; /* what the root's output is rounded to: f32 (as is) or bf16 */
    bool sync;             /* false: backward accumulates locally, no reduction */
    bool prefetch;
    /* cpu_offload on a compute device: the dp shards (f32 master weights, so
     * the optimizer state and step too) live in host memory; the module
     * computes on device copies (gathered, or copied for k < 0) */
    bool offload;
    int n_params;
    dp_param *p;
    int n_units;
    dp_unit *u;
    int n_buckets, next_post;
    dp_bucket *b;
    bool armed;          /* a forward recorded a graph; its backward has not ended */
    bool in_backward;    /* that backward began (priors stashed, end callback queued) */
    int *order, n_order; /* ZeRO-3 units in forward order (learnt at the first forward) */
    bool order_known;
    int refs; /* one per hook holding the state */
} dp_state;

/* The local data of @p t: itself, or its shard when distributed. Borrowed. */
static inline dt_tensor *dt__dp_local(dt_tensor *t)
{
    return t->dist != NULL ? t->local : t;
}

/* Whether param @p p computes on a copy of its shard: gathered (ZeRO) or on
 * the device (offload). */
static inline bool dt__dp_has_copy(const dp_state *s, const dp_param *p)
{
    return s->stage != DT_DP_DDP && (p->k >= 0 || s->offload);
}

/* Release one reference (a hook's free_user). */
void dt__dp_state_unref(void *user);

/* dp_shard.c: every parameter of @p root into s->p (with its tp layout);
 * whether the shards live on the host (cpu_offload @p asked and a device);
 * parameter @p p's dp shard, which replaces its slot tensor. */
dt_status dt__dp_collect_params(dp_state *s, dt_module *root);
bool dt__dp_wants_offload(const dp_state *s, bool asked);
dt_status dt__dp_shard_param(dp_state *s, dp_param *p);

/* dp_units.c: the unit modules (caller frees *mods) */
dt_status dt__dp_find_units(dt_module *root, const char *units, dt_module ***mods, int *n);

/* dp_gather.c */
dt_status dt__dp_storage_drop(dt_tensor *t);
dt_status dt__dp_storage_fill(dt_tensor *t, dt_mem_category cat);
/* Post the gather of param i into its gathered tensor (refilled first). */
dt_status dt__dp_gather_post(dp_state *s, int i);
/* Complete param i's gather (posting it first when none is in flight). */
dt_status dt__dp_gather_wait(dp_state *s, int i);
dt_status dt__dp_unit_gather_post(dp_state *s, int u);
dt_status dt__dp_unit_gather_wait(dp_state *s, int u);
void dt__dp_unit_drop(dp_state *s, int u);

/* dp_grad.c */
/* Param @p p's gradient of this backward is complete: @p g (contiguous f32,
 * the caller's to change) is scaled and its reduction posted (without sync:
 * kept in p->acc); ZeRO-3 drops the gathered storage. */
dt_status dt__dp_grad_ready(dp_state *s, dp_param *p, dt_tensor *g);
/* Test the works in flight (they progress inside calls on their comm) and
 * install the reductions that completed. */
dt_status dt__dp_progress(dp_state *s);
/* End of a synced backward: parameters that got no gradient are counted out
 * (DDP: zeros in their bucket), every reduction waited for and installed. */
dt_status dt__dp_grads_finish(dp_state *s);
/* Forget the reductions of a backward that failed. */
void dt__dp_grads_reset(dp_state *s);

/* dp_hooks.c */
/* Register the post-accumulate-grad hook on every p->leaf; on error none is left. */
dt_status dt__dp_hooks_register(dp_state *s);
/* Remove them (the state goes; a leaf the user holds keeps no hook of ours). */
void dt__dp_hooks_remove(dp_state *s);
/* End of the root's forward: the backward through @p out will be this model's. */
dt_status dt__dp_forward_end(dp_state *s, dt_tensor *out);
/* ZeRO-3: regather unit @p u before the backward through @p out, its output. */
dt_status dt__dp_unit_output_hook(dp_state *s, int u, dt_tensor *out);
/* A backward that began and failed: its reductions forgotten, gradients given back. */
void dt__dp_backward_abort(dp_state *s);

/* dp_pack.c: piece r of dim k = [outer, klen[r], inner]; tensor copies on their device.
 * full is a contiguous tp-local tensor, packed a contiguous 1-d buffer. */
dt_status dt__dp_pack(const dp_param *p, dt_tensor *full, dt_tensor *packed);
dt_status dt__dp_unpack(const dp_param *p, dt_tensor *packed, dt_tensor *full);
/* The piece of this rank out of a full tp-local tensor, contiguous, into @p piece. */
dt_status dt__dp_slice(const dp_param *p, int rank, dt_tensor *full, dt_tensor *piece);

#endif
