/*
 * Helpers for the CUDA kernel tests: every kernel runs on the CPU table (the
 * reference) and on the CUDA table with the same inputs, and the results are
 * compared. A `cu_pair` holds the same tensor on both devices (with the same
 * view geometry, so strided and broadcast inputs are exercised on the GPU).
 */
#ifndef DT_TESTS_CUDA_UTIL_H
#define DT_TESTS_CUDA_UTIL_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "dtensor.h"
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/kernel_ops.h"

#define CU_OK(call)                                                                                \
    do {                                                                                           \
        dt_status cu_s_ = (call);                                                                  \
        if (cu_s_ != DT_OK)                                                                        \
            fail_msg("%s -> %s: %s", #call, dt_status_str(cu_s_), dt_last_error());                \
    } while (0)

static const dt_device cu_gpu0 = {DT_DEVICE_CUDA, 0};

static inline const dt_kernel_ops *cu_cpu(void)
{
    return dt__kernels_for(dt_device_cpu());
}
static inline const dt_kernel_ops *cu_gpu(void)
{
    return dt__kernels_for(cu_gpu0);
}

typedef struct cu_pair {
    dt_tensor *c; /* CPU */
    dt_tensor *g; /* CUDA */
} cu_pair;

static inline void cu_pair_release(cu_pair p)
{
    dt_tensor_release(p.c);
    dt_tensor_release(p.g);
}

static inline dt_tensor *cu_to_gpu(const dt_tensor *c)
{
    dt_tensor *g = NULL;
    CU_OK(dt_tensor_empty(dt_tensor_ndim(c), dt_tensor_shape(c), dt_tensor_dtype(c), cu_gpu0, &g));
    CU_OK(cu_gpu()->copy(g, c));
    return g;
}

static inline dt_tensor *cu_to_cpu(const dt_tensor *g)
{
    dt_tensor *c = NULL;
    CU_OK(dt_tensor_empty(dt_tensor_ndim(g), dt_tensor_shape(g), dt_tensor_dtype(g),
                          dt_device_cpu(), &c));
    CU_OK(cu_gpu()->copy(c, g));
    return c;
}

/* Uniform [lo, hi) f32 on both devices (the counter-based RNG, seeded). */
static inline cu_pair cu_rand(int ndim, const int64_t *shape, double lo, double hi, uint64_t seed)
{
    cu_pair p;
    CU_OK(dt_tensor_empty(ndim, shape, DT_DTYPE_F32, dt_device_cpu(), &p.c));
    CU_OK(dt_tensor_fill_uniform(p.c, lo, hi, seed, NULL, NULL));
    p.g = cu_to_gpu(p.c);
    return p;
}

/* Integer ids in [lo, hi) of @p dtype on both devices (xorshift from @p seed). */
static inline cu_pair cu_ids(int64_t n, dt_dtype dtype, int64_t lo, int64_t hi, uint64_t seed)
{
    cu_pair p;
    int64_t shape[1] = {n};
    int64_t *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    assert_non_null(v);
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        v[i] = lo + (int64_t)((x * 2685821657736338717ull) % (uint64_t)(hi - lo));
    }
    dt_tensor *t64 = NULL;
    CU_OK(dt_tensor_from_buffer(1, shape, DT_DTYPE_I64, v, &t64));
    free(v);
    CU_OK(dt_tensor_empty(1, shape, dtype, dt_device_cpu(), &p.c));
    CU_OK(cu_cpu()->copy(p.c, t64));
    dt_tensor_release(t64);
    p.g = cu_to_gpu(p.c);
    return p;
}

static inline cu_pair cu_empty(int ndim, const int64_t *shape, dt_dtype dtype)
{
    cu_pair p;
    CU_OK(dt_tensor_empty(ndim, shape, dtype, dt_device_cpu(), &p.c));
    CU_OK(dt_tensor_empty(ndim, shape, dtype, cu_gpu0, &p.g));
    return p;
}

/* The same zero-filled tensor on both devices (outputs that accumulate). */
static inline cu_pair cu_zeros(int ndim, const int64_t *shape)
{
    cu_pair p = cu_empty(ndim, shape, DT_DTYPE_F32);
    CU_OK(cu_cpu()->fill(p.c, 0.0));
    CU_OK(cu_gpu()->fill(p.g, 0.0));
    return p;
}

/* Views applied to both sides (their result owns new references). */
static inline cu_pair cu_transpose(cu_pair p, int d0, int d1)
{
    cu_pair v;
    CU_OK(dt_tensor_transpose(p.c, d0, d1, &v.c));
    CU_OK(dt_tensor_transpose(p.g, d0, d1, &v.g));
    return v;
}
static inline cu_pair cu_expand(cu_pair p, int ndim, const int64_t *shape)
{
    cu_pair v;
    CU_OK(dt_tensor_expand(p.c, ndim, shape, &v.c));
    CU_OK(dt_tensor_expand(p.g, ndim, shape, &v.g));
    return v;
}
static inline cu_pair cu_narrow(cu_pair p, int dim, int64_t start, int64_t len)
{
    cu_pair v;
    CU_OK(dt_tensor_narrow(p.c, dim, start, len, &v.c));
    CU_OK(dt_tensor_narrow(p.g, dim, start, len, &v.g));
    return v;
}

/* GPU result (downloaded) == CPU result within atol + rtol |cpu|; NaN == NaN. */
static inline void cu_expect_close(const char *what, cu_pair p, double atol, double rtol)
{
    dt_tensor *g = cu_to_cpu(p.g);
    int64_t n = dt_tensor_numel(p.c);
    assert_int_equal(dt_tensor_numel(g), n);
    for (int64_t i = 0; i < n; i++) {
        double w = dt_tensor_item_at(p.c, i), v = dt_tensor_item_at(g, i);
        bool ok =
            (isnan(w) && isnan(v)) || (isinf(w) && v == w) || fabs(v - w) <= atol + rtol * fabs(w);
        if (!ok)
            fail_msg("%s: element %lld is %.9g on cuda, %.9g on cpu", what, (long long)i, v, w);
    }
    dt_tensor_release(g);
}

#endif
