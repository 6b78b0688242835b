/*
 * Helpers shared by the CPU kernels (src/kernels/cpu/): argument checks, the
 * N-d strided iterator that collapses contiguous dims, contiguous staging of
 * strided inputs, and the branch-free float math the vectorised loops use.
 */
#ifndef DT_KERNELS_CPU_INTERNAL_H
#define DT_KERNELS_CPU_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "kernels/kernel_ops.h"

#define DT_NDITER_MAX_OPS 4

#include "core/clones.h" /* DT_CPU_CLONES: hot loops per ISA, picked at load time */

/*
 * Walks the elements of an N-d shape for up to DT_NDITER_MAX_OPS operands
 * with their own element strides. Dims of size 1 are dropped and adjacent
 * dims merged whenever every operand is contiguous across them, so the inner
 * run (`inner_n` elements with per-operand stride `inner_stride[k]`) is as
 * long as possible. `off[k]` is the element offset of the current run.
 * Usage: if (dt__nditer_init(...)) do { ... } while (dt__nditer_next(&it));
 */
typedef struct dt__nditer {
    int ndim; /* collapsed dims; the last one is the inner run */
    int nops;
    int64_t shape[DT_MAX_DIMS];
    int64_t strides[DT_NDITER_MAX_OPS][DT_MAX_DIMS];
    int64_t idx[DT_MAX_DIMS];
    int64_t off[DT_NDITER_MAX_OPS];
    int64_t inner_n;
    int64_t inner_stride[DT_NDITER_MAX_OPS];
} dt__nditer;

/* Returns false when the shape has no elements (nothing to visit). */
bool dt__nditer_init(dt__nditer *it, int ndim, const int64_t *shape, int nops,
                     const int64_t *const *strides);
/* Advances to the next inner run; false when done. */
bool dt__nditer_next(dt__nditer *it);

/*
 * Strides of @p t viewed with shape (ndim, shape) by broadcasting: dims are
 * aligned on the right, missing and size-1 dims get stride 0. Errors name
 * the mismatching dim.
 */
dt_status dt__cpu_broadcast_strides(const char *fn, const char *what, const dt_tensor *t, int ndim,
                                    const int64_t *shape, int64_t *strides);

/* Checks, DT_ERR_INVALID_ARG naming fn, what and the bad value: a CPU tensor
 * with local storage; */
dt_status dt__cpu_check_local(const char *fn, const char *what, const dt_tensor *t);
/* ... and of dtype @p dtype. */
dt_status dt__cpu_check(const char *fn, const char *what, const dt_tensor *t, dt_dtype dtype);
/* Same, and contiguous (outputs). */
dt_status dt__cpu_check_out(const char *fn, const char *what, const dt_tensor *t, dt_dtype dtype);
/* Same shape as @p ref (ndim and sizes). */
dt_status dt__cpu_check_same_shape(const char *fn, const char *what, const dt_tensor *t,
                                   const dt_tensor *ref);

/*
 * A contiguous view of @p t's data: @p t's own when contiguous (*tmp = NULL),
 * else a contiguous copy the caller releases with dt_tensor_release(*tmp).
 */
dt_status dt__cpu_contig(const dt_tensor *t, dt_tensor **tmp, const void **data);

/* Converts integer ids (i64, i32, u16, any layout) into a malloc'ed i64 array. */
dt_status dt__cpu_load_ids(const char *fn, const dt_tensor *ids, int64_t **out);

static inline float *dt__f32(const dt_tensor *t)
{
    return (float *)t->storage->data + t->offset;
}

/*
 * expf without a libm call, so loops using it vectorise: Cody-Waite range
 * reduction to [-ln2/2, ln2/2], a degree-6 polynomial (Cephes expf
 * coefficients, about 1 ulp), and 2^n built in the exponent bits.
 * dt__expf_core clamps its input to [-87.34, 88] and nothing else (the hot
 * loops' version); dt__expf adds exact edges: below -87.34 (and -inf) gives 0,
 * above 88 gives +inf, NaN stays NaN.
 */
static inline __attribute__((always_inline)) float dt__expf_core(float x)
{
    x = x < -87.33654f ? -87.33654f : x;
    x = x > 88.0f ? 88.0f : x;
    /* round to nearest by the 1.5 * 2^23 trick: vectorises without SSE4.1 */
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* NaN keeps flowing through p; the exponent is built from a sane n */
    uint32_t e = (uint32_t)((int32_t)(n == n ? n : 0.0f) + 127) << 23;
    float scale;
    memcpy(&scale, &e, sizeof(scale));
    return p * scale;
}

static inline __attribute__((always_inline)) float dt__expf(float x)
{
    float under = x < -87.33654f ? 0.0f : 1.0f;
    float over = x > 88.0f ? INFINITY : 1.0f;
    float c = x < -87.33654f ? -87.33654f : x;
    c = c > 88.0f ? 88.0f : c;
    float nan_or_zero = c - c; /* NaN only for a NaN input */
    c = (c == c) ? c : 0.0f;
    return dt__expf_core(c) * under * over + nan_or_zero;
}

/* 0.5 x (1 + tanh(k (x + 0.044715 x^3))), the spec's gelu_tanh, with
 * tanh(u) = 1 - 2 / (exp(2u) + 1). (Measured: this form vectorises 5x faster
 * than the equivalent x / (1 + exp(-2u)) with gcc 12.) */
static inline __attribute__((always_inline)) float dt__gelu_tanh(float x)
{
    const float k2 = 2.0f * 0.7978845608028654f;
    float t = 1.0f - 2.0f / (dt__expf_core(k2 * (x + 0.044715f * x * x * x)) + 1.0f);
    return 0.5f * x * (1.0f + t);
}

static inline __attribute__((always_inline)) float dt__gelu_tanh_grad(float x)
{
    const float k = 0.7978845608028654f;
    float u = k * (x + 0.044715f * x * x * x);
    float t = 1.0f - 2.0f / (dt__expf_core(2.0f * u) + 1.0f); /* tanh(u) */
    float du = k * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

/* Row reductions with 16 independent lanes (deterministic, vectorisable). */
float dt__cpu_row_max(const float *x, int64_t n);
float dt__cpu_row_sum(const float *x, int64_t n);
double dt__cpu_row_sum_sq_f64(const float *x, int64_t n);

/* The CPU kernels (semantics in kernel_ops.h), one concept per file. */
dt_status dt__cpu_fill(dt_tensor *out, double value);
dt_status dt__cpu_copy(dt_tensor *dst, const dt_tensor *src);
dt_status dt__cpu_gemm(const dt_tensor *a, const dt_tensor *b, bool trans_a, bool trans_b,
                       float alpha, float beta, dt_tensor *c);
dt_status dt__cpu_gemm_bias(const dt_tensor *a, const dt_tensor *b, bool trans_a, bool trans_b,
                            const dt_tensor *bias, dt_tensor *c);
dt_status dt__cpu_binary(dt_binary_op op, const dt_tensor *a, const dt_tensor *b, dt_tensor *out);
dt_status dt__cpu_unary(dt_unary_op op, const dt_tensor *x, float alpha, dt_tensor *out);
dt_status dt__cpu_unary_backward(dt_unary_op op, const dt_tensor *x, const dt_tensor *gy,
                                 dt_tensor *gx);
dt_status dt__cpu_softmax(const dt_tensor *x, float scale, bool causal, bool log, dt_tensor *y);
dt_status dt__cpu_softmax_backward(const dt_tensor *y, const dt_tensor *gy, float scale, bool log,
                                   dt_tensor *gx);
dt_status dt__cpu_layer_norm(const dt_tensor *x, const dt_tensor *w, const dt_tensor *b, float eps,
                             dt_tensor *y, dt_tensor *mean, dt_tensor *rstd);
dt_status dt__cpu_layer_norm_backward(const dt_tensor *x, const dt_tensor *w, const dt_tensor *mean,
                                      const dt_tensor *rstd, const dt_tensor *gy, dt_tensor *gx,
                                      dt_tensor *gw, dt_tensor *gb);
dt_status dt__cpu_embedding(const dt_tensor *weight, const dt_tensor *ids, int64_t vocab_start,
                            dt_tensor *out);
dt_status dt__cpu_embedding_backward(const dt_tensor *ids, const dt_tensor *gy, int64_t vocab_start,
                                     dt_tensor *gweight);
dt_status dt__cpu_cross_entropy(const dt_tensor *logits, const dt_tensor *targets,
                                int64_t ignore_index, dt_tensor *loss, dt_tensor *lse);
dt_status dt__cpu_cross_entropy_backward(const dt_tensor *logits, const dt_tensor *targets,
                                         int64_t ignore_index, const dt_tensor *lse,
                                         const dt_tensor *gloss, dt_tensor *glogits);
dt_status dt__cpu_reduce(dt_reduce_kind kind, const dt_tensor *x, int dim, dt_tensor *out,
                         dt_tensor *argmax);
dt_status dt__cpu_masked_fill(const dt_tensor *x, const dt_tensor *mask, float value,
                              dt_tensor *out);
dt_status dt__cpu_sgd_step(dt_tensor *p, const dt_tensor *g, dt_tensor *momentum_buf, float lr,
                           float momentum, float weight_decay);
dt_status dt__cpu_adamw_step(dt_tensor *p, const dt_tensor *g, dt_tensor *m, dt_tensor *v, float lr,
                             float beta1, float beta2, float eps, float weight_decay, int64_t step);
dt_status dt__cpu_sum_squares(const dt_tensor *x, double *out);

/*
 * half_stage.c: bf16 operands read natively (converted in L1-sized blocks or
 * rows around the kernels' f32 loops; f16 goes through bf16_widen.c). Off
 * (false) sends bf16 to bf16_widen.c too: the tests compare the two.
 */
extern bool dt__cpu_half_native;
/* dt__cpu_check / dt__cpu_check_out (@p out) for f32 or bf16. */
dt_status dt__cpu_check_fp(const char *fn, const char *what, const dt_tensor *t, bool out);
/* One inner run of an element-wise f32 loop: n elements of in[k] (stride
 * st[k]: 0, 1 or any) into o[0..n) (unit stride). */
typedef void (*dt__cpu_ew_fn)(const void *ctx, int64_t n, const float *const *in, const int64_t *st,
                              float *o);
/* out = fn(in...) over out's shape (contiguous out; in[k] viewed with
 * in_strides[k], up to DT_NDITER_MAX_OPS - 1 inputs), each operand f32 or bf16. */
dt_status dt__cpu_ew_run(dt_tensor *out, int nin, const dt_tensor *const *in,
                         const int64_t *const *in_strides, dt__cpu_ew_fn fn, const void *ctx);
/* Row kernels: elements [off, off + n) of contiguous @p data as f32 (the data
 * itself, or widened into buf); where an f32 row bound for t at off goes (t's
 * data or buf), and buf rounded into t once it is written (bf16 t). */
const float *dt__cpu_row_in(const void *data, dt_dtype dtype, int64_t off, int64_t n, float *buf);
float *dt__cpu_row_out(dt_tensor *t, int64_t off, float *buf);
void dt__cpu_row_done(dt_tensor *t, int64_t off, const float *buf, int64_t n);
/* @p k rows of @p n floats of scratch in rows[0..k) when @p need (a bf16
 * operand), else NULLs (f32 calls allocate nothing); free(rows[0]).
 * DT_ERR_NO_MEMORY naming fn. */
dt_status dt__cpu_scratch(const char *fn, bool need, int64_t n, int k, float **rows);

/* bf16_widen.c: the f32 stand-ins of one call's bf16/f16 tensors. */
enum { DT__CPU_WIDEN_MAX = 8 };
typedef struct dt__cpu_widen {
    int n;
    dt_tensor *orig[DT__CPU_WIDEN_MAX]; /* borrowed */
    dt_tensor *f32[DT__CPU_WIDEN_MAX];  /* owned */
    bool out[DT__CPU_WIDEN_MAX];        /* rounded back into orig at the end */
    dt_status st;                       /* the first failure of dt__cpu_widen_in */
} dt__cpu_widen;
/* @p t itself, or an f32 copy of it when it is bf16/f16 (@p is_out: the kernel
 * writes it, and dt__cpu_widen_end rounds it back). */
dt_tensor *dt__cpu_widen_in(dt__cpu_widen *w, const dt_tensor *t, bool is_out);
/* Round the outputs back (when @p st and w->st are DT_OK) and free the copies. */
dt_status dt__cpu_widen_end(dt__cpu_widen *w, dt_status st);

/* bf16_widen.c: the table's entries, taking half operands through f32 copies
 * where the kernels above do not read them natively (f32 operands, and bf16
 * ones those kernels read, go straight to them). */
dt_status dt__cpu_binary_any(dt_binary_op op, const dt_tensor *a, const dt_tensor *b,
                             dt_tensor *out);
dt_status dt__cpu_unary_any(dt_unary_op op, const dt_tensor *x, float alpha, dt_tensor *out);
dt_status dt__cpu_unary_backward_any(dt_unary_op op, const dt_tensor *x, const dt_tensor *gy,
                                     dt_tensor *gx);
dt_status dt__cpu_softmax_any(const dt_tensor *x, float scale, bool causal, bool log, dt_tensor *y);
dt_status dt__cpu_softmax_backward_any(const dt_tensor *y, const dt_tensor *gy, float scale,
                                       bool log, dt_tensor *gx);
dt_status dt__cpu_layer_norm_any(const dt_tensor *x, const dt_tensor *wt, const dt_tensor *b,
                                 float eps, dt_tensor *y, dt_tensor *mean, dt_tensor *rstd);
dt_status dt__cpu_layer_norm_backward_any(const dt_tensor *x, const dt_tensor *wt,
                                          const dt_tensor *mean, const dt_tensor *rstd,
                                          const dt_tensor *gy, dt_tensor *gx, dt_tensor *gw,
                                          dt_tensor *gb);
dt_status dt__cpu_embedding_any(const dt_tensor *weight, const dt_tensor *ids, int64_t vocab_start,
                                dt_tensor *out);
dt_status dt__cpu_embedding_backward_any(const dt_tensor *ids, const dt_tensor *gy,
                                         int64_t vocab_start, dt_tensor *gweight);
dt_status dt__cpu_cross_entropy_any(const dt_tensor *logits, const dt_tensor *targets,
                                    int64_t ignore_index, dt_tensor *loss, dt_tensor *lse);
dt_status dt__cpu_cross_entropy_backward_any(const dt_tensor *logits, const dt_tensor *targets,
                                             int64_t ignore_index, const dt_tensor *lse,
                                             const dt_tensor *gloss, dt_tensor *glogits);
dt_status dt__cpu_reduce_any(dt_reduce_kind kind, const dt_tensor *x, int dim, dt_tensor *out,
                             dt_tensor *argmax);
dt_status dt__cpu_masked_fill_any(const dt_tensor *x, const dt_tensor *mask, float value,
                                  dt_tensor *out);
dt_status dt__cpu_sum_squares_any(const dt_tensor *x, double *out);

#endif
