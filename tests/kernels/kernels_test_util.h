/* Helpers for the kernel tests: random tensors, float64 references, comparison. */
#ifndef DT_TESTS_KERNELS_UTIL_H
#define DT_TESTS_KERNELS_UTIL_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "dtensor.h"
#include "kernels/kernel_ops.h"

static uint64_t ku_rng_state = 0x9e3779b97f4a7c15ull;

static inline double ku_uniform(void) /* [0, 1), xorshift64* */
{
    ku_rng_state ^= ku_rng_state >> 12;
    ku_rng_state ^= ku_rng_state << 25;
    ku_rng_state ^= ku_rng_state >> 27;
    return (double)((ku_rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static inline const dt_kernel_ops *ku_cpu(void)
{
    const dt_kernel_ops *k = dt__kernels_for(dt_device_cpu());
    assert_non_null(k);
    return k;
}

/* A contiguous f32 tensor with values uniform in [lo, hi). */
static inline dt_tensor *ku_rand(int ndim, const int64_t *shape, double lo, double hi)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    float *buf = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    assert_non_null(buf);
    for (int64_t i = 0; i < n; i++)
        buf[i] = (float)(lo + (hi - lo) * ku_uniform());
    dt_tensor *t = NULL;
    assert_int_equal(dt_tensor_from_buffer(ndim, shape, DT_DTYPE_F32, buf, &t), DT_OK);
    free(buf);
    return t;
}

static inline dt_tensor *ku_empty(int ndim, const int64_t *shape, dt_dtype dtype)
{
    dt_tensor *t = NULL;
    assert_int_equal(dt_tensor_empty(ndim, shape, dtype, dt_device_cpu(), &t), DT_OK);
    return t;
}

/* Every element of @p t as double, row-major (any layout). Caller frees. */
static inline double *ku_values(const dt_tensor *t)
{
    int64_t n = dt_tensor_numel(t);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = dt_tensor_item_at(t, i);
    return v;
}

/* |got - want| <= atol + rtol |want| for every element; names the first miss. */
static inline void ku_expect_close(const char *what, const dt_tensor *got, const double *want,
                                   double atol, double rtol)
{
    int64_t n = dt_tensor_numel(got);
    for (int64_t i = 0; i < n; i++) {
        double g = dt_tensor_item_at(got, i), w = want[i];
        bool ok =
            (isnan(w) && isnan(g)) || (isinf(w) && g == w) || fabs(g - w) <= atol + rtol * fabs(w);
        if (!ok)
            fail_msg("%s: element %lld is %.9g, expected %.9g", what, (long long)i, g, w);
    }
}

#endif
