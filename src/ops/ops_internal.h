/*
 * Helpers shared by the differentiable ops (src/ops/) and the autograd engine
 * (src/autograd/): argument checks with messages, allocation of results in
 * the activation category, kernel lookup, and broadcast bookkeeping.
 */
#ifndef DT_OPS_INTERNAL_H
#define DT_OPS_INTERNAL_H

#include "autograd/node.h"
#include "core/error.h"
#include "kernels/kernel_ops.h"
#include "ops/dist_dispatch.h"

/*
 * Refuse distributed inputs (DT_ERR_UNSUPPORTED naming the op) where only
 * local tensors make sense. Public ops route distributed inputs to the
 * sharding rules instead, with DT__DIST_DISPATCH (dist_dispatch.h).
 */
dt_status dt__ops_reject_distributed(const char *op, int n, dt_tensor *const *xs);

/* NULL -> DT_ERR_INVALID_ARG "op: argument 'what' is NULL". */
dt_status dt__ops_check_not_null(const char *op, const char *what, const dt_tensor *t);
/* Non-NULL f32 tensor, else DT_ERR_INVALID_ARG naming its dtype. */
dt_status dt__ops_check_f32(const char *op, const char *what, const dt_tensor *t);
/* Non-NULL tensor of an id dtype (i32, i64, u16). */
dt_status dt__ops_check_ids(const char *op, const char *what, const dt_tensor *t);
/* Same device, else DT_ERR_INVALID_ARG. */
dt_status dt__ops_check_same_device(const char *op, const dt_tensor *a, const dt_tensor *b);
/* Normalise a (possibly negative) dim of an ndim-dim tensor; names the bad dim. */
dt_status dt__ops_wrap_dim(const char *op, int dim, int ndim, int *out);

/* The kernel table of @p device, checked to support @p kop on f32. */
dt_status dt__ops_kernels(const char *op, dt_device device, dt_kernel_op kop,
                          const dt_kernel_ops **out);

/* New uninitialised / zero f32 tensor tagged DT_MEM_ACTIVATION. */
dt_status dt__ops_empty(int ndim, const int64_t *shape, dt_device device, dt_tensor **out);
dt_status dt__ops_zeros(int ndim, const int64_t *shape, dt_device device, dt_tensor **out);
/* Same, dtype and category given. */
dt_status dt__ops_empty_as(int ndim, const int64_t *shape, dt_dtype dtype, dt_device device,
                           dt_mem_category cat, dt_tensor **out);
/* @p t retained when contiguous, else a contiguous copy (activation category). */
dt_status dt__ops_contiguous(dt_tensor *t, dt_tensor **out);
/*
 * k->gemm(a, b, ...) into c, run in @p compute: DT_DTYPE_BF16 rounds f32 a
 * and b to bf16 first (f32 accumulation, c stays f32) where the device has a
 * bf16 GEMM; else as is. Matmul nodes record the forward's dtype
 * (dt_autocast_get) so their backward GEMMs run in it too (autocast.c).
 */
dt_status dt__ops_gemm(const dt_kernel_ops *k, dt_dtype compute, dt_tensor *a, dt_tensor *b,
                       bool ta, bool tb, float alpha, float beta, dt_tensor *c);
/* A new handle on @p t's data with its geometry and no autograd state. */
dt_status dt__ops_alias(dt_tensor *t, dt_tensor **out);

/* Broadcast shape of a and b (numpy rules) into shape/ndim; names both shapes. */
dt_status dt__ops_broadcast_shape(const char *op, const dt_tensor *a, const dt_tensor *b, int *ndim,
                                  int64_t *shape);
/* Sum @p g down to @p shape (leading dims and size-1 dims): the gradient of a broadcast. */
dt_status dt__ops_reduce_to_shape(dt_tensor *g, int ndim, const int64_t *shape, dt_tensor **out);
/* Elementwise a op b into a new activation tensor of the broadcast shape (no autograd). */
dt_status dt__ops_binary_raw(dt_binary_op op, dt_tensor *a, dt_tensor *b, dt_tensor **out);
/* f(x; alpha) into a new activation tensor (no autograd). */
dt_status dt__ops_unary_raw(dt_unary_op op, dt_tensor *x, float alpha, dt_tensor **out);

/*
 * Check every id of CPU tensor @p ids lies in [0, n) or equals @p ignore
 * (INT64_MIN for none) and count the ids not ignored (embedding.c). Ids on
 * another device are not read on the host (the count is then numel).
 */
dt_status dt__ops_check_id_range(const char *op, const char *what, const dt_tensor *ids, int64_t n,
                                 int64_t ignore, int64_t *n_valid);

/*
 * Embedding lookup into a vocabulary shard (local tensors): rows of @p weight
 * hold ids [vocab_start, vocab_start + rows); other ids give zero rows and no
 * gradient (embedding.c). Differentiable in weight.
 */
dt_status dt__ops_embedding_shard(dt_tensor *weight, dt_tensor *ids, int64_t vocab_start,
                                  dt_tensor **out);

/* Release each of n tensors (NULL entries allowed). */
void dt__ops_release_all(int n, dt_tensor **ts);

#endif
