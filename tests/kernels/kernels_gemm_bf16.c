/*
 * bf16 GEMM (issue 15 item 2): a and b in bf16, accumulation in f32, c in f32
 * or bf16, against a float64 reference of the same bf16 inputs. Every
 * transpose, alpha/beta, the Linear case (b shared by the batch, folded into
 * M), attention's batched [B, H, T, d] and K = 0. Run once per engine
 * (DT_GEMM=onednn: oneDNN's bf16 kernel where the CPU has one, else f32
 * copies; DT_GEMM=openblas: f32 copies), so both paths are checked.
 */
#include <string.h>

#include "kernels_test_util.h"

/* @p t converted to @p dtype (a new tensor). */
static dt_tensor *to_dtype(const dt_tensor *t, dt_dtype dtype)
{
    dt_tensor *o = ku_empty(dt_tensor_ndim(t), dt_tensor_shape(t), dtype);
    assert_int_equal(ku_cpu()->copy(o, t), DT_OK);
    return o;
}

static dt_dtype H = DT_DTYPE_BF16; /* the half type of this round: bf16, then f16 */

/* A random half (H) tensor in [-1, 1). */
static dt_tensor *rand_bf16(int ndim, const int64_t *shape)
{
    dt_tensor *f = ku_rand(ndim, shape, -1.0, 1.0);
    dt_tensor *h = to_dtype(f, H);
    dt_tensor_release(f);
    return h;
}

typedef struct gemm_case {
    int nd;           /* of c; a and b have nd or 2 dims */
    int64_t batch[2]; /* c's batch dims (nd - 2 of them) */
    int64_t m, n, k;
    bool ta, tb, b_shared; /* b_shared: b is 2-d (a weight) */
    float alpha, beta;
} gemm_case;

/* Element (batch i, row r, col c) of an operand stored [.., rows, cols] (2-d: shared). */
static double at(const double *v, const dt_tensor *t, int64_t i, int64_t r, int64_t c)
{
    int nd = dt_tensor_ndim(t);
    const int64_t *s = dt_tensor_shape(t);
    int64_t rows = s[nd - 2], cols = s[nd - 1];
    int64_t base = nd == 2 ? 0 : i * rows * cols;
    return v[base + r * cols + c];
}

/* alpha op(a) op(b) + beta c0 in float64, and the bound of its f32 rounding error. */
static void reference(const gemm_case *g, const dt_tensor *a, const dt_tensor *b,
                      const dt_tensor *c0, double *want, double *scale)
{
    double *va = ku_values(a), *vb = ku_values(b), *vc = ku_values(c0);
    int64_t batches = dt_tensor_numel(c0) / (g->m * g->n);
    for (int64_t i = 0; i < batches; i++)
        for (int64_t r = 0; r < g->m; r++)
            for (int64_t c = 0; c < g->n; c++) {
                double s = 0, mag = 0;
                for (int64_t k = 0; k < g->k; k++) {
                    double x = g->ta ? at(va, a, i, k, r) : at(va, a, i, r, k);
                    double y = g->tb ? at(vb, b, i, c, k) : at(vb, b, i, k, c);
                    s += x * y;
                    mag += fabs(x * y);
                }
                int64_t o = (i * g->m + r) * g->n + c;
                double old = g->beta == 0.0f ? 0.0 : g->beta * vc[o];
                want[o] = g->alpha * s + old;
                scale[o] = fabs(g->alpha) * mag + fabs(old);
            }
    free(va);
    free(vb);
    free(vc);
}

static void shape_of(const gemm_case *g, int64_t rows, int64_t cols, bool two_d, int64_t *s,
                     int *nd)
{
    *nd = two_d ? 2 : g->nd;
    for (int d = 0; d < *nd - 2; d++)
        s[d] = g->batch[d];
    s[*nd - 2] = rows;
    s[*nd - 1] = cols;
}

static void run_case(const gemm_case *g, dt_dtype c_dtype)
{
    int64_t sa[4], sb[4], sc[4];
    int na, nb, nc;
    shape_of(g, g->ta ? g->k : g->m, g->ta ? g->m : g->k, false, sa, &na);
    shape_of(g, g->tb ? g->n : g->k, g->tb ? g->k : g->n, g->b_shared, sb, &nb);
    shape_of(g, g->m, g->n, false, sc, &nc);
    dt_tensor *a = rand_bf16(na, sa), *b = rand_bf16(nb, sb);
    dt_tensor *c32 = ku_rand(nc, sc, -1.0, 1.0), *c = to_dtype(c32, c_dtype);
    int64_t n = dt_tensor_numel(c);
    double *want = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    double *scale = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    assert_true(want != NULL && scale != NULL);
    reference(g, a, b, c, want, scale);
    assert_int_equal(ku_cpu()->gemm(a, b, g->ta, g->tb, g->alpha, g->beta, c), DT_OK);
    /* f32 accumulation: about K f32 roundings; a bf16 c adds one rounding (2^-9 relative) */
    double out_rtol = c_dtype == DT_DTYPE_BF16  ? 1.0 / 256
                      : c_dtype == DT_DTYPE_F16 ? 1.0 / 2048
                                                : 0.0;
    for (int64_t i = 0; i < n; i++) {
        double got = dt_tensor_item_at(c, i);
        double tol = 1e-5 * scale[i] + out_rtol * fabs(want[i]) + 1e-30;
        if (!(fabs(got - want[i]) <= tol))
            fail_msg("m %lld n %lld k %lld ta %d tb %d alpha %g beta %g -> %s: element %lld is "
                     "%.9g, expected %.9g (tolerance %.3g)",
                     (long long)g->m, (long long)g->n, (long long)g->k, g->ta, g->tb,
                     (double)g->alpha, (double)g->beta, dt_dtype_name(c_dtype), (long long)i, got,
                     want[i], tol);
    }
    free(want);
    free(scale);
    dt_tensor_release(a);
    dt_tensor_release(b);
    dt_tensor_release(c);
    dt_tensor_release(c32);
}

static void test_against_f64(void **state)
{
    (void)state;
    static const gemm_case cases[] = {
        {2, {0}, 17, 9, 33, false, false, true, 1.0f, 0.0f},
        {2, {0}, 64, 48, 256, false, true, true, 1.0f, 0.0f},
        {2, {0}, 31, 40, 7, true, false, true, 0.5f, 1.0f},
        {2, {0}, 8, 8, 130, true, true, true, -2.0f, 0.25f},
        {2, {0}, 1, 1000, 64, false, true, true, 1.0f, 0.0f},
        {3, {3}, 16, 24, 40, false, true, true, 1.0f, 1.0f},      /* Linear: b shared, folded */
        {3, {4}, 5, 6, 7, true, false, false, 1.0f, 0.0f},        /* per-batch b, transposed a */
        {4, {2, 3}, 32, 32, 16, false, true, false, 0.25f, 0.0f}, /* attention q k^T */
        {4, {2, 3}, 32, 16, 32, false, false, false, 1.0f, 0.0f}, /* attention p v */
        {2, {0}, 5, 4, 0, false, false, true, 1.0f, 0.5f},        /* K = 0: c = beta c */
    };
    for (int h = 0; h < 2; h++) { /* bf16 (oneDNN's kernel or f32 copies), then f16 (copies) */
        H = h ? DT_DTYPE_F16 : DT_DTYPE_BF16;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            run_case(&cases[i], DT_DTYPE_F32);
            run_case(&cases[i], H);
        }
    }
    H = DT_DTYPE_BF16;
}

/* Operand dtypes that do not go together are refused, naming both. */
static void test_bad_dtypes(void **state)
{
    (void)state;
    int64_t s[2] = {4, 4};
    dt_tensor *h = rand_bf16(2, s), *f = ku_rand(2, s, -1, 1), *c16 = ku_empty(2, s, DT_DTYPE_BF16);
    dt_tensor *i32 = ku_empty(2, s, DT_DTYPE_I32);
    const dt_kernel_ops *k = ku_cpu();
    assert_int_equal(k->gemm(h, f, false, false, 1, 0, f), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "a is bf16 but b is f32"));
    assert_int_equal(k->gemm(f, f, false, false, 1, 0, c16), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "c has dtype bf16, expected f32"));
    assert_int_equal(k->gemm(i32, i32, false, false, 1, 0, f), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "a has dtype i32"));
    assert_true(k->supports(DT_KOP_GEMM, DT_DTYPE_BF16));
    dt_tensor_release(h);
    dt_tensor_release(f);
    dt_tensor_release(c16);
    dt_tensor_release(i32);
}

/* What runs the bf16 matmuls is reported (dt_runtime_info, DT_LOG=info). */
static void test_reported(void **state)
{
    (void)state;
    dt_runtime_info info;
    assert_int_equal(dt_runtime_info_get(&info), DT_OK);
    assert_true(info.gemm_kernel_bf16[0] != '\0');
    if (strcmp(info.gemm_engine, "openblas") == 0)
        assert_string_equal(info.gemm_kernel_bf16, "converted to f32");
    print_message("engine %s: bf16 kernel %s\n", info.gemm_engine, info.gemm_kernel_bf16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_f64),
        cmocka_unit_test(test_bad_dtypes),
        cmocka_unit_test(test_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
