/*
 * Per-row cross entropy of logits [N, C]: lse = log sum exp (stable),
 * loss = lse - logit[target], 0 for ignore_index rows (whose lse is still
 * written). Backward: gloss[i] * (softmax - onehot), 0 for ignored rows.
 * A target outside [0, C) that is not ignore_index is an error naming it.
 */
/* No FP-trap semantics: lets gcc if-convert the branch-free selects in the
 * loops below so they vectorise (must precede the includes: inline helpers). */
#pragma GCC optimize("no-trapping-math")
#include <stdlib.h>

#include "kernels/cpu/cpu_internal.h"

DT_CPU_CLONES
static float row_lse(const float *restrict x, int64_t n)
{
    float m = dt__cpu_row_max(x, n);
    if (m == -INFINITY || m == INFINITY)
        return m;
    float lane[16] = {0}, s = 0.0f;
    int64_t j = 0;
    /* x - m <= 0 and finite here: only the low clamp matters */
    for (; j + 16 <= n; j += 16)
        for (int l = 0; l < 16; l++) {
            float d = x[j + l] - m;
            lane[l] += d < -87.33654f ? 0.0f : dt__expf_core(d);
        }
    for (; j < n; j++) {
        float d = x[j] - m;
        s += d < -87.33654f ? 0.0f : dt__expf_core(d);
    }
    for (int l = 0; l < 16; l++)
        s += lane[l];
    return m + logf(s);
}

static dt_status ce_shapes(const char *fn, const dt_tensor *logits, const dt_tensor *targets,
                           int64_t *rows, int64_t *classes, int64_t **tv)
{
    DT_CHECK(dt__cpu_check_fp(fn, "logits", logits, false));
    if (logits->ndim != 2)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: logits have %d dims, expected [N, C]", fn,
                      logits->ndim);
    *rows = logits->shape[0];
    *classes = logits->shape[1];
    if (targets == NULL || dt_tensor_numel(targets) != *rows)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: targets have %lld elements, expected N = %lld", fn,
                      targets ? (long long)dt_tensor_numel(targets) : -1LL, (long long)*rows);
    return dt__cpu_load_ids(fn, targets, tv);
}

static dt_status ce_check_target(const char *fn, int64_t i, int64_t t, int64_t classes,
                                 int64_t ignore_index)
{
    if (t != ignore_index && (t < 0 || t >= classes))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: target %lld of row %lld is outside [0, %lld)", fn,
                      (long long)t, (long long)i, (long long)classes);
    return DT_OK;
}

static dt_status ce_forward(const dt_tensor *logits, const dt_tensor *targets, int64_t ignore_index,
                            dt_tensor *loss, dt_tensor *lse)
{
    const char *fn = "dt_kernel_cross_entropy";
    int64_t rows = 0, classes = 0, *tv = NULL;
    DT_CHECK(dt__cpu_check_out(fn, "loss", loss, DT_DTYPE_F32));
    DT_CHECK(dt__cpu_check_out(fn, "lse", lse, DT_DTYPE_F32));
    DT_CHECK(ce_shapes(fn, logits, targets, &rows, &classes, &tv));
    dt_status s = DT_OK;
    dt_tensor *tl = NULL;
    const void *ld = NULL;
    float *buf = NULL; /* a bf16 row of logits */
    bool half = logits->dtype != DT_DTYPE_F32;
    if (dt_tensor_numel(loss) != rows || dt_tensor_numel(lse) != rows) {
        s = DT_ERR(DT_ERR_INVALID_ARG, "%s: loss/lse have %lld/%lld elements, expected %lld", fn,
                   (long long)dt_tensor_numel(loss), (long long)dt_tensor_numel(lse),
                   (long long)rows);
        goto out_free_targets;
    }
    for (int64_t i = 0; i < rows; i++)
        DT_CHECK_GOTO(ce_check_target(fn, i, tv[i], classes, ignore_index), s, out_free_targets);
    DT_CHECK_GOTO(dt__cpu_scratch(fn, half, classes, 1, &buf), s, out_free_targets);
    DT_CHECK_GOTO(dt__cpu_contig(logits, &tl, &ld), s, out_free_targets);
    for (int64_t i = 0; i < rows; i++) {
        const float *x = dt__cpu_row_in(ld, logits->dtype, i * classes, classes, buf);
        float l = classes > 0 ? row_lse(x, classes) : -INFINITY;
        dt__f32(lse)[i] = l;
        dt__f32(loss)[i] = tv[i] == ignore_index ? 0.0f : l - x[tv[i]];
    }
    dt_tensor_release(tl);
out_free_targets:
    free(buf);
    free(tv);
    return s;
}

dt_status dt__cpu_cross_entropy(const dt_tensor *logits, const dt_tensor *targets,
                                int64_t ignore_index, dt_tensor *loss, dt_tensor *lse)
{
    dt__cpu_widen w = {0}; /* bf16 loss and lse: [N] vectors, through f32 copies */
    dt_tensor *fo = dt__cpu_widen_in(&w, loss, true), *fs = dt__cpu_widen_in(&w, lse, true);
    return dt__cpu_widen_end(&w, w.st == DT_OK ? ce_forward(logits, targets, ignore_index, fo, fs)
                                               : w.st);
}

DT_CPU_CLONES
static void ce_bwd_row(const float *restrict x, int64_t n, float lse, float g, int64_t target,
                       float *restrict gx)
{
    for (int64_t j = 0; j < n; j++) {
        float d = x[j] - lse;
        gx[j] = g * (d < -87.33654f ? 0.0f : dt__expf_core(d));
    }
    if (target >= 0 && target < n)
        gx[target] -= g;
}

static dt_status ce_backward(const dt_tensor *logits, const dt_tensor *targets,
                             int64_t ignore_index, const dt_tensor *lse, const dt_tensor *gloss,
                             dt_tensor *glogits)
{
    const char *fn = "dt_kernel_cross_entropy_backward";
    int64_t rows = 0, classes = 0, *tv = NULL;
    DT_CHECK(dt__cpu_check_fp(fn, "glogits", glogits, true));
    DT_CHECK(dt__cpu_check(fn, "lse", lse, DT_DTYPE_F32));
    DT_CHECK(dt__cpu_check(fn, "gloss", gloss, DT_DTYPE_F32));
    DT_CHECK(dt__cpu_check_same_shape(fn, "logits", logits, glogits));
    DT_CHECK(ce_shapes(fn, logits, targets, &rows, &classes, &tv));
    dt_status s = DT_OK;
    dt_tensor *tl = NULL, *te = NULL, *tg = NULL;
    const void *ld = NULL, *ed = NULL, *gd = NULL;
    float *buf[2] = {NULL}; /* bf16 rows of logits and glogits */
    bool half = logits->dtype != DT_DTYPE_F32 || glogits->dtype != DT_DTYPE_F32;
    if (dt_tensor_numel(lse) != rows || dt_tensor_numel(gloss) != rows) {
        s = DT_ERR(DT_ERR_INVALID_ARG, "%s: lse/gloss have %lld/%lld elements, expected %lld", fn,
                   (long long)dt_tensor_numel(lse), (long long)dt_tensor_numel(gloss),
                   (long long)rows);
        goto out_release;
    }
    for (int64_t i = 0; i < rows; i++)
        DT_CHECK_GOTO(ce_check_target(fn, i, tv[i], classes, ignore_index), s, out_release);
    DT_CHECK_GOTO(dt__cpu_scratch(fn, half, classes, 2, buf), s, out_release);
    DT_CHECK_GOTO(dt__cpu_contig(logits, &tl, &ld), s, out_release);
    DT_CHECK_GOTO(dt__cpu_contig(lse, &te, &ed), s, out_release);
    DT_CHECK_GOTO(dt__cpu_contig(gloss, &tg, &gd), s, out_release);
    for (int64_t i = 0; i < rows; i++) {
        float *gx = dt__cpu_row_out(glogits, i * classes, buf[1]);
        if (tv[i] == ignore_index)
            memset(gx, 0, (size_t)classes * sizeof(float));
        else
            ce_bwd_row(dt__cpu_row_in(ld, logits->dtype, i * classes, classes, buf[0]), classes,
                       ((const float *)ed)[i], ((const float *)gd)[i], tv[i], gx);
        dt__cpu_row_done(glogits, i * classes, gx, classes);
    }
out_release:
    free(buf[0]);
    dt_tensor_release(tg);
    dt_tensor_release(te);
    dt_tensor_release(tl);
    free(tv);
    return s;
}

dt_status dt__cpu_cross_entropy_backward(const dt_tensor *logits, const dt_tensor *targets,
                                         int64_t ignore_index, const dt_tensor *lse,
                                         const dt_tensor *gloss, dt_tensor *glogits)
{
    dt__cpu_widen w = {0}; /* bf16 lse and gloss: [N] vectors, through f32 copies */
    const dt_tensor *fs = dt__cpu_widen_in(&w, lse, false),
                    *fg = dt__cpu_widen_in(&w, gloss, false);
    return dt__cpu_widen_end(
        &w, w.st == DT_OK ? ce_backward(logits, targets, ignore_index, fs, fg, glogits) : w.st);
}
