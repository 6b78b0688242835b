/*
 * The CUDA backend's entry points for the rest of the library. The kernel
 * table dt__kernels_cuda (kernel_ops.h semantics, CPU table as reference) and
 * the device allocator exist only when DT_HAVE_CUDA is defined.
 *
 * Thread safety: table entries may be called from several threads; cuBLAS
 * handles (one per device) are used under a lock.
 */
#ifndef DT_KERNELS_CUDA_KERNELS_CUDA_H
#define DT_KERNELS_CUDA_KERNELS_CUDA_H

#include "kernels/kernel_ops.h"

extern const dt_kernel_ops dt__kernels_cuda;

/* Number of usable CUDA devices; 0 when there is no GPU or no driver (never an error). */
int dt__cuda_device_count(void);

/* The stream-ordered caching device allocator (alloc_cuda.c), registered with
 * dt__allocator_register(DT_DEVICE_CUDA, ...) when the library is loaded. */
extern const struct dt_allocator_ops dt__cuda_allocator;

/* Whether device @p index allocates from its stream-ordered pool (else
 * cudaMalloc: DT_ALLOC=system, or a device without memory pools). */
dt_status dt__cuda_device_pooled(const char *fn, int index, bool *pooled);

/* Table entries implemented in kernels_cuda_*.c */
dt_status dt__cuda_fill(dt_tensor *out, double value);
dt_status dt__cuda_copy(dt_tensor *dst, const dt_tensor *src);
dt_status dt__cuda_gemm(const dt_tensor *a, const dt_tensor *b, bool trans_a, bool trans_b,
                        float alpha, float beta, dt_tensor *c);
dt_status dt__cuda_binary(dt_binary_op op, const dt_tensor *a, const dt_tensor *b, dt_tensor *out);
dt_status dt__cuda_unary(dt_unary_op op, const dt_tensor *x, float alpha, dt_tensor *out);
dt_status dt__cuda_unary_backward(dt_unary_op op, const dt_tensor *x, const dt_tensor *gy,
                                  dt_tensor *gx);
dt_status dt__cuda_masked_fill(const dt_tensor *x, const dt_tensor *mask, float value,
                               dt_tensor *out);
dt_status dt__cuda_softmax(const dt_tensor *x, float scale, bool causal, bool log, dt_tensor *y);
dt_status dt__cuda_softmax_backward(const dt_tensor *y, const dt_tensor *gy, float scale, bool log,
                                    dt_tensor *gx);
dt_status dt__cuda_layer_norm(const dt_tensor *x, const dt_tensor *w, const dt_tensor *b, float eps,
                              dt_tensor *y, dt_tensor *mean, dt_tensor *rstd);
dt_status dt__cuda_layer_norm_backward(const dt_tensor *x, const dt_tensor *w,
                                       const dt_tensor *mean, const dt_tensor *rstd,
                                       const dt_tensor *gy, dt_tensor *gx, dt_tensor *gw,
                                       dt_tensor *gb);
dt_status dt__cuda_embedding(const dt_tensor *weight, const dt_tensor *ids, int64_t vocab_start,
                             dt_tensor *out);
dt_status dt__cuda_embedding_backward(const dt_tensor *ids, const dt_tensor *gy,
                                      int64_t vocab_start, dt_tensor *gweight);
dt_status dt__cuda_cross_entropy(const dt_tensor *logits, const dt_tensor *targets,
                                 int64_t ignore_index, dt_tensor *loss, dt_tensor *lse);
dt_status dt__cuda_cross_entropy_backward(const dt_tensor *logits, const dt_tensor *targets,
                                          int64_t ignore_index, const dt_tensor *lse,
                                          const dt_tensor *gloss, dt_tensor *glogits);
dt_status dt__cuda_reduce(dt_reduce_kind kind, const dt_tensor *x, int dim, dt_tensor *out,
                          dt_tensor *argmax);
dt_status dt__cuda_sgd_step(dt_tensor *p, const dt_tensor *g, dt_tensor *momentum_buf, float lr,
                            float momentum, float weight_decay);
dt_status dt__cuda_adamw_step(dt_tensor *p, const dt_tensor *g, dt_tensor *m, dt_tensor *v,
                              float lr, float beta1, float beta2, float eps, float weight_decay,
                              int64_t step);
dt_status dt__cuda_sum_squares(const dt_tensor *x, double *out);

#endif
