/*
 * Helpers of the differentiable ops (src/ops/) and of the sharding rules
 * above them: the checks and lookups only ops need. The helpers the autograd
 * engine shares with the ops (allocation, kernel lookup, broadcast
 * bookkeeping, dt__kt_*) sit below autograd, in kernels/kernel_tensor.h.
 */
#ifndef DT_OPS_INTERNAL_H
#define DT_OPS_INTERNAL_H

#include "autograd/node.h"
#include "core/error.h"
#include "kernels/kernel_ops.h"
#include "kernels/kernel_tensor.h"
#include "ops/dist_dispatch.h"

/* Non-NULL tensor of an id dtype (i32, i64, u16). */
dt_status dt__ops_check_ids(const char *op, const char *what, const dt_tensor *t);
/* Same device, else DT_ERR_INVALID_ARG. */
dt_status dt__ops_check_same_device(const char *op, const dt_tensor *a, const dt_tensor *b);
/* Normalise a (possibly negative) dim of an ndim-dim tensor; names the bad dim. */
dt_status dt__ops_wrap_dim(const char *op, int dim, int ndim, int *out);

/*
 * k->gemm(a, b, ...) into c, run in @p compute: DT_DTYPE_BF16 rounds f32 a
 * and b to bf16 first (f32 accumulation, c stays f32) where the device has a
 * bf16 GEMM; else as is. Matmul nodes record the forward's dtype
 * (dt_autocast_get) so their backward GEMMs run in it too (autocast.c).
 */
dt_status dt__ops_gemm(const dt_kernel_ops *k, dt_dtype compute, dt_tensor *a, dt_tensor *b,
                       bool ta, bool tb, float alpha, float beta, dt_tensor *c);
/* c = op(a) op(b) + bias ([N], on every row) in @p compute, as dt__ops_gemm:
 * in the GEMM's epilogue where the device has gemm_bias, else the bias
 * copied into c and a GEMM with beta 1. */
dt_status dt__ops_gemm_bias(const dt_kernel_ops *k, dt_dtype compute, dt_tensor *a, dt_tensor *b,
                            bool ta, bool tb, dt_tensor *bias, dt_tensor *c);
/* @p t as a GEMM operand of @p compute: a new bf16 copy of f32 @p t when
 * dt__ops_gemm would round it, else @p t itself (a new reference). Rounding
 * once lets a backward reuse it (a saved input, a gradient used twice). */
dt_status dt__ops_round(const dt_kernel_ops *k, dt_dtype compute, dt_tensor *t, dt_tensor **out);

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

#endif
