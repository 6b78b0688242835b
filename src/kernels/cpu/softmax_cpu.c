/*
 * Softmax / log-softmax over the last dim with a scale and an optional causal
 * mask, in the stable log-sum-exp form: z = scale * x, y = exp(z - max z) /
 * sum. A row whose keys are all masked (Tq > Tk) gives NaN, as PyTorch's
 * softmax of an all -inf row does. Masked entries are 0 (log: -inf).
 */
/* No FP-trap semantics: lets gcc if-convert the branch-free selects in the
 * loops below so they vectorise (must precede the includes: inline helpers). */
#pragma GCC optimize("no-trapping-math")
#include <stdlib.h>

#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/vmath.h"

#if DT_V4
/* y[j] = exp(zs z[j] - m) for the first 32k of valid entries in explicit
 * vectors (two accumulators); adds their sum to *s, returns how many it did.
 * d <= 0, so the select is the only clamp needed. */
DT_V4_FN static int64_t exp_sum_v4(const float *z, float zs, float m, int64_t valid, float *y,
                                   float *s)
{
    dt__v16f acc0 = dt__vset1(0.0f), acc1 = acc0, vm = dt__vset1(m);
    int64_t j = 0;
    for (; j + 32 <= valid; j += 32) {
        dt__v16f d0 = zs * dt__vld(z + j) - vm, d1 = zs * dt__vld(z + j + 16) - vm;
        /* !(d < lo), not d >= lo: a NaN lane keeps its NaN */
        dt__v16f e0 = (dt__v16f)(~(d0 < -87.33654f) & (dt__v16i)dt__vexp(&d0, false));
        dt__v16f e1 = (dt__v16f)(~(d1 < -87.33654f) & (dt__v16i)dt__vexp(&d1, false));
        memcpy(y + j, &e0, sizeof(e0));
        memcpy(y + j + 16, &e1, sizeof(e1));
        acc0 += e0;
        acc1 += e1;
    }
    acc0 += acc1;
    *s += dt__vhsum(&acc0);
    return j;
}
#endif

DT_CPU_CLONES
static void softmax_row(const float *x, int64_t n, int64_t valid, float scale, bool log, float *y)
{
    if (valid == 0) {
        for (int64_t j = 0; j < n; j++)
            y[j] = NAN;
        return;
    }
    /* max of scale * x without a separate scaling pass when scale > 0; else
     * z = y = scale * x (y may alias z below: same-index reads and writes) */
    const float *z = x;
    float zs = scale;
    if (!(scale > 0.0f)) {
        for (int64_t j = 0; j < valid; j++)
            y[j] = scale * x[j];
        z = y;
        zs = 1.0f;
    }
    float mx = dt__cpu_row_max(z, valid);
    float m = zs * mx;
    if (log) {
        for (int64_t j = 0; j < valid; j++)
            y[j] = zs * z[j] - m;
        float s = 0.0f, lane[16] = {0};
        int64_t j = 0;
        for (; j + 16 <= valid; j += 16)
            for (int l = 0; l < 16; l++)
                lane[l] += dt__expf(y[j + l]);
        for (; j < valid; j++)
            s += dt__expf(y[j]);
        for (int l = 0; l < 16; l++)
            s += lane[l];
        float lse = logf(s);
        for (j = 0; j < valid; j++)
            y[j] -= lse;
    } else {
        /* exp and its sum in one pass; d = z - m <= 0, so only the low clamp matters */
        float s = 0.0f;
        int64_t j = 0;
#if DT_V4
        if (dt__v4_ok())
            j = exp_sum_v4(z, zs, m, valid, y, &s);
#endif
        float lane[16] = {0};
        for (; j + 16 <= valid; j += 16)
            for (int l = 0; l < 16; l++) {
                float d = zs * z[j + l] - m;
                float e = d < -87.33654f ? 0.0f : dt__expf_core(d);
                y[j + l] = e;
                lane[l] += e;
            }
        for (; j < valid; j++) {
            float d = zs * z[j] - m;
            y[j] = d < -87.33654f ? 0.0f : dt__expf_core(d);
            s += y[j];
        }
        for (int l = 0; l < 16; l++)
            s += lane[l];
        float inv = 1.0f / s;
        for (j = 0; j < valid; j++)
            y[j] *= inv;
    }
    float fill = log ? -INFINITY : 0.0f;
    for (int64_t j = valid; j < n; j++)
        y[j] = fill;
}

dt_status dt__cpu_softmax(const dt_tensor *x, float scale, bool causal, bool log, dt_tensor *y)
{
    const char *fn = "dt_kernel_softmax";
    DT_CHECK(dt__cpu_check_fp(fn, "y", y, true));
    DT_CHECK(dt__cpu_check_fp(fn, "x", x, false));
    DT_CHECK(dt__cpu_check_same_shape(fn, "x", x, y));
    if (x->ndim < 1 || (causal && x->ndim < 2))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: x has %d dims, needs %d", fn, x->ndim,
                      causal ? 2 : 1);
    int64_t n = x->shape[x->ndim - 1];
    int64_t numel = dt_tensor_numel(x);
    if (numel == 0)
        return DT_OK;
    int64_t rows = numel / n;
    int64_t tq = causal ? x->shape[x->ndim - 2] : 1;
    dt_tensor *tmp = NULL;
    const void *xd = NULL;
    float *buf[2]; /* a bf16 row of x, one of y */
    DT_CHECK(dt__cpu_scratch(fn, x->dtype != DT_DTYPE_F32 || y->dtype != DT_DTYPE_F32, n, 2, buf));
    dt_status s = dt__cpu_contig(x, &tmp, &xd);
    for (int64_t r = 0; s == DT_OK && r < rows; r++) {
        int64_t valid = n;
        if (causal) {
            int64_t v = r % tq + (n - tq) + 1; /* keys j <= i + (Tk - Tq) */
            valid = v < 0 ? 0 : (v > n ? n : v);
        }
        float *yr = dt__cpu_row_out(y, r * n, buf[1]);
        softmax_row(dt__cpu_row_in(xd, x->dtype, r * n, n, buf[0]), n, valid, scale, log, yr);
        dt__cpu_row_done(y, r * n, yr, n);
    }
    dt_tensor_release(tmp);
    free(buf[0]);
    return s;
}

DT_CPU_CLONES
static void softmax_bwd_row(const float *restrict y, const float *restrict gy, int64_t n,
                            float scale, bool log, float *restrict gx)
{
    float lane[16] = {0}, s = 0.0f;
    int64_t j = 0;
    if (log) {
        /* gx = scale * (gy - exp(y) * sum(gy)); masked entries (y = -inf) stay 0 */
        for (; j + 16 <= n; j += 16)
            for (int l = 0; l < 16; l++)
                lane[l] += y[j + l] > -INFINITY ? gy[j + l] : 0.0f;
        for (; j < n; j++)
            s += y[j] > -INFINITY ? gy[j] : 0.0f;
        for (int l = 0; l < 16; l++)
            s += lane[l];
        for (j = 0; j < n; j++)
            gx[j] = y[j] > -INFINITY ? scale * (gy[j] - dt__expf(y[j]) * s) : 0.0f;
    } else {
        /* gx = scale * y * (gy - sum(gy * y)) */
        for (; j + 16 <= n; j += 16)
            for (int l = 0; l < 16; l++)
                lane[l] += gy[j + l] * y[j + l];
        for (; j < n; j++)
            s += gy[j] * y[j];
        for (int l = 0; l < 16; l++)
            s += lane[l];
        for (j = 0; j < n; j++)
            gx[j] = scale * y[j] * (gy[j] - s);
    }
}

dt_status dt__cpu_softmax_backward(const dt_tensor *y, const dt_tensor *gy, float scale, bool log,
                                   dt_tensor *gx)
{
    const char *fn = "dt_kernel_softmax_backward";
    DT_CHECK(dt__cpu_check_fp(fn, "gx", gx, true));
    DT_CHECK(dt__cpu_check_fp(fn, "y", y, false));
    DT_CHECK(dt__cpu_check_fp(fn, "gy", gy, false));
    DT_CHECK(dt__cpu_check_same_shape(fn, "y", y, gx));
    DT_CHECK(dt__cpu_check_same_shape(fn, "gy", gy, gx));
    if (gx->ndim < 1)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: tensors have no dims", fn);
    int64_t n = gx->shape[gx->ndim - 1], numel = dt_tensor_numel(gx);
    if (numel == 0)
        return DT_OK;
    dt_tensor *ty = NULL, *tg = NULL;
    const void *yd = NULL, *gd = NULL;
    float *buf[3]; /* bf16 rows of y, gy and gx */
    dt_status s = DT_OK;
    bool half = y->dtype != DT_DTYPE_F32 || gy->dtype != DT_DTYPE_F32 || gx->dtype != DT_DTYPE_F32;
    DT_CHECK(dt__cpu_scratch(fn, half, n, 3, buf));
    DT_CHECK_GOTO(dt__cpu_contig(y, &ty, &yd), s, out_release);
    DT_CHECK_GOTO(dt__cpu_contig(gy, &tg, &gd), s, out_release);
    for (int64_t r = 0; r < numel / n; r++) {
        float *o = dt__cpu_row_out(gx, r * n, buf[2]);
        softmax_bwd_row(dt__cpu_row_in(yd, y->dtype, r * n, n, buf[0]),
                        dt__cpu_row_in(gd, gy->dtype, r * n, n, buf[1]), n, scale, log, o);
        dt__cpu_row_done(gx, r * n, o, n);
    }
out_release:
    dt_tensor_release(tg);
    dt_tensor_release(ty);
    free(buf[0]);
    return s;
}
