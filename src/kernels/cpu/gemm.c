/*
 * GEMM over the last two dims on the engine DT_GEMM picks (gemm_engine.c):
 * oneDNN's matmul primitive or OpenBLAS cblas_sgemm, batched by a loop over
 * c's batch index. When b is shared by the whole batch (a weight) and a is
 * untransposed with its batch rows evenly spaced, the batch is folded into M
 * so the Linear-layer case is a single large call. On oneDNN, batch dims that
 * collapse to one stride per operand (attention's [B, H, T, d]) are one
 * batched primitive instead of the loop.
 */
#include <limits.h>
#include <string.h>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/onednn.h"

#define FN "dt_kernel_gemm"

typedef struct gemm_mat {
    const char *data;
    int64_t rows, cols;            /* as stored (before any transpose) */
    int64_t ld;                    /* row stride */
    int64_t bstrides[DT_MAX_DIMS]; /* broadcast to c's batch dims */
} gemm_mat;

static dt_status gemm_prepare(const char *what, const dt_tensor *t, const dt_tensor *c, gemm_mat *m)
{
    DT_CHECK(dt__cpu_check_local(FN, what, t));
    if (t->ndim < 2)
        return DT_ERR(DT_ERR_INVALID_ARG, FN ": %s has %d dims, needs at least 2", what, t->ndim);
    m->rows = t->shape[t->ndim - 2];
    m->cols = t->shape[t->ndim - 1];
    m->ld = t->strides[t->ndim - 2];
    if (m->cols > 1 && t->strides[t->ndim - 1] != 1)
        return DT_ERR(DT_ERR_INVALID_ARG, FN ": %s has last-dim stride %lld, needs 1", what,
                      (long long)t->strides[t->ndim - 1]);
    if (m->rows <= 1)
        m->ld = m->cols > 1 ? m->cols : 1; /* row stride is irrelevant for one row */
    if (m->ld < m->cols)
        return DT_ERR(DT_ERR_INVALID_ARG, FN ": %s has row stride %lld < row length %lld", what,
                      (long long)m->ld, (long long)m->cols);
    if (m->ld > INT_MAX || m->rows > INT_MAX || m->cols > INT_MAX)
        return DT_ERR(DT_ERR_UNSUPPORTED, FN ": %s dims %lld x %lld (ld %lld) exceed int", what,
                      (long long)m->rows, (long long)m->cols, (long long)m->ld);
    m->data = (const char *)t->storage->data + t->offset * (int64_t)dt_dtype_size(t->dtype);
    dt_tensor batch = *t;
    batch.ndim = t->ndim - 2;
    return dt__cpu_broadcast_strides(FN, what, &batch, c->ndim - 2, c->shape, m->bstrides);
}

static bool batch_is_shared(const gemm_mat *m, int nb)
{
    for (int d = 0; d < nb; d++)
        if (m->bstrides[d] != 0)
            return false;
    return true;
}

/* a's batch rows evenly spaced by a->ld over all batch dims (so [B.., M] is one matrix). */
static bool batch_folds(const gemm_mat *a, const dt_tensor *c)
{
    int64_t expect = a->ld * a->rows;
    for (int d = c->ndim - 3; d >= 0; d--) {
        if (c->shape[d] != 1 && a->bstrides[d] != expect)
            return false;
        expect *= c->shape[d];
    }
    return true;
}

static void scale_c(float *restrict c, int64_t n, float beta)
{
    for (int64_t i = 0; i < n; i++)
        c[i] = beta == 0.0f ? 0.0f : beta * c[i];
}

/* The batch dims as one stride (0: shared by all), when they collapse to one. */
static bool batch_collapses(const gemm_mat *m, const dt_tensor *c, int64_t *stride)
{
    int64_t expect = -1;
    for (int d = c->ndim - 3; d >= 0; d--) {
        if (c->shape[d] == 1)
            continue;
        if (expect < 0)
            *stride = expect = m->bstrides[d];
        else if (m->bstrides[d] != expect)
            return false;
        expect *= c->shape[d];
    }
    if (expect < 0)
        *stride = 0;
    return true;
}

/* One GEMM call's operands, shared by every batch. */
typedef struct gemm_call {
    const gemm_mat *a, *b;
    bool ta, tb;
    float alpha, beta;
    int64_t M, N, K;
    dt_dtype ab_dtype, c_dtype;
    size_t ab_size, c_size; /* element sizes */
    const float *bias;      /* N values added to every row (oneDNN only), or NULL */
    dt__gemm_engine engine;
    const dt__blas *blas;
} gemm_call;

/* The oneDNN description of @p batch matrices of @p rows rows (batch strides left 0). */
static dt__onednn_mm onednn_mm(const gemm_call *g, int64_t batch, int64_t rows)
{
    dt__onednn_mm mm = {.batch = batch, .m = rows, .n = g->N, .k = g->K};
    mm.trans_a = g->ta, mm.trans_b = g->tb;
    mm.lda = g->a->ld, mm.ldb = g->b->ld, mm.ldc = g->N;
    mm.alpha = g->alpha, mm.beta = g->beta;
    mm.ab_dtype = g->ab_dtype, mm.c_dtype = g->c_dtype;
    mm.bias = g->bias;
    return mm;
}

/* c = alpha op(a) op(b) + beta c for one matrix (of @p rows rows). */
static dt_status run_one(const gemm_call *g, int64_t rows, const char *a, const char *b, char *c)
{
    if (g->engine == DT_GEMM_ENGINE_ONEDNN) {
        dt__onednn_mm mm = onednn_mm(g, 1, rows);
        return dt__onednn_matmul(&mm, a, b, c);
    }
    int ta = g->ta ? DT_CBLAS_TRANS : DT_CBLAS_NO_TRANS;
    int tb = g->tb ? DT_CBLAS_TRANS : DT_CBLAS_NO_TRANS;
    g->blas->sgemm(DT_CBLAS_ROW_MAJOR, ta, tb, (int)rows, (int)g->N, (int)g->K, g->alpha,
                   (const float *)a, (int)g->a->ld, (const float *)b, (int)g->b->ld, g->beta,
                   (float *)c, (int)g->N);
    return DT_OK;
}

/* oneDNN: the whole batch as one primitive when each operand has one batch stride. */
static bool run_batched(const gemm_call *g, const dt_tensor *c, int64_t batches, char *cd,
                        dt_status *st)
{
    dt__onednn_mm mm = onednn_mm(g, batches, g->M);
    if (g->engine != DT_GEMM_ENGINE_ONEDNN || !batch_collapses(g->a, c, &mm.sa) ||
        !batch_collapses(g->b, c, &mm.sb))
        return false;
    mm.sc = g->M * g->N;
    *st = dt__onednn_matmul(&mm, g->a->data, g->b->data, cd);
    return *st != DT_ERR_UNSUPPORTED; /* a layout it does not take: one matrix at a time */
}

/* Every batch: folded into M, one batched call, or a loop (odometer over the batch dims). */
static dt_status run_batches(const gemm_call *g, const dt_tensor *c, int64_t batches, char *cd)
{
    int nb = c->ndim - 2;
    if (batches > 1 && !g->ta && batch_is_shared(g->b, nb) && batch_folds(g->a, c) &&
        batches * g->M <= INT_MAX)
        return run_one(g, batches * g->M, g->a->data, g->b->data, cd);
    dt_status st = DT_OK;
    if (batches > 1 && run_batched(g, c, batches, cd, &st))
        return st;
    int64_t idx[DT_MAX_DIMS] = {0};
    int64_t off_a = 0, off_b = 0, MN = g->M * g->N;
    for (int64_t i = 0; i < batches; i++) {
        DT_CHECK(run_one(g, g->M, g->a->data + off_a * (int64_t)g->ab_size,
                         g->b->data + off_b * (int64_t)g->ab_size,
                         cd + i * MN * (int64_t)g->c_size));
        for (int d = nb - 1; d >= 0; d--) {
            off_a += g->a->bstrides[d];
            off_b += g->b->bstrides[d];
            if (++idx[d] < c->shape[d])
                break;
            off_a -= g->a->bstrides[d] * c->shape[d];
            off_b -= g->b->bstrides[d] * c->shape[d];
            idx[d] = 0;
        }
    }
    return DT_OK;
}

/* Whether bf16 matmuls run on a oneDNN bf16 kernel (else on f32 copies). */
static bool onednn_bf16(void)
{
    const dt__onednn_info *o = NULL;
    return dt__onednn_load(&o) == DT_OK && strcmp(o->kernel_bf16, "none") != 0;
}

/* Half operands (f16; bf16 on an engine without a bf16 kernel): the same GEMM on f32 copies. */
static dt_status gemm_widened(const dt_tensor *a, const dt_tensor *b, bool trans_a, bool trans_b,
                              float alpha, float beta, dt_tensor *c)
{
    dt__cpu_widen w = {0};
    dt_tensor *fa = dt__cpu_widen_in(&w, a, false), *fb = dt__cpu_widen_in(&w, b, false);
    dt_tensor *fc = dt__cpu_widen_in(&w, c, true);
    return dt__cpu_widen_end(
        &w, w.st == DT_OK ? dt__cpu_gemm(fa, fb, trans_a, trans_b, alpha, beta, fc) : w.st);
}

/* a and b f32 into c f32, or a and b bf16 (f16) into c bf16 (f16) or f32. */
static dt_status check_dtypes(const dt_tensor *a, const dt_tensor *b, const dt_tensor *c)
{
    dt_dtype t = a->dtype;
    if (t != DT_DTYPE_F32 && t != DT_DTYPE_BF16 && t != DT_DTYPE_F16)
        return DT_ERR(DT_ERR_INVALID_ARG, FN ": a has dtype %s, expected f32, bf16 or f16",
                      dt_dtype_name(t));
    if (b->dtype != t)
        return DT_ERR(DT_ERR_INVALID_ARG, FN ": a is %s but b is %s (they must match)",
                      dt_dtype_name(t), dt_dtype_name(b->dtype));
    if (c->dtype != DT_DTYPE_F32 && c->dtype != t)
        return DT_ERR(DT_ERR_INVALID_ARG, FN ": c has dtype %s, expected f32%s%s",
                      dt_dtype_name(c->dtype), t != DT_DTYPE_F32 ? " or " : "",
                      t != DT_DTYPE_F32 ? dt_dtype_name(t) : "");
    return DT_OK;
}

/* Shapes, strides and dtypes of one call, into @p g (engine not set). */
static dt_status gemm_plan(const dt_tensor *a, const dt_tensor *b, bool trans_a, bool trans_b,
                           dt_tensor *c, gemm_mat *ma, gemm_mat *mb, gemm_call *g)
{
    DT_CHECK(dt__cpu_check_local(FN, "a", a));
    DT_CHECK(dt__cpu_check_local(FN, "b", b));
    DT_CHECK(dt__cpu_check_out(FN, "c", c, c->dtype));
    DT_CHECK(check_dtypes(a, b, c));
    if (c->ndim < 2)
        return DT_ERR(DT_ERR_INVALID_ARG, FN ": c has %d dims, needs at least 2", c->ndim);
    DT_CHECK(gemm_prepare("a", a, c, ma));
    DT_CHECK(gemm_prepare("b", b, c, mb));
    int64_t M = c->shape[c->ndim - 2], N = c->shape[c->ndim - 1];
    int64_t am = trans_a ? ma->cols : ma->rows, ak = trans_a ? ma->rows : ma->cols;
    int64_t bk = trans_b ? mb->cols : mb->rows, bn = trans_b ? mb->rows : mb->cols;
    if (am != M || bn != N || ak != bk)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      FN ": op(a) is %lld x %lld, op(b) %lld x %lld, c %lld x %lld", (long long)am,
                      (long long)ak, (long long)bk, (long long)bn, (long long)M, (long long)N);
    *g = (gemm_call){.a = ma,
                     .b = mb,
                     .ta = trans_a,
                     .tb = trans_b,
                     .alpha = 1.0f,
                     .M = M,
                     .N = N,
                     .K = ak,
                     .ab_dtype = a->dtype,
                     .c_dtype = c->dtype,
                     .ab_size = dt_dtype_size(a->dtype),
                     .c_size = dt_dtype_size(c->dtype)};
    return DT_OK;
}

/* Whether @p g runs on f32 copies: f16 always, bf16 without oneDNN's bf16 kernel. */
static bool runs_widened(const gemm_call *g, dt__gemm_engine engine)
{
    bool half = g->ab_dtype != DT_DTYPE_F32 || g->c_dtype != DT_DTYPE_F32;
    return half && (g->ab_dtype == DT_DTYPE_F16 || g->K == 0 || engine != DT_GEMM_ENGINE_ONEDNN ||
                    !onednn_bf16());
}

dt_status dt__cpu_gemm(const dt_tensor *a, const dt_tensor *b, bool trans_a, bool trans_b,
                       float alpha, float beta, dt_tensor *c)
{
    gemm_mat ma, mb;
    gemm_call g;
    DT_CHECK(gemm_plan(a, b, trans_a, trans_b, c, &ma, &mb, &g));
    int64_t batches = dt__shape_numel(c->ndim - 2, c->shape);
    if (batches == 0 || g.M == 0 || g.N == 0)
        return DT_OK;
    DT_CHECK(dt__gemm_engine_get(&g.engine));
    if (runs_widened(&g, g.engine))
        return gemm_widened(a, b, trans_a, trans_b, alpha, beta, c);
    char *cd = (char *)c->storage->data + c->offset * (int64_t)dt_dtype_size(c->dtype);
    if (g.K == 0) { /* nothing to multiply: c = beta * c */
        scale_c((float *)cd, batches * g.M * g.N, beta);
        return DT_OK;
    }
    g.alpha = alpha;
    g.beta = beta;
    if (g.engine == DT_GEMM_ENGINE_OPENBLAS)
        DT_CHECK(dt__blas_get(&g.blas));
    return run_batches(&g, c, batches, cd);
}

/* c = bias on every row, then c += op(a) op(b): the bias without oneDNN's epilogue. */
static dt_status gemm_bias_by_beta(const dt_tensor *a, const dt_tensor *b, bool trans_a,
                                   bool trans_b, const dt_tensor *bias, dt_tensor *c)
{
    dt_tensor rows = *bias; /* bias expanded to c's shape: a stack view, no handle */
    rows.ndim = c->ndim;
    memcpy(rows.shape, c->shape, sizeof(rows.shape));
    memset(rows.strides, 0, sizeof(rows.strides));
    rows.strides[c->ndim - 1] = bias->strides[0];
    DT_CHECK(dt__cpu_copy(c, &rows));
    return dt__cpu_gemm(a, b, trans_a, trans_b, 1.0f, 1.0f, c);
}

dt_status dt__cpu_gemm_bias(const dt_tensor *a, const dt_tensor *b, bool trans_a, bool trans_b,
                            const dt_tensor *bias, dt_tensor *c)
{
    gemm_mat ma, mb;
    gemm_call g;
    DT_CHECK(gemm_plan(a, b, trans_a, trans_b, c, &ma, &mb, &g));
    DT_CHECK(dt__cpu_check_local(FN, "bias", bias));
    if (c->dtype != DT_DTYPE_F32 || bias->dtype != DT_DTYPE_F32)
        return DT_ERR(DT_ERR_INVALID_ARG, FN ": bias %s into c %s, both must be f32",
                      dt_dtype_name(bias->dtype), dt_dtype_name(c->dtype));
    if (bias->ndim != 1 || bias->shape[0] != g.N || (g.N > 1 && bias->strides[0] != 1))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      FN ": bias has %d dims, length %lld, stride %lld; expected [%lld], stride 1",
                      bias->ndim, (long long)(bias->ndim > 0 ? bias->shape[0] : 0),
                      (long long)(bias->ndim > 0 ? bias->strides[0] : 0), (long long)g.N);
    int64_t batches = dt__shape_numel(c->ndim - 2, c->shape);
    if (batches == 0 || g.M == 0 || g.N == 0)
        return DT_OK;
    DT_CHECK(dt__gemm_engine_get(&g.engine));
    if (g.engine != DT_GEMM_ENGINE_ONEDNN || g.K == 0 || runs_widened(&g, g.engine))
        return gemm_bias_by_beta(a, b, trans_a, trans_b, bias, c);
    g.bias = (const float *)bias->storage->data + bias->offset;
    char *cd = (char *)c->storage->data + c->offset * (int64_t)dt_dtype_size(c->dtype);
    return run_batches(&g, c, batches, cd);
}
