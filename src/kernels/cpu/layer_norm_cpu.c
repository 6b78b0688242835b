/*
 * LayerNorm over the last dim with PyTorch's numerics: two-pass mean and
 * biased variance, rstd = 1 / sqrt(var + eps); y = (x - mean) * rstd * w + b.
 * Backward: with xhat = (x - mean) * rstd and g = gy * w,
 * gx = rstd * (g - mean(g) - xhat * mean(g * xhat)); gw += sum gy * xhat,
 * gb += sum gy over rows.
 */
/* No FP-trap semantics: lets gcc if-convert the branch-free selects in the
 * loops below so they vectorise (must precede the includes: inline helpers). */
#pragma GCC optimize("no-trapping-math")
#include <stdlib.h>

#include "kernels/cpu/cpu_internal.h"

DT_CPU_CLONES
static void ln_row(const float *restrict x, int64_t n, const float *restrict w,
                   const float *restrict b, float eps, float *restrict y, float *mean_out,
                   float *rstd_out)
{
    float mean = dt__cpu_row_sum(x, n) / (float)n;
    float lane[16] = {0}, var = 0.0f;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int l = 0; l < 16; l++)
            lane[l] += (x[j + l] - mean) * (x[j + l] - mean);
    for (; j < n; j++)
        var += (x[j] - mean) * (x[j] - mean);
    for (int l = 0; l < 16; l++)
        var += lane[l];
    float rstd = 1.0f / sqrtf(var / (float)n + eps);
    if (w != NULL && b != NULL) {
        for (j = 0; j < n; j++)
            y[j] = (x[j] - mean) * rstd * w[j] + b[j];
    } else if (w != NULL) {
        for (j = 0; j < n; j++)
            y[j] = (x[j] - mean) * rstd * w[j];
    } else {
        for (j = 0; j < n; j++)
            y[j] = (x[j] - mean) * rstd + (b != NULL ? b[j] : 0.0f);
    }
    *mean_out = mean;
    *rstd_out = rstd;
}

/* Optional 1-d parameter [n]: staged contiguous; NULL stays NULL. */
static dt_status ln_param(const char *fn, const char *what, const dt_tensor *t, int64_t n,
                          dt_tensor **tmp, const float **out)
{
    *tmp = NULL;
    *out = NULL;
    if (t == NULL)
        return DT_OK;
    DT_CHECK(dt__cpu_check(fn, what, t, DT_DTYPE_F32));
    if (dt_tensor_numel(t) != n)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s has %lld elements, expected %lld", fn, what,
                      (long long)dt_tensor_numel(t), (long long)n);
    const void *d = NULL;
    DT_CHECK(dt__cpu_contig(t, tmp, &d));
    *out = d;
    return DT_OK;
}

/* A [rows] f32 output (mean, rstd) or NULL. */
static dt_status ln_stat(const char *fn, const char *what, const dt_tensor *t, int64_t rows,
                         float **out)
{
    *out = NULL;
    if (t == NULL)
        return DT_OK;
    DT_CHECK(dt__cpu_check_out(fn, what, t, DT_DTYPE_F32));
    if (dt_tensor_numel(t) != rows)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s has %lld elements, expected %lld rows", fn, what,
                      (long long)dt_tensor_numel(t), (long long)rows);
    *out = dt__f32(t);
    return DT_OK;
}

static dt_status ln_forward(const dt_tensor *x, const dt_tensor *w, const dt_tensor *b, float eps,
                            dt_tensor *y, dt_tensor *mean, dt_tensor *rstd)
{
    const char *fn = "dt_kernel_layer_norm";
    DT_CHECK(dt__cpu_check_fp(fn, "y", y, true));
    DT_CHECK(dt__cpu_check_fp(fn, "x", x, false));
    DT_CHECK(dt__cpu_check_same_shape(fn, "x", x, y));
    if (x->ndim < 1)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: x has no dims", fn);
    int64_t n = x->shape[x->ndim - 1], numel = dt_tensor_numel(x);
    int64_t rows = n > 0 ? numel / n : dt__shape_numel(x->ndim - 1, x->shape);
    float *pm = NULL, *pr = NULL;
    DT_CHECK(ln_stat(fn, "mean", mean, rows, &pm));
    DT_CHECK(ln_stat(fn, "rstd", rstd, rows, &pr));
    dt_tensor *tw = NULL, *tb = NULL, *tx = NULL;
    const float *pw = NULL, *pb = NULL;
    const void *xd = NULL;
    float *buf[2] = {NULL}; /* a bf16 row of x, one of y */
    dt_status s = DT_OK;
    DT_CHECK(ln_param(fn, "w", w, n, &tw, &pw));
    DT_CHECK_GOTO(ln_param(fn, "b", b, n, &tb, &pb), s, out_release);
    if (numel == 0)
        goto out_release;
    DT_CHECK_GOTO(
        dt__cpu_scratch(fn, x->dtype != DT_DTYPE_F32 || y->dtype != DT_DTYPE_F32, n, 2, buf), s,
        out_release);
    DT_CHECK_GOTO(dt__cpu_contig(x, &tx, &xd), s, out_release);
    for (int64_t r = 0; r < rows; r++) {
        float m = 0.0f, rs = 0.0f, *yr = dt__cpu_row_out(y, r * n, buf[1]);
        ln_row(dt__cpu_row_in(xd, x->dtype, r * n, n, buf[0]), n, pw, pb, eps, yr, &m, &rs);
        dt__cpu_row_done(y, r * n, yr, n);
        if (pm != NULL)
            pm[r] = m;
        if (pr != NULL)
            pr[r] = rs;
    }
out_release:
    free(buf[0]);
    dt_tensor_release(tx);
    dt_tensor_release(tb);
    dt_tensor_release(tw);
    return s;
}

dt_status dt__cpu_layer_norm(const dt_tensor *x, const dt_tensor *w, const dt_tensor *b, float eps,
                             dt_tensor *y, dt_tensor *mean, dt_tensor *rstd)
{
    dt__cpu_widen pw = {0}; /* bf16 w and b: [n] vectors, through f32 copies */
    const dt_tensor *fw = dt__cpu_widen_in(&pw, w, false), *fb = dt__cpu_widen_in(&pw, b, false);
    return dt__cpu_widen_end(&pw,
                             pw.st == DT_OK ? ln_forward(x, fw, fb, eps, y, mean, rstd) : pw.st);
}

/* has_w is a constant at both call sites, so `w[j]` loads are unconditional. */
static inline __attribute__((always_inline)) void
ln_bwd_impl(const float *restrict x, const float *restrict gy, const float *restrict w, bool has_w,
            int64_t n, float mean, float rstd, float *restrict gx, float *restrict gw,
            float *restrict gb)
{
    float lg[16] = {0}, lgx[16] = {0}, sg = 0.0f, sgx = 0.0f;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int l = 0; l < 16; l++) {
            float xhat = (x[j + l] - mean) * rstd;
            float g = gy[j + l] * (has_w ? w[j + l] : 1.0f);
            lg[l] += g;
            lgx[l] += g * xhat;
        }
    for (; j < n; j++) {
        float xhat = (x[j] - mean) * rstd;
        float g = gy[j] * (has_w ? w[j] : 1.0f);
        sg += g;
        sgx += g * xhat;
    }
    for (int l = 0; l < 16; l++) {
        sg += lg[l];
        sgx += lgx[l];
    }
    float mg = sg / (float)n, mgx = sgx / (float)n;
    for (j = 0; j < n; j++) {
        float xhat = (x[j] - mean) * rstd;
        float g = gy[j] * (has_w ? w[j] : 1.0f);
        gx[j] = rstd * (g - mg - xhat * mgx);
    }
    if (gw != NULL)
        for (j = 0; j < n; j++)
            gw[j] += gy[j] * (x[j] - mean) * rstd;
    if (gb != NULL)
        for (j = 0; j < n; j++)
            gb[j] += gy[j];
}

DT_CPU_CLONES
static void ln_bwd_row(const float *x, const float *gy, const float *w, int64_t n, float mean,
                       float rstd, float *gx, float *gw, float *gb)
{
    if (w != NULL)
        ln_bwd_impl(x, gy, w, true, n, mean, rstd, gx, gw, gb);
    else
        ln_bwd_impl(x, gy, w, false, n, mean, rstd, gx, gw, gb);
}

static dt_status ln_backward(const dt_tensor *x, const dt_tensor *w, const dt_tensor *mean,
                             const dt_tensor *rstd, const dt_tensor *gy, dt_tensor *gx,
                             dt_tensor *gw, dt_tensor *gb)
{
    const char *fn = "dt_kernel_layer_norm_backward";
    DT_CHECK(dt__cpu_check_fp(fn, "gx", gx, true));
    DT_CHECK(dt__cpu_check_fp(fn, "x", x, false));
    DT_CHECK(dt__cpu_check_fp(fn, "gy", gy, false));
    DT_CHECK(dt__cpu_check_same_shape(fn, "x", x, gx));
    DT_CHECK(dt__cpu_check_same_shape(fn, "gy", gy, gx));
    if (x->ndim < 1 || mean == NULL || rstd == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: needs x with dims and the saved mean/rstd", fn);
    int64_t n = x->shape[x->ndim - 1], numel = dt_tensor_numel(x);
    int64_t rows = n > 0 ? numel / n : dt__shape_numel(x->ndim - 1, x->shape);
    DT_CHECK(dt__cpu_check(fn, "mean", mean, DT_DTYPE_F32));
    DT_CHECK(dt__cpu_check(fn, "rstd", rstd, DT_DTYPE_F32));
    float *pgw = NULL, *pgb = NULL;
    DT_CHECK(ln_stat(fn, "gw", gw, n, &pgw));
    DT_CHECK(ln_stat(fn, "gb", gb, n, &pgb));
    if (dt_tensor_numel(mean) != rows || dt_tensor_numel(rstd) != rows)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: mean/rstd have %lld/%lld elements, expected %lld",
                      fn, (long long)dt_tensor_numel(mean), (long long)dt_tensor_numel(rstd),
                      (long long)rows);
    dt_tensor *tw = NULL, *tx = NULL, *tg = NULL, *tm = NULL, *tr = NULL;
    const float *pw = NULL;
    const void *xd = NULL, *gd = NULL, *md = NULL, *rd = NULL;
    float *buf[3] = {NULL}; /* bf16 rows of x, gy and gx */
    dt_status s = DT_OK;
    DT_CHECK(ln_param(fn, "w", w, n, &tw, &pw));
    if (numel == 0)
        goto out_release;
    bool half = x->dtype != DT_DTYPE_F32 || gy->dtype != DT_DTYPE_F32 || gx->dtype != DT_DTYPE_F32;
    DT_CHECK_GOTO(dt__cpu_scratch(fn, half, n, 3, buf), s, out_release);
    DT_CHECK_GOTO(dt__cpu_contig(x, &tx, &xd), s, out_release);
    DT_CHECK_GOTO(dt__cpu_contig(gy, &tg, &gd), s, out_release);
    DT_CHECK_GOTO(dt__cpu_contig(mean, &tm, &md), s, out_release);
    DT_CHECK_GOTO(dt__cpu_contig(rstd, &tr, &rd), s, out_release);
    for (int64_t r = 0; r < rows; r++) {
        float *o = dt__cpu_row_out(gx, r * n, buf[2]);
        ln_bwd_row(dt__cpu_row_in(xd, x->dtype, r * n, n, buf[0]),
                   dt__cpu_row_in(gd, gy->dtype, r * n, n, buf[1]), pw, n, ((const float *)md)[r],
                   ((const float *)rd)[r], o, pgw, pgb);
        dt__cpu_row_done(gx, r * n, o, n);
    }
out_release:
    free(buf[0]);
    dt_tensor_release(tr);
    dt_tensor_release(tm);
    dt_tensor_release(tg);
    dt_tensor_release(tx);
    dt_tensor_release(tw);
    return s;
}

dt_status dt__cpu_layer_norm_backward(const dt_tensor *x, const dt_tensor *w, const dt_tensor *mean,
                                      const dt_tensor *rstd, const dt_tensor *gy, dt_tensor *gx,
                                      dt_tensor *gw, dt_tensor *gb)
{
    /* bf16 w, gw, gb: [n] vectors through f32 copies, so gw and gb accumulate
     * over every row in f32 and are rounded once */
    dt__cpu_widen pw = {0};
    const dt_tensor *fw = dt__cpu_widen_in(&pw, w, false);
    dt_tensor *fgw = dt__cpu_widen_in(&pw, gw, true), *fgb = dt__cpu_widen_in(&pw, gb, true);
    return dt__cpu_widen_end(&pw, pw.st == DT_OK ? ln_backward(x, fw, mean, rstd, gy, gx, fgw, fgb)
                                                 : pw.st);
}
