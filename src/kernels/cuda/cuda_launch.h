/*
 * The boundary between the C side of the CUDA backend (kernels_cuda*.c, which
 * unpacks dt_tensor) and the .cu files (which only see raw pointers, sizes and
 * strides). Plain C types only, so nvcc's C++ and the C compiler agree.
 *
 * Every launcher enqueues on @p stream and returns cudaGetLastError() of the
 * launch (cudaSuccess when there was nothing to do). Float kernels compute in
 * float32; dtype arguments are dt_dtype values.
 */
#ifndef DT_KERNELS_CUDA_LAUNCH_H
#define DT_KERNELS_CUDA_LAUNCH_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Mirrors of dt_binary_op / dt_unary_op / dt_reduce_kind (kernel_ops.h
 * cannot be included by nvcc's C++: it pulls in C11 atomics); the C side
 * checks they match with _Static_assert. */
enum { DT_CU_BIN_ADD, DT_CU_BIN_SUB, DT_CU_BIN_MUL, DT_CU_BIN_DIV };
enum {
    DT_CU_UN_SCALE,
    DT_CU_UN_ADD_SCALAR,
    DT_CU_UN_GELU_TANH,
    DT_CU_UN_RELU,
    DT_CU_UN_EXP,
    DT_CU_UN_LOG,
    DT_CU_UN_NEG,
    DT_CU_UN_SQRT,
    DT_CU_UN_SQUARE,
    DT_CU_UN_ROUND_BF16
};
enum { DT_CU_RED_SUM, DT_CU_RED_MEAN, DT_CU_RED_MAX };

#define DT_CU_MAX_DIMS 8
#define DT_CU_MAX_OPS  3

/*
 * Up to DT_CU_MAX_OPS operands walked over one shape (row-major flat index),
 * each with its own element strides (0 = broadcast). Built on the host by
 * dt__cuda_iter_init, which drops size-1 dims and merges dims contiguous in
 * every operand, so most element-wise launches divide only once per element.
 */
typedef struct dt__cu_iter {
    int ndim;
    int nops;
    int64_t numel;
    int64_t shape[DT_CU_MAX_DIMS];
    int64_t st[DT_CU_MAX_OPS][DT_CU_MAX_DIMS];
} dt__cu_iter;

/* ---------------------------------------------------------------- elementwise */
/* op 0 = out (any dtype) */
cudaError_t dt__cu_fill(void *out, int dtype, const dt__cu_iter *it, double value,
                        cudaStream_t stream);
/* op 0 = dst, op 1 = src; any dtype pair (ints via int64, saturating; else via double) */
cudaError_t dt__cu_copy(void *dst, int dst_dtype, const void *src, int src_dtype,
                        const dt__cu_iter *it, cudaStream_t stream);
/* op 0 = out, 1 = a, 2 = b; op is a dt_binary_op */
cudaError_t dt__cu_binary(int op, float *out, const float *a, const float *b, const dt__cu_iter *it,
                          cudaStream_t stream);
/* op 0 = out, 1 = x; op is a dt_unary_op */
cudaError_t dt__cu_unary(int op, float *out, const float *x, float alpha, const dt__cu_iter *it,
                         cudaStream_t stream);
/* op 0 = gx, 1 = x, 2 = gy; op is DT_UNARY_GELU_TANH or DT_UNARY_RELU */
cudaError_t dt__cu_unary_backward(int op, float *gx, const float *x, const float *gy,
                                  const dt__cu_iter *it, cudaStream_t stream);
/* op 0 = out, 1 = x, 2 = mask (integer dtype, nonzero = fill) */
cudaError_t dt__cu_masked_fill(float *out, const float *x, const void *mask, int mask_dtype,
                               float value, const dt__cu_iter *it, cudaStream_t stream);

/* ---------------------------------------------------------------- rows (contiguous) */
/* Softmax rows of `cols`; with causal, row r is query r % tq of a [tq, cols] block. */
cudaError_t dt__cu_softmax(const float *x, float *y, int64_t rows, int64_t cols, int64_t tq,
                           float scale, int causal, int log, cudaStream_t stream);
cudaError_t dt__cu_softmax_backward(const float *y, const float *gy, float *gx, int64_t rows,
                                    int64_t cols, float scale, int log, cudaStream_t stream);
/* w, b, mean, rstd may be NULL */
cudaError_t dt__cu_layer_norm(const float *x, const float *w, const float *b, float eps, float *y,
                              float *mean, float *rstd, int64_t rows, int64_t cols,
                              cudaStream_t stream);
/* w, gx, gw, gb may be NULL; gw/gb accumulate */
cudaError_t dt__cu_layer_norm_backward(const float *x, const float *w, const float *mean,
                                       const float *rstd, const float *gy, float *gx, float *gw,
                                       float *gb, int64_t rows, int64_t cols, cudaStream_t stream);
/* ids contiguous (n of ids_dtype); weight rows with row stride w_ld; out [n, dim] */
cudaError_t dt__cu_embedding(const float *w, int64_t w_rows, int64_t w_ld, int64_t dim,
                             const void *ids, int ids_dtype, int64_t n, int64_t vocab_start,
                             float *out, cudaStream_t stream);
/* gw [w_rows, dim] contiguous += gy [n, dim] */
cudaError_t dt__cu_embedding_backward(const void *ids, int ids_dtype, int64_t n, const float *gy,
                                      int64_t dim, int64_t vocab_start, float *gw, int64_t w_rows,
                                      cudaStream_t stream);
/*
 * loss [rows] (may be NULL), lse [rows] (may be NULL). A target outside
 * [0, cols) that is not ignore_index sets *bad (device int) to 1 + its row
 * (when *bad was 0) and gives a NaN loss.
 */
cudaError_t dt__cu_cross_entropy(const float *logits, int64_t rows, int64_t cols,
                                 const void *targets, int targets_dtype, int64_t ignore_index,
                                 float *loss, float *lse, int *bad, cudaStream_t stream);
/* *bad (device, preset to UINT64_MAX) becomes the first row whose target is
 * outside [0, cols) and not ignore_index. */
cudaError_t dt__cu_check_targets(const void *targets, int targets_dtype, int64_t rows, int64_t cols,
                                 int64_t ignore_index, unsigned long long *bad,
                                 cudaStream_t stream);
/* lse may be NULL (recomputed); gloss element r at gloss[r * gloss_stride] */
cudaError_t dt__cu_cross_entropy_backward(const float *logits, int64_t rows, int64_t cols,
                                          const void *targets, int targets_dtype,
                                          int64_t ignore_index, const float *lse,
                                          const float *gloss, int64_t gloss_stride, float *glogits,
                                          cudaStream_t stream);

/* ---------------------------------------------------------------- reductions */
/*
 * Reduce x (shape/strides, ndim dims) along @p dim into contiguous out
 * (numel / shape[dim] elements, row-major over the other dims). kind is a
 * dt_reduce_kind; argmax (int64, may be NULL) only with MAX.
 */
cudaError_t dt__cu_reduce(int kind, const float *x, int ndim, const int64_t *shape,
                          const int64_t *strides, int dim, float *out, int64_t *argmax,
                          cudaStream_t stream);
/* Sum of squares of op 0 of @p it in double, into *out (device, 1 double). */
cudaError_t dt__cu_sum_squares(const float *x, const dt__cu_iter *it, double *partials,
                               int max_partials, double *out, cudaStream_t stream);
/* Blocks dt__cu_sum_squares uses at most (size of its partials array). */
int dt__cu_sum_squares_max_partials(void);

/* ---------------------------------------------------------------- optimizers */
/* buf may be NULL when momentum == 0 */
cudaError_t dt__cu_sgd_step(float *p, const float *g, float *buf, int64_t n, float lr,
                            float momentum, float weight_decay, cudaStream_t stream);
/* bc1 = 1 - beta1^step, bc2 = 1 - beta2^step */
cudaError_t dt__cu_adamw_step(float *p, const float *g, float *m, float *v, int64_t n, float lr,
                              float beta1, float beta2, float eps, float weight_decay, float bc1,
                              float bc2, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
