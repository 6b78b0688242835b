/*
 * dtensor/ops.h - differentiable tensor operations.
 *
 * Every op takes its inputs as borrowed handles and writes a new tensor to
 * `*out` (caller releases) only on success. When grad mode is on (autograd.h)
 * and an input requires grad, the op records a node on the tape so
 * dt_backward() can compute gradients. Compute happens in float32 (matrix
 * products may round their operands to bf16: dt_autocast_set); inputs of
 * other float dtypes are rejected with DT_ERR_INVALID_ARG unless stated (ids
 * are i32/i64/u16). Inputs may be strided views; results are new contiguous
 * tensors in memory category DT_MEM_ACTIVATION, except the shape ops, whose
 * results are views sharing the input's storage where the layout allows.
 * Ops on local tensors are not collective and do not synchronise threads.
 *
 * Inputs may be local or distributed tensors (placement.h). When any input
 * is distributed the op is COLLECTIVE over that mesh (every rank must call it
 * with the same global shapes and placements) and returns a distributed
 * result: the sharding rules (placement/rules/, PyTorch DTensor semantics)
 * pick the placements, redistribute the inputs where needed, run the local
 * op on the shards and wrap the result. A local tensor mixed with distributed
 * ones is read as Replicate (handy for ids, targets and masks). Inputs on
 * different meshes fail with DT_ERR_INVALID_ARG. Per mesh dim:
 *   - element-wise: Shard(d) with Shard(d) or Replicate -> Shard(d) (the
 *     Replicate side is sliced locally, or stays whole on a broadcast dim);
 *     Partial(sum) +/- Partial(sum), Partial(sum) * or / Replicate ->
 *     Partial(sum); scale keeps a Partial; other ops on a Partial reduce first;
 *   - matmul: S(M) x R -> S(-2); R x S(N) -> S(-1); S(K) x S(K) -> Partial;
 *     batch shards pass; linear: R x colwise w Shard(0) -> Shard(-1) (bias
 *     Shard(0)); Shard(-1) x rowwise w Shard(1) -> Partial(sum), a Replicate
 *     bias added once (by coordinate 0 of the Partial mesh dims);
 *   - softmax / log_softmax / layer_norm over a sharded dim, and max over a
 *     sharded dim, replicate it first; sum / mean over a sharded dim ->
 *     Partial(sum);
 *   - embedding with weight Shard(0) (vocabulary): ids outside a rank's rows
 *     give zeros, result Partial(sum); cross_entropy on Shard(-1) logits never
 *     gathers them (max and sum-exp all-reduced): a Replicate scalar;
 *   - reshape keeps a Shard where the chunks line up ([B,T,D] S(2) ->
 *     [B,T,H,hd] S(2) when the heads split evenly), permute/transpose move
 *     it; narrow/split/concat along a sharded dim replicate it first;
 *   - masked_fill has no rule: its inputs are replicated (a DT_LOG=warn line
 *     on subsystem "redist" names the op).
 * Gradients follow placement.h's convention (the gradient of a shard is the
 * shard of the global gradient, Partial read as Replicate); a Replicate input
 * of an op whose output is sharded or Partial gets its gradient all-reduced
 * in backward (what Megatron calls f).
 *
 * Errors: DT_ERR_INVALID_ARG naming the bad argument, shape, dtype, dim or
 * value (NULL inputs or `out` included); DT_ERR_NO_MEMORY; errors of the
 * collectives (comm.h) for distributed inputs.
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
/**
 * out = x's values rounded to @p dtype, kept f32: x.to(torch.bfloat16).float()
 * in PyTorch, with its backward: the gradient is rounded the same way (what a
 * bf16 tensor receives). DT_DTYPE_BF16 rounds to nearest, ties to even (NaN
 * and inf kept); DT_DTYPE_F32 returns x itself (a new reference). A
 * distributed x keeps its Shard/Replicate placements; a Partial one is summed
 * first. DT_ERR_INVALID_ARG for a non-f32 x or another dtype. Not collective
 * (except through a Partial x).
 */
DT_API dt_status dt_round_to_dtype(dt_tensor *x, dt_dtype dtype, dt_tensor **out);
/** out = x where mask == 0, else value; mask is u8, broadcastable to x (no gradient). */
DT_API dt_status dt_masked_fill(dt_tensor *x, dt_tensor *mask, double value, dt_tensor **out);

/* ------------------------------------------------------------ linear algebra */

/**
 * Matrix product of the last two dims, op(a) @ op(b) where op transposes when
 * asked. a: [..., M, K], b: [..., K, N] (after transposition; with trans_a
 * a is stored [..., K, M]); leading batch dims broadcast (either may be 2-d).
 * out: [batch..., M, N]. A transposed view of a contiguous matrix costs no copy.
 */
DT_API dt_status dt_matmul(dt_tensor *a, dt_tensor *b, bool trans_a, bool trans_b, dt_tensor **out);
/** y = x W^T + b: x [..., in], w [out, in], bias [out] or NULL. */
DT_API dt_status dt_linear(dt_tensor *x, dt_tensor *w, dt_tensor *bias, dt_tensor **out);
/**
 * Autocast for matrix products, as torch.autocast("cpu", dtype=torch.bfloat16)
 * for mm and linear: while the calling thread's setting is DT_DTYPE_BF16,
 * dt_matmul and dt_linear round their f32 operands to bf16 and multiply with
 * f32 accumulation (oneDNN's bf16 kernel on CPUs that have one: about 2x an
 * f32 matmul), giving f32 results; their backward passes run in the dtype
 * their forward ran in. Weights, gradients, optimizer state and every other
 * op stay f32. On distributed tensors the local products do the same (the
 * setting must agree across ranks). DT_DTYPE_F32 (the default) turns it off.
 * @p prev (may be NULL) gets the previous setting. DT_ERR_INVALID_ARG for any
 * other dtype. Per thread; not collective.
 */
DT_API dt_status dt_autocast_set(dt_dtype dtype, dt_dtype *prev);
/** The calling thread's autocast dtype for matrix products (DT_DTYPE_F32: off). */
DT_API dt_dtype dt_autocast_get(void);

/* ------------------------------------------------------------ normalisation and softmax */

/** Softmax over dim @p dim (negative counts from the end). */
DT_API dt_status dt_softmax(dt_tensor *x, int dim, dt_tensor **out);
/**
 * Softmax over the last dim of x [..., Tq, Tk] after multiplying by @p scale,
 * with key positions > query position (aligned to the end) masked to -inf:
 * key j of query i is masked when j > i + (Tk - Tq). Tq > Tk is an error.
 */
DT_API dt_status dt_causal_softmax(dt_tensor *x, double scale, dt_tensor **out);
DT_API dt_status dt_log_softmax(dt_tensor *x, int dim, dt_tensor **out);
/** LayerNorm over the last dim (biased variance); weight/bias [last] or NULL; eps >= 0. */
DT_API dt_status dt_layer_norm(dt_tensor *x, dt_tensor *weight, dt_tensor *bias, double eps,
                               dt_tensor **out);

/* ------------------------------------------------------------ embedding and loss */

/**
 * out[..., :] = weight[ids[...], :]; weight [rows, dim] f32; ids i32/i64/u16
 * of any shape; an id outside [0, rows) is an error naming it (checked on the
 * host for CPU ids). The gradient flows to weight only; repeated ids add up.
 */
DT_API dt_status dt_embedding(dt_tensor *weight, dt_tensor *ids, dt_tensor **out);
/**
 * Mean cross entropy of logits [N, C] (or [..., C]) against targets [N] (ids),
 * skipping targets equal to @p ignore_index (mean over the others). Scalar
 * (0-d) out; NaN when every target is ignored (as PyTorch). A target outside
 * [0, C) other than ignore_index is an error naming it.
 */
DT_API dt_status dt_cross_entropy(dt_tensor *logits, dt_tensor *targets, int64_t ignore_index,
                                  dt_tensor **out);

/* ------------------------------------------------------------ reductions */

DT_API dt_status dt_sum(dt_tensor *x, int dim, bool keepdim, dt_tensor **out);
DT_API dt_status dt_mean(dt_tensor *x, int dim, bool keepdim, dt_tensor **out);
/** Max values along @p dim; the gradient flows to the (first) arg-max (CPU only for now). */
DT_API dt_status dt_max(dt_tensor *x, int dim, bool keepdim, dt_tensor **out);
/** Sum of all elements, a 0-d tensor. */
DT_API dt_status dt_sum_all(dt_tensor *x, dt_tensor **out);

/* ------------------------------------------------------------ shape (differentiable views) */

/** A view when the layout allows, else a copy; one size may be -1 (inferred). */
DT_API dt_status dt_reshape(dt_tensor *x, int ndim, const int64_t *shape, dt_tensor **out);
DT_API dt_status dt_permute(dt_tensor *x, const int *perm, dt_tensor **out);
DT_API dt_status dt_transpose(dt_tensor *x, int d0, int d1, dt_tensor **out);
DT_API dt_status dt_narrow(dt_tensor *x, int dim, int64_t start, int64_t length, dt_tensor **out);
/** A contiguous tensor with x's values (a new handle even when x is contiguous). */
DT_API dt_status dt_contiguous(dt_tensor *x, dt_tensor **out);
/** Concatenate @p n >= 1 tensors (same shape outside @p dim) along @p dim into a new tensor. */
DT_API dt_status dt_concat(int n, dt_tensor *const *xs, int dim, dt_tensor **out);
/**
 * Split along @p dim into @p n pieces of @p sizes (>= 0, summing to the dim's
 * size); outs[i] are new references to views of x. Pieces left unused get a
 * zero gradient.
 */
DT_API dt_status dt_split(dt_tensor *x, int dim, int n, const int64_t *sizes, dt_tensor **outs);

#ifdef __cplusplus
}
#endif
#endif /* DTENSOR_OPS_H */
