/*
 * Tensor helpers below autograd: argument checks with messages, kernel table
 * lookup, allocation of results in a memory category, and the elementwise and
 * broadcast bookkeeping that both the autograd engine (summing gradients,
 * zeros for outputs that got none, reducing a broadcast gradient) and the
 * differentiable ops (src/ops/) need. None of them records on the tape.
 * "kt": kernel-level tensor helper. Not installed.
 */
#ifndef DT_KERNELS_KERNEL_TENSOR_H
#define DT_KERNELS_KERNEL_TENSOR_H

#include "core/error.h"
#include "kernels/kernel_ops.h"

/*
 * Refuse distributed inputs (DT_ERR_UNSUPPORTED naming the op) where only
 * local tensors make sense. Public ops route distributed inputs to the
 * sharding rules instead, with DT__DIST_DISPATCH (ops/dist_dispatch.h).
 */
dt_status dt__kt_reject_distributed(const char *op, int n, dt_tensor *const *xs);

/* NULL -> DT_ERR_INVALID_ARG "op: argument 'what' is NULL". */
dt_status dt__kt_check_not_null(const char *op, const char *what, const dt_tensor *t);
/* Non-NULL f32 tensor, else DT_ERR_INVALID_ARG naming its dtype. */
dt_status dt__kt_check_f32(const char *op, const char *what, const dt_tensor *t);

/* The kernel table of @p device, checked to support @p kop on f32. */
dt_status dt__kt_kernels(const char *op, dt_device device, dt_kernel_op kop,
                         const dt_kernel_ops **out);

/* New uninitialised / zero f32 tensor tagged DT_MEM_ACTIVATION. */
dt_status dt__kt_empty(int ndim, const int64_t *shape, dt_device device, dt_tensor **out);
dt_status dt__kt_zeros(int ndim, const int64_t *shape, dt_device device, dt_tensor **out);
/* Same, dtype and category given. */
dt_status dt__kt_empty_as(int ndim, const int64_t *shape, dt_dtype dtype, dt_device device,
                          dt_mem_category cat, dt_tensor **out);
/* @p t retained when contiguous, else a contiguous copy (activation category). */
dt_status dt__kt_contiguous(dt_tensor *t, dt_tensor **out);
/* A new handle on @p t's data with its geometry and no autograd state. */
dt_status dt__kt_alias(dt_tensor *t, dt_tensor **out);

/* Broadcast shape of a and b (numpy rules) into shape/ndim; names both shapes. */
dt_status dt__kt_broadcast_shape(const char *op, const dt_tensor *a, const dt_tensor *b, int *ndim,
                                 int64_t *shape);
/* Sum @p g down to @p shape (leading dims and size-1 dims): the gradient of a broadcast. */
dt_status dt__kt_reduce_to_shape(dt_tensor *g, int ndim, const int64_t *shape, dt_tensor **out);
/* Elementwise a op b into a new activation tensor of the broadcast shape (no autograd). */
dt_status dt__kt_binary_raw(dt_binary_op op, dt_tensor *a, dt_tensor *b, dt_tensor **out);
/* f(x; alpha) into a new activation tensor (no autograd). */
dt_status dt__kt_unary_raw(dt_unary_op op, dt_tensor *x, float alpha, dt_tensor **out);

/* Release each of n tensors (NULL entries allowed). */
void dt__kt_release_all(int n, dt_tensor **ts);

#endif
