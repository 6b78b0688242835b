/*
 * dtensor/ops.h - differentiable tensor operations.
 *
 * Every op takes its inputs as borrowed handles and writes a new tensor to
 * `*out` (caller releases). When grad mode is on (autograd.h) and an input
 * requires grad, the op records a node on the tape so dt_backward() can
 * compute gradients. Compute happens in float32; inputs of other float dtypes
 * are rejected with DT_ERR_INVALID_ARG unless stated (ids are i32/i64/u16).
 *
 * Inputs may be local or distributed tensors (placement.h): on distributed
 * inputs the op follows the sharding-propagation rules and returns a
 * distributed result.
 *
 * Errors: DT_ERR_INVALID_ARG naming the bad shape/dtype/dim; DT_ERR_NO_MEMORY.
 */
#ifndef DTENSOR_OPS_H
#define DTENSOR_OPS_H

#include "dtensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ element-wise (broadcasting) */

DT_API dt_status dt_add(dt_tensor *a, dt_tensor *b, dt_tensor **out);
DT_API dt_status dt_sub(dt_tensor *a, dt_tensor *b, dt_tensor **out);
DT_API dt_status dt_mul(dt_tensor *a, dt_tensor *b, dt_tensor **out);
DT_API dt_status dt_div(dt_tensor *a, dt_tensor *b, dt_tensor **out);
/** out = a * s */
DT_API dt_status dt_scale(dt_tensor *a, double s, dt_tensor **out);
/** out = a + s */
DT_API dt_status dt_add_scalar(dt_tensor *a, double s, dt_tensor **out);
DT_API dt_status dt_gelu_tanh(dt_tensor *x, dt_tensor **out);
DT_API dt_status dt_relu(dt_tensor *x, dt_tensor **out);
/** out = x where mask == 0, else value; mask is u8, broadcastable to x. */
DT_API dt_status dt_masked_fill(dt_tensor *x, dt_tensor *mask, double value, dt_tensor **out);

/* ------------------------------------------------------------ linear algebra */

/**
 * Matrix product of the last two dims, op(a) @ op(b) where op transposes when
 * asked. a: [..., M, K], b: [..., K, N] (before transposition); leading batch
 * dims broadcast (b may be 2-d).
 */
DT_API dt_status dt_matmul(dt_tensor *a, dt_tensor *b, bool trans_a, bool trans_b,
                           dt_tensor **out);
/** y = x W^T + b: x [..., in], w [out, in], bias [out] or NULL. */
DT_API dt_status dt_linear(dt_tensor *x, dt_tensor *w, dt_tensor *bias, dt_tensor **out);

/* ------------------------------------------------------------ normalisation and softmax */

/** Softmax over dim @p dim. */
DT_API dt_status dt_softmax(dt_tensor *x, int dim, dt_tensor **out);
/**
 * Softmax over the last dim of x [..., Tq, Tk] after multiplying by @p scale,
 * with key positions > query position (aligned to the end) masked to -inf.
 */
DT_API dt_status dt_causal_softmax(dt_tensor *x, double scale, dt_tensor **out);
DT_API dt_status dt_log_softmax(dt_tensor *x, int dim, dt_tensor **out);
/** LayerNorm over the last dim (biased variance); weight/bias [last] or NULL. */
DT_API dt_status dt_layer_norm(dt_tensor *x, dt_tensor *weight, dt_tensor *bias, double eps,
                               dt_tensor **out);

/* ------------------------------------------------------------ embedding and loss */

/** out[..., :] = weight[ids[...], :]; ids i32/i64/u16; an id outside [0, rows) is an error. */
DT_API dt_status dt_embedding(dt_tensor *weight, dt_tensor *ids, dt_tensor **out);
/**
 * Mean cross entropy of logits [N, C] (or [..., C]) against targets [N] (ids),
 * skipping targets equal to @p ignore_index (mean over the others). Scalar out.
 */
DT_API dt_status dt_cross_entropy(dt_tensor *logits, dt_tensor *targets, int64_t ignore_index,
                                  dt_tensor **out);

/* ------------------------------------------------------------ reductions */

DT_API dt_status dt_sum(dt_tensor *x, int dim, bool keepdim, dt_tensor **out);
DT_API dt_status dt_mean(dt_tensor *x, int dim, bool keepdim, dt_tensor **out);
/** Max values along @p dim; the gradient flows to the (first) arg-max. */
DT_API dt_status dt_max(dt_tensor *x, int dim, bool keepdim, dt_tensor **out);
/** Sum of all elements, a scalar. */
DT_API dt_status dt_sum_all(dt_tensor *x, dt_tensor **out);

/* ------------------------------------------------------------ shape (differentiable views) */

DT_API dt_status dt_reshape(dt_tensor *x, int ndim, const int64_t *shape, dt_tensor **out);
DT_API dt_status dt_permute(dt_tensor *x, const int *perm, dt_tensor **out);
DT_API dt_status dt_transpose(dt_tensor *x, int d0, int d1, dt_tensor **out);
DT_API dt_status dt_narrow(dt_tensor *x, int dim, int64_t start, int64_t length,
                           dt_tensor **out);
DT_API dt_status dt_contiguous(dt_tensor *x, dt_tensor **out);
/** Concatenate @p n tensors along @p dim. */
DT_API dt_status dt_concat(int n, dt_tensor *const *xs, int dim, dt_tensor **out);
/** Split along @p dim into @p n pieces of @p sizes; outs[i] are new references. */
DT_API dt_status dt_split(dt_tensor *x, int dim, int n, const int64_t *sizes, dt_tensor **outs);

#ifdef __cplusplus
}
#endif
#endif /* DTENSOR_OPS_H */
