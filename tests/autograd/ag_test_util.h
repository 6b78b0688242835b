/*
 * Shared helpers of the autograd tests: deterministic inputs, float64 views of
 * results, closeness checks, and a central finite-difference gradient checker.
 *
 * Gradient check: for an op f and fixed random weights R of f's output shape,
 * L(x) = sum(f(x) * R) in double. The analytic gradient is x.grad after
 * dt_backward(f(x), R); the numeric one is (L(x + eps e_j) - L(x - eps e_j)) /
 * (2 eps) per element j, with f evaluated in float32 under no-grad.
 * Tolerance: |analytic - numeric| <= AG_ATOL + AG_RTOL * max(|numeric|, |analytic|),
 * AG_RTOL = 2e-2 and AG_ATOL = 2e-3 for eps = 1e-2 (float32 rounding of L
 * divided by 2 eps is ~1e-5 * |L|; truncation is O(eps^2)). Inputs of ops with
 * kinks (relu, max) are chosen away from the kinks by more than eps.
 */
#ifndef AG_TEST_UTIL_H
#define AG_TEST_UTIL_H

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

#define AG_EPS  1e-2
#define AG_RTOL 2e-2
#define AG_ATOL 2e-3
/* Forward results (float32 compute) vs the float64 reference. */
#define AG_FWD_RTOL 1e-5
#define AG_FWD_ATOL 1e-5

#define AG_OK(call)                                                                                \
    do {                                                                                           \
        dt_status ag_s_ = (call);                                                                  \
        if (ag_s_ != DT_OK)                                                                        \
            fail_msg("%s -> %s: %s", #call, dt_status_str(ag_s_), dt_last_error());                \
    } while (0)

static uint64_t ag_rng_state = 88172645463325252ull;

static inline double ag_rand(void) /* xorshift64, uniform [0, 1) */
{
    ag_rng_state ^= ag_rng_state << 13;
    ag_rng_state ^= ag_rng_state >> 7;
    ag_rng_state ^= ag_rng_state << 17;
    return (double)(ag_rng_state >> 11) / 9007199254740992.0;
}

static inline int64_t ag_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

/* A CPU f32 tensor with uniform values in [lo, hi). */
static inline dt_tensor *ag_rand_tensor(int ndim, const int64_t *shape, double lo, double hi)
{
    int64_t n = ag_numel(ndim, shape);
    float *buf = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        buf[i] = (float)(lo + (hi - lo) * ag_rand());
    dt_tensor *t = NULL;
    AG_OK(dt_tensor_from_buffer(ndim, shape, DT_DTYPE_F32, buf, &t));
    free(buf);
    return t;
}

/* A CPU tensor of @p dtype from int64 values. */
static inline dt_tensor *ag_ids(int ndim, const int64_t *shape, dt_dtype dtype, const int64_t *v)
{
    int64_t n = ag_numel(ndim, shape);
    dt_tensor *t = NULL;
    AG_OK(dt_tensor_empty(ndim, shape, dtype, dt_device_cpu(), &t));
    for (int64_t i = 0; i < n; i++) {
        void *p = (char *)dt_tensor_data(t) + (size_t)i * dt_dtype_size(dtype);
        switch (dtype) {
        case DT_DTYPE_I32:
            *(int32_t *)p = (int32_t)v[i];
            break;
        case DT_DTYPE_I64:
            *(int64_t *)p = v[i];
            break;
        case DT_DTYPE_U16:
            *(uint16_t *)p = (uint16_t)v[i];
            break;
        case DT_DTYPE_U8:
            *(uint8_t *)p = (uint8_t)v[i];
            break;
        default:
            fail_msg("ag_ids: dtype %d", (int)dtype);
        }
    }
    return t;
}

/* Row-major float64 copy of any CPU tensor's values (caller frees). */
static inline double *ag_vals(const dt_tensor *t)
{
    int64_t n = dt_tensor_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = dt_tensor_item_at(t, i);
    return v;
}

static inline void ag_expect_shape(const dt_tensor *t, int ndim, const int64_t *shape)
{
    assert_int_equal(dt_tensor_ndim(t), ndim);
    for (int i = 0; i < ndim; i++)
        assert_int_equal(dt_tensor_shape(t)[i], shape[i]);
}

static inline void ag_expect_close(const char *what, const double *ref, const dt_tensor *t,
                                   double rtol, double atol)
{
    int64_t n = dt_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double got = dt_tensor_item_at(t, i);
        double tol = atol + rtol * fabs(ref[i]);
        if (!(fabs(got - ref[i]) <= tol) && !(isnan(ref[i]) && isnan(got)))
            fail_msg("%s: element %lld is %.9g, reference %.9g (tol %.3g)", what, (long long)i, got,
                     ref[i], tol);
    }
}

/* Flat index into a tensor of shape (in_nd, in_shape) broadcast to the output index. */
static inline int64_t ag_bcast_index(int64_t flat, int out_nd, const int64_t *out_shape, int in_nd,
                                     const int64_t *in_shape)
{
    int64_t idx = 0, stride = 1;
    for (int d = out_nd - 1; d >= 0; d--) {
        int64_t c = flat % out_shape[d];
        flat /= out_shape[d];
        int di = d - (out_nd - in_nd);
        if (di < 0)
            continue;
        if (in_shape[di] != 1)
            idx += c * stride;
        stride *= in_shape[di];
    }
    return idx;
}

/* ------------------------------------------------------------ gradient check */

typedef dt_status (*ag_fn)(dt_tensor **in, void *ctx, dt_tensor **out);

static inline double ag_weighted_sum(dt_tensor *y, const double *r)
{
    double l = 0.0;
    for (int64_t i = 0; i < dt_tensor_numel(y); i++)
        l += dt_tensor_item_at(y, i) * r[i];
    return l;
}

/*
 * Check d(sum(f(in) * R))/d in[i] for every i with check[i] (contiguous f32
 * inputs) against central differences. Leaves the inputs unchanged.
 */
static inline void ag_gradcheck(const char *label, ag_fn f, void *ctx, int n_in, dt_tensor **in,
                                const bool *check)
{
    dt_tensor *y = NULL, *r = NULL;
    for (int i = 0; i < n_in; i++) {
        if (!check[i])
            continue;
        AG_OK(dt_tensor_set_grad(in[i], NULL));
        AG_OK(dt_tensor_set_requires_grad(in[i], true));
    }
    AG_OK(f(in, ctx, &y));
    r = ag_rand_tensor(dt_tensor_ndim(y), dt_tensor_shape(y), -1.0, 1.0);
    double *rv = ag_vals(r);
    AG_OK(dt_backward(y, r));
    dt_tensor_release(y);
    dt_tensor_release(r);
    bool prev = dt_grad_set_enabled(false);
    for (int i = 0; i < n_in; i++) {
        if (!check[i])
            continue;
        dt_tensor *g = dt_tensor_grad(in[i]);
        if (g == NULL)
            fail_msg("%s: input %d got no gradient", label, i);
        ag_expect_shape(g, dt_tensor_ndim(in[i]), dt_tensor_shape(in[i]));
        float *x = dt_tensor_data(in[i]);
        for (int64_t j = 0; j < dt_tensor_numel(in[i]); j++) {
            float orig = x[j];
            x[j] = (float)(orig + AG_EPS);
            double xp = x[j];
            AG_OK(f(in, ctx, &y));
            double lp = ag_weighted_sum(y, rv);
            dt_tensor_release(y);
            x[j] = (float)(orig - AG_EPS);
            double xm = x[j];
            AG_OK(f(in, ctx, &y));
            double lm = ag_weighted_sum(y, rv);
            dt_tensor_release(y);
            x[j] = orig;
            double num = (lp - lm) / (xp - xm), ana = dt_tensor_item_at(g, j);
            double tol = AG_ATOL + AG_RTOL * fmax(fabs(num), fabs(ana));
            if (!(fabs(num - ana) <= tol))
                fail_msg("%s: d/d input%d[%lld]: analytic %.6g, numeric %.6g (tol %.3g)", label, i,
                         (long long)j, ana, num, tol);
        }
        AG_OK(dt_tensor_set_grad(in[i], NULL));
        AG_OK(dt_tensor_set_requires_grad(in[i], false));
    }
    dt_grad_set_enabled(prev);
    free(rv);
}

static inline void ag_release_all(int n, dt_tensor **ts)
{
    for (int i = 0; i < n; i++)
        dt_tensor_release(ts[i]);
}

#endif
