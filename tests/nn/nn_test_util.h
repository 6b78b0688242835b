/* Shared helpers of the nn tests: status checks, deterministic inputs, float64 views. */
#ifndef NN_TEST_UTIL_H
#define NN_TEST_UTIL_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dtensor.h"

#define NN_OK(call)                                                                                \
    do {                                                                                           \
        dt_status nn_s_ = (call);                                                                  \
        if (nn_s_ != DT_OK)                                                                        \
            fail_msg("%s -> %s: %s", #call, dt_status_str(nn_s_), dt_last_error());                \
    } while (0)

/* Expect @p call to fail with @p want and a non-empty message containing @p text. */
#define NN_FAILS(call, want, text)                                                                 \
    do {                                                                                           \
        dt_clear_error();                                                                          \
        dt_status nn_s_ = (call);                                                                  \
        if (nn_s_ != (want))                                                                       \
            fail_msg("%s -> %s, expected %s", #call, dt_status_str(nn_s_), dt_status_str(want));   \
        if (strstr(dt_last_error(), (text)) == NULL)                                               \
            fail_msg("%s: message '%s' does not mention '%s'", #call, dt_last_error(), (text));    \
    } while (0)

static uint64_t nn_rng_state = 0x9e3779b97f4a7c15ull;

static inline double nn_rand(void) /* xorshift64, uniform [0, 1) */
{
    nn_rng_state ^= nn_rng_state << 13;
    nn_rng_state ^= nn_rng_state >> 7;
    nn_rng_state ^= nn_rng_state << 17;
    return (double)(nn_rng_state >> 11) / 9007199254740992.0;
}

/* Fill a contiguous f32 CPU tensor with uniform values in [lo, hi). */
static inline void nn_fill_rand(dt_tensor *t, double lo, double hi)
{
    float *p = dt_tensor_data(t);
    for (int64_t i = 0; i < dt_tensor_numel(t); i++)
        p[i] = (float)(lo + (hi - lo) * nn_rand());
}

static inline dt_tensor *nn_rand_tensor(int ndim, const int64_t *shape, double lo, double hi)
{
    dt_tensor *t = NULL;
    NN_OK(dt_tensor_empty(ndim, shape, DT_DTYPE_F32, dt_device_cpu(), &t));
    nn_fill_rand(t, lo, hi);
    return t;
}

/* An i64 tensor holding @p v. */
static inline dt_tensor *nn_ids(int ndim, const int64_t *shape, const int64_t *v)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    dt_tensor *t = NULL;
    NN_OK(dt_tensor_from_buffer(ndim, shape, DT_DTYPE_I64, v, &t));
    (void)n;
    return t;
}

/* Every element of @p t (any layout) as a malloc'ed double array. */
static inline double *nn_vals(const dt_tensor *t)
{
    int64_t n = dt_tensor_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = dt_tensor_item_at(t, i);
    return v;
}

/* |got - want| <= atol + rtol |want| for every element, naming the first miss. */
static inline void nn_expect_close(const char *what, const double *want, const dt_tensor *got,
                                   double rtol, double atol)
{
    for (int64_t i = 0; i < dt_tensor_numel(got); i++) {
        double g = dt_tensor_item_at(got, i);
        if (!(fabs(g - want[i]) <= atol + rtol * fabs(want[i])))
            fail_msg("%s: element %lld is %.9g, expected %.9g", what, (long long)i, g, want[i]);
    }
}

#endif
