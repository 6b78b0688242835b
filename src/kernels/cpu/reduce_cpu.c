/*
 * sum / mean / max along one dim. x is viewed as [outer, n, inner]: inner == 1
 * reduces contiguous rows with lane accumulators; inner > 1 accumulates whole
 * rows of `inner` elements (vectorised across inner). max returns the first
 * index of the maximum in argmax (i64) when asked; NaN propagates as in PyTorch.
 * An empty dim gives sum 0, mean NaN, and is an error for max.
 */
/* No FP-trap semantics: lets gcc if-convert the branch-free selects in the
 * loops below so they vectorise (must precede the includes: inline helpers). */
#pragma GCC optimize("no-trapping-math")
#include <stdlib.h>

#include "kernels/cpu/cpu_internal.h"

static void reduce_rows(dt_reduce_kind kind, const float *x, int64_t outer, int64_t n, float *o,
                        int64_t *am)
{
    for (int64_t r = 0; r < outer; r++) {
        const float *row = x + r * n;
        if (kind != DT_REDUCE_KIND_MAX) {
            float s = dt__cpu_row_sum(row, n);
            o[r] = kind == DT_REDUCE_KIND_MEAN ? s / (float)n : s;
            continue;
        }
        float m = dt__cpu_row_max(row, n);
        int64_t at = 0;
        for (int64_t j = 0; j < n; j++) {
            if (row[j] == m || row[j] != row[j]) {
                at = j;
                m = row[j];
                break;
            }
        }
        for (int64_t j = at; j < n; j++) /* a NaN anywhere wins */
            if (row[j] != row[j]) {
                m = row[j];
                at = j;
                break;
            }
        o[r] = m;
        if (am != NULL)
            am[r] = at;
    }
}

DT_CPU_CLONES
static void reduce_cols(dt_reduce_kind kind, const float *x, int64_t outer, int64_t n,
                        int64_t inner, float *o, int64_t *am)
{
    for (int64_t r = 0; r < outer; r++) {
        float *restrict acc = o + r * inner;
        const float *base = x + r * n * inner;
        memcpy(acc, base, (size_t)inner * sizeof(float));
        if (am != NULL)
            memset(am + r * inner, 0, (size_t)inner * sizeof(int64_t));
        for (int64_t k = 1; k < n; k++) {
            const float *restrict row = base + k * inner;
            if (kind != DT_REDUCE_KIND_MAX) {
                for (int64_t j = 0; j < inner; j++)
                    acc[j] += row[j];
                continue;
            }
            for (int64_t j = 0; j < inner; j++) {
                bool take = row[j] > acc[j] || (row[j] != row[j] && acc[j] == acc[j]);
                acc[j] = take ? row[j] : acc[j];
                if (am != NULL && take)
                    am[r * inner + j] = k;
            }
        }
        if (kind == DT_REDUCE_KIND_MEAN)
            for (int64_t j = 0; j < inner; j++)
                acc[j] /= (float)n;
    }
}

/* x [outer, n, inner] into o (and am): bf16 x widened one [n, inner] block
 * at a time into a scratch row, f32 x in one call */
static dt_status reduce_run(const char *fn, dt_reduce_kind kind, const dt_tensor *x, const void *xd,
                            int64_t outer, int64_t n, int64_t inner, float *o, int64_t *am)
{
    int64_t blocks = x->dtype == DT_DTYPE_F32 ? 1 : outer, per = outer / blocks;
    float *buf = NULL;
    DT_CHECK(dt__cpu_scratch(fn, x->dtype != DT_DTYPE_F32, n * inner, 1, &buf));
    for (int64_t r = 0; r < blocks; r++) {
        const float *xr = dt__cpu_row_in(xd, x->dtype, r * n * inner, per * n * inner, buf);
        int64_t *ar = am != NULL ? am + r * inner : NULL;
        if (inner == 1)
            reduce_rows(kind, xr, per, n, o + r * inner, ar);
        else
            reduce_cols(kind, xr, per, n, inner, o + r * inner, ar);
    }
    free(buf);
    return DT_OK;
}

static dt_status reduce_f32_out(dt_reduce_kind kind, const dt_tensor *x, int dim, dt_tensor *out,
                                dt_tensor *argmax)
{
    const char *fn = "dt_kernel_reduce";
    DT_CHECK(dt__cpu_check_out(fn, "out", out, DT_DTYPE_F32));
    DT_CHECK(dt__cpu_check_fp(fn, "x", x, false));
    DT_CHECK(dt__kernel_reduce_args(fn, kind, x, dim, &dim));
    int64_t n = x->ndim > 0 ? x->shape[dim] : 1;
    int64_t outer = x->ndim > 0 ? dt__shape_numel(dim, x->shape) : 1;
    int64_t inner = x->ndim > 0 ? dt__shape_numel(x->ndim - dim - 1, x->shape + dim + 1) : 1;
    if (dt_tensor_numel(out) != outer * inner)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: out has %lld elements, expected %lld", fn,
                      (long long)dt_tensor_numel(out), (long long)(outer * inner));
    int64_t *am = NULL;
    if (argmax != NULL) {
        DT_CHECK(dt__cpu_check_out(fn, "argmax", argmax, DT_DTYPE_I64));
        if (kind != DT_REDUCE_KIND_MAX || dt_tensor_numel(argmax) != outer * inner)
            return DT_ERR(DT_ERR_INVALID_ARG, "%s: argmax needs kind max and %lld elements", fn,
                          (long long)(outer * inner));
        am = (int64_t *)argmax->storage->data + argmax->offset;
    }
    float *o = dt__f32(out);
    if (outer * inner == 0)
        return DT_OK;
    if (n == 0) {
        if (kind == DT_REDUCE_KIND_MAX)
            return DT_ERR(DT_ERR_INVALID_ARG, "%s: max over dim %d of size 0", fn, dim);
        float v = kind == DT_REDUCE_KIND_MEAN ? NAN : 0.0f;
        for (int64_t i = 0; i < outer * inner; i++)
            o[i] = v;
        return DT_OK;
    }
    dt_tensor *tx = NULL;
    const void *xd = NULL;
    DT_CHECK(dt__cpu_contig(x, &tx, &xd));
    dt_status s = reduce_run(fn, kind, x, xd, outer, n, inner, o, am);
    dt_tensor_release(tx);
    return s;
}

dt_status dt__cpu_reduce(dt_reduce_kind kind, const dt_tensor *x, int dim, dt_tensor *out,
                         dt_tensor *argmax)
{
    dt__cpu_widen w = {0}; /* a bf16 out, through an f32 copy */
    dt_tensor *fo = dt__cpu_widen_in(&w, out, true);
    return dt__cpu_widen_end(&w, w.st == DT_OK ? reduce_f32_out(kind, x, dim, fo, argmax) : w.st);
}
