/*
 * GEMM vs a float64 reference: every transpose combination, batches with
 * broadcasting (both the folded single-call path and the per-batch loop),
 * strided rows, alpha/beta, K = 0 and empty shapes. Then the same GEMM tests
 * in a child process per OpenBLAS kernel the auto-selection could choose on
 * this CPU (OPENBLAS_CORETYPE forced, DT_GEMM=openblas), and the runtime info
 * / re-selection. CMakeLists.txt runs it once per GEMM engine (DT_GEMM).
 */
#define _GNU_SOURCE
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/cpu/blas.h"
#include "kernels_test_util.h"

/* c_ref = alpha op(a) op(b) + beta c0 over c's shape, with batch broadcasting. */
static double *gemm_ref(const dt_tensor *a, const dt_tensor *b, bool ta, bool tb, double alpha,
                        double beta, const dt_tensor *c0)
{
    double *va = ku_values(a), *vb = ku_values(b), *vc = ku_values(c0);
    int cn = dt_tensor_ndim(c0), an = dt_tensor_ndim(a), bn = dt_tensor_ndim(b);
    const int64_t *cs = dt_tensor_shape(c0), *as = dt_tensor_shape(a), *bs = dt_tensor_shape(b);
    int64_t M = cs[cn - 2], N = cs[cn - 1], K = ta ? as[an - 2] : as[an - 1];
    int64_t batches = dt_tensor_numel(c0) / (M * N > 0 ? M * N : 1);
    for (int64_t bi = 0; bi < batches && M * N > 0; bi++) {
        /* batch index -> row-major batch offsets of a and b (broadcast dims read 0) */
        int64_t rem = bi, ia = 0, ib = 0, ma = 1, mb = 1;
        for (int d = cn - 3; d >= 0; d--) {
            int64_t i = rem % cs[d];
            rem /= cs[d];
            int da = d - (cn - an), db = d - (cn - bn);
            if (da >= 0) {
                ia += (as[da] == 1 ? 0 : i) * ma;
                ma *= as[da];
            }
            if (db >= 0) {
                ib += (bs[db] == 1 ? 0 : i) * mb;
                mb *= bs[db];
            }
        }
        const double *pa = va + ia * as[an - 2] * as[an - 1];
        const double *pb = vb + ib * bs[bn - 2] * bs[bn - 1];
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0.0;
                for (int64_t k = 0; k < K; k++)
                    s +=
                        (ta ? pa[k * M + m] : pa[m * K + k]) * (tb ? pb[n * K + k] : pb[k * N + n]);
                double *c = vc + bi * M * N + m * N + n;
                *c = alpha * s + beta * *c;
            }
    }
    free(va);
    free(vb);
    return vc;
}

static void check_gemm(const char *what, dt_tensor *a, dt_tensor *b, bool ta, bool tb, float alpha,
                       float beta, int cn, const int64_t *cshape)
{
    dt_tensor *c = ku_rand(cn, cshape, -1, 1);
    double *want = gemm_ref(a, b, ta, tb, alpha, beta, c);
    assert_int_equal(ku_cpu()->gemm(a, b, ta, tb, alpha, beta, c), DT_OK);
    ku_expect_close(what, c, want, 2e-5, 2e-5);
    free(want);
    dt_tensor_release(c);
}

static void test_gemm_2d_transposes(void **state)
{
    (void)state;
    const int64_t M = 37, N = 53, K = 29;
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        int64_t ash[2] = {ta ? K : M, ta ? M : K}, bsh[2] = {tb ? N : K, tb ? K : N};
        int64_t csh[2] = {M, N};
        dt_tensor *a = ku_rand(2, ash, -1, 1), *b = ku_rand(2, bsh, -1, 1);
        check_gemm("2d", a, b, ta, tb, 1.0f, 0.0f, 2, csh);
        check_gemm("2d alpha beta", a, b, ta, tb, 0.5f, 2.0f, 2, csh);
        dt_tensor_release(a);
        dt_tensor_release(b);
    }
}

static void test_gemm_large(void **state)
{
    (void)state;
    int64_t ash[2] = {200, 150}, bsh[2] = {300, 150}, csh[2] = {200, 300};
    dt_tensor *a = ku_rand(2, ash, -1, 1), *b = ku_rand(2, bsh, -1, 1);
    check_gemm("large", a, b, false, true, 1.0f, 0.0f, 2, csh);
    dt_tensor_release(a);
    dt_tensor_release(b);
}

static void test_gemm_batched_broadcast(void **state)
{
    (void)state;
    /* linear layer: x [3, 5, 16] @ W^T, W [24, 16] -> folded into one call */
    int64_t xs[3] = {3, 5, 16}, ws[2] = {24, 16}, cs[3] = {3, 5, 24};
    dt_tensor *x = ku_rand(3, xs, -1, 1), *w = ku_rand(2, ws, -1, 1);
    check_gemm("linear fold", x, w, false, true, 1.0f, 0.0f, 3, cs);
    check_gemm("linear fold beta", x, w, false, true, 1.0f, 1.0f, 3, cs);
    /* attention-like: [2, 3, T, d] @ [2, 3, T, d]^T, no broadcast */
    int64_t qs[4] = {2, 3, 7, 8}, ss[4] = {2, 3, 7, 7};
    dt_tensor *q = ku_rand(4, qs, -1, 1), *k = ku_rand(4, qs, -1, 1);
    check_gemm("batched", q, k, false, true, 0.25f, 0.0f, 4, ss);
    /* a shared (2-d) and b batched, and a size-1 batch dim broadcast */
    int64_t as2[2] = {6, 4}, bs4[4] = {2, 3, 4, 5}, cs4[4] = {2, 3, 6, 5};
    dt_tensor *a2 = ku_rand(2, as2, -1, 1), *b4 = ku_rand(4, bs4, -1, 1);
    check_gemm("a broadcast", a2, b4, false, false, 1.0f, 0.0f, 4, cs4);
    int64_t a1s[3] = {1, 6, 4};
    dt_tensor *a1 = ku_rand(3, a1s, -1, 1);
    check_gemm("size-1 batch", a1, b4, false, false, 1.0f, 0.0f, 4, cs4);
    check_gemm("trans a batched", b4, b4, true, false, 1.0f, 0.0f, 4, (int64_t[]){2, 3, 5, 5});
    dt_tensor *objs[] = {x, w, q, k, a2, b4, a1};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        dt_tensor_release(objs[i]);
}

static void test_gemm_strided(void **state)
{
    (void)state;
    /* rows with a stride > row length (narrow of the last dim) */
    int64_t wide[2] = {9, 20}, bs[2] = {11, 7}, cs[2] = {9, 7};
    dt_tensor *full = ku_rand(2, wide, -1, 1), *a = NULL;
    assert_int_equal(dt_tensor_narrow(full, 1, 4, 11, &a), DT_OK);
    dt_tensor *b = ku_rand(2, bs, -1, 1);
    check_gemm("narrowed rows", a, b, false, false, 1.0f, 0.0f, 2, cs);
    /* batch dims permuted: [M, B, K] -> [B, M, K] (batch stride K, row stride B*K) */
    int64_t mbk[3] = {6, 4, 5}, ws[2] = {3, 5}, c3[3] = {4, 6, 3};
    dt_tensor *raw = ku_rand(3, mbk, -1, 1), *perm = NULL, *w = ku_rand(2, ws, -1, 1);
    assert_int_equal(dt_tensor_permute(raw, (int[]){1, 0, 2}, &perm), DT_OK);
    check_gemm("permuted batch", perm, w, false, true, 1.0f, 0.0f, 3, c3);
    /* a narrowed batch (storage offset) */
    int64_t b5[3] = {5, 6, 5};
    dt_tensor *big = ku_rand(3, b5, -1, 1), *nb = NULL;
    assert_int_equal(dt_tensor_narrow(big, 0, 1, 3, &nb), DT_OK);
    check_gemm("narrowed batch", nb, w, false, true, 1.0f, 0.0f, 3, (int64_t[]){3, 6, 3});
    dt_tensor *objs[] = {full, a, b, raw, perm, w, big, nb};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        dt_tensor_release(objs[i]);
}

static void test_gemm_degenerate(void **state)
{
    (void)state;
    int64_t as[2] = {4, 0}, bs[2] = {0, 3}, cs[2] = {4, 3};
    dt_tensor *a = ku_rand(2, as, -1, 1), *b = ku_rand(2, bs, -1, 1);
    check_gemm("K = 0", a, b, false, false, 1.0f, 0.5f, 2, cs);
    check_gemm("K = 0 beta 0", a, b, false, false, 1.0f, 0.0f, 2, cs);
    int64_t ae[2] = {0, 5}, be[2] = {5, 3}, ce[2] = {0, 3};
    dt_tensor *a0 = ku_rand(2, ae, -1, 1), *b0 = ku_rand(2, be, -1, 1);
    check_gemm("M = 0", a0, b0, false, false, 1.0f, 0.0f, 2, ce);
    /* mismatched inner dims are an error that names the sizes */
    dt_tensor *c = ku_rand(2, (int64_t[]){4, 3}, -1, 1);
    assert_int_equal(ku_cpu()->gemm(a0, b0, false, false, 1.0f, 0.0f, c), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "op(a)"));
    dt_tensor *objs[] = {a, b, a0, b0, c};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        dt_tensor_release(objs[i]);
}

/*
 * gemm_bias: c = op(a) op(b) + bias on every row, c's old values never read
 * (c starts as NaN). @p dtype: of a and b (bf16: oneDNN's epilogue on the
 * bf16 kernel; on OpenBLAS the bias copied into c and a GEMM with beta 1).
 */
static void check_gemm_bias(const char *what, dt_tensor *a, dt_tensor *b, bool ta, bool tb, int cn,
                            const int64_t *cshape, dt_dtype dtype)
{
    int64_t n = cshape[cn - 1];
    dt_tensor *bias = ku_rand(1, &n, -1, 1), *c = ku_empty(cn, cshape, DT_DTYPE_F32);
    dt_tensor *ha = ku_empty(dt_tensor_ndim(a), dt_tensor_shape(a), dtype);
    dt_tensor *hb = ku_empty(dt_tensor_ndim(b), dt_tensor_shape(b), dtype);
    assert_int_equal(ku_cpu()->copy(ha, a), DT_OK);
    assert_int_equal(ku_cpu()->copy(hb, b), DT_OK);
    assert_int_equal(ku_cpu()->fill(c, 0.0), DT_OK);
    double *want = gemm_ref(ha, hb, ta, tb, 1.0, 0.0, c);
    assert_int_equal(ku_cpu()->fill(c, NAN), DT_OK);
    double *vb = ku_values(bias);
    for (int64_t i = 0; i < dt_tensor_numel(c); i++)
        want[i] += vb[i % n];
    assert_int_equal(ku_cpu()->gemm_bias(ha, hb, ta, tb, bias, c), DT_OK);
    ku_expect_close(what, c, want, 2e-5, 2e-5);
    free(vb);
    free(want);
    dt_tensor *objs[] = {bias, c, ha, hb};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        dt_tensor_release(objs[i]);
}

static void test_gemm_bias(void **state)
{
    (void)state;
    const int64_t M = 37, N = 53, K = 29;
    dt_dtype types[2] = {DT_DTYPE_F32, DT_DTYPE_BF16};
    for (int d = 0; d < 2; d++) {
        for (int t = 0; t < 4; t++) { /* one matrix, every transpose */
            bool ta = t & 1, tb = t & 2;
            int64_t ash[2] = {ta ? K : M, ta ? M : K}, bsh[2] = {tb ? N : K, tb ? K : N};
            dt_tensor *a = ku_rand(2, ash, -1, 1), *b = ku_rand(2, bsh, -1, 1);
            check_gemm_bias("bias 2d", a, b, ta, tb, 2, (int64_t[]){M, N}, types[d]);
            dt_tensor_release(a);
            dt_tensor_release(b);
        }
        /* a Linear (the batch folded into M), a batched product, a batch loop */
        int64_t xs[3] = {3, 5, 16}, ws[2] = {24, 16}, qs[4] = {2, 3, 7, 8};
        dt_tensor *x = ku_rand(3, xs, -1, 1), *w = ku_rand(2, ws, -1, 1);
        dt_tensor *q = ku_rand(4, qs, -1, 1), *k = ku_rand(4, qs, -1, 1);
        check_gemm_bias("bias linear", x, w, false, true, 3, (int64_t[]){3, 5, 24}, types[d]);
        check_gemm_bias("bias batched", q, k, false, true, 4, (int64_t[]){2, 3, 7, 7}, types[d]);
        check_gemm_bias("bias trans a batched", q, k, true, false, 4, (int64_t[]){2, 3, 8, 8},
                        types[d]);
        /* K = 0: c is the bias */
        dt_tensor *a0 = ku_rand(2, (int64_t[]){4, 0}, -1, 1),
                  *b0 = ku_rand(2, (int64_t[]){0, 3}, -1, 1);
        check_gemm_bias("bias K = 0", a0, b0, false, false, 2, (int64_t[]){4, 3}, types[d]);
        dt_tensor *objs[] = {x, w, q, k, a0, b0};
        for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
            dt_tensor_release(objs[i]);
    }
    /* a bias that does not fit c's rows is an error naming it */
    dt_tensor *a = ku_rand(2, (int64_t[]){4, 5}, -1, 1), *b = ku_rand(2, (int64_t[]){5, 3}, -1, 1);
    dt_tensor *c = ku_rand(2, (int64_t[]){4, 3}, -1, 1), *bad = ku_rand(1, (int64_t[]){4}, -1, 1);
    assert_int_equal(ku_cpu()->gemm_bias(a, b, false, false, bad, c), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "bias has 1 dims, length 4"));
    dt_tensor *objs[] = {a, b, c, bad};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        dt_tensor_release(objs[i]);
}

static void test_runtime_info(void **state)
{
    (void)state;
    dt_runtime_info info;
    assert_int_equal(dt_runtime_info_get(&info), DT_OK);
    assert_non_null(strstr(info.blas_library, "OpenBLAS"));
    assert_true(strlen(info.blas_version) > 0 && strcmp(info.blas_version, "unknown") != 0);
    assert_true(strlen(info.blas_kernel) > 0);
    assert_true(info.blas_threads >= 1 && info.num_threads >= 1);
    assert_int_equal(info.blas_threads, info.num_threads);
    const char *user = getenv("OPENBLAS_CORETYPE");
    const char *autosel = getenv("DT_BLAS_AUTOSELECT");
    if ((user == NULL || user[0] == '\0') && (autosel == NULL || strcmp(autosel, "0") != 0)) {
        /* auto-selection must pick the best kernel this CPU supports */
        assert_false(info.blas_kernel_generic);
        const char *want = dt__blas_core_for_level(dt__cpu_level());
        if (want != NULL)
            assert_int_equal(dt__blas_core_level(info.blas_kernel), dt__blas_core_level(want));
    }
    assert_int_equal(dt_runtime_info_get(NULL), DT_ERR_INVALID_ARG);
}

/*
 * The kernels this test may force: those auto-selection could choose here,
 * capped at the environment's OPENBLAS_CORETYPE when it sets one (machines
 * set it on purpose where an OpenBLAS build is wrong on a better kernel).
 */
static int allowed_cores(const char **names, int max)
{
    const char *user = getenv("OPENBLAS_CORETYPE");
    int cap = user != NULL && user[0] != '\0' ? dt__blas_core_level(user) : -1;
    int n = dt__blas_candidates(names, max), kept = 0;
    for (int i = 0; i < n; i++)
        if (user == NULL || user[0] == '\0' || dt__blas_core_level(names[i]) <= cap)
            names[kept++] = names[i];
    return kept;
}

/* Switching an already-loaded OpenBLAS (the path for programs that link it). */
static void test_force_core_switches(void **state)
{
    (void)state;
    const char *cand[8];
    int n = allowed_cores(cand, 8);
    if (n < 2)
        skip();
    dt_runtime_info before;
    assert_int_equal(dt_runtime_info_get(&before), DT_OK);
    const char *other = cand[n - 1];
    assert_int_equal(dt__blas_force_core(other), DT_OK);
    dt_runtime_info now;
    assert_int_equal(dt_runtime_info_get(&now), DT_OK);
    assert_int_equal(strcasecmp(now.blas_kernel, other), 0);
    test_gemm_large(state);
    assert_int_equal(dt__blas_force_core(before.blas_kernel), DT_OK);
    assert_int_equal(dt_runtime_info_get(&now), DT_OK);
    assert_string_equal(now.blas_kernel, before.blas_kernel);
    assert_int_equal(dt__blas_force_core("NoSuchCore"), DT_ERR_INVALID_ARG);
}

/* Re-run this binary's GEMM tests with each candidate kernel forced. */
static void test_gemm_every_candidate(void **state)
{
    (void)state;
    const char *cand[8];
    int n = allowed_cores(cand, 8);
    if (n < 1)
        skip(); /* the environment's kernel is not one auto-selection knows */
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            setenv("OPENBLAS_CORETYPE", cand[i], 1);
            setenv("DT_GEMM", "openblas", 1); /* these kernels are OpenBLAS's */
            setenv("DT_LOG", "error", 1);     /* the expected fallback-kernel warnings */
            execl("/proc/self/exe", "kernels_gemm", "--child-core", cand[i], (char *)NULL);
            _exit(127);
        }
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            fail_msg("GEMM tests failed with OPENBLAS_CORETYPE=%s (status %d)", cand[i], st);
    }
}

/* Threads: DT_NUM_THREADS, else usable cores / ranks on this node, >= 1; applied to OpenBLAS. */
static void test_threads(void **state)
{
    (void)state;
    const dt__blas *b = NULL;
    assert_int_equal(dt__blas_get(&b), DT_OK);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    setenv("LOCAL_WORLD_SIZE", "64", 1); /* more ranks than cores: one thread each */
    assert_int_equal(dt__kernels_num_threads(), 1);
    setenv("LOCAL_WORLD_SIZE", "1", 1);
    assert_true(dt__kernels_num_threads() >= 1 && dt__kernels_num_threads() <= cores);
    setenv("DT_NUM_THREADS", "3", 1);
    assert_int_equal(dt__kernels_num_threads(), 3);
    dt__kernels_set_num_threads(1); /* dt_init's num_threads wins over the environment */
    assert_int_equal(dt__kernels_num_threads(), 1);
    assert_int_equal(b->get_num_threads(), 1);
    unsetenv("DT_NUM_THREADS");
    unsetenv("LOCAL_WORLD_SIZE");
    dt__kernels_set_num_threads(0); /* back to the environment's value */
    assert_int_equal(b->get_num_threads(), dt__kernels_num_threads());
}

static const char *child_core;

static void test_child_core_in_use(void **state)
{
    (void)state;
    dt_runtime_info info;
    assert_int_equal(dt_runtime_info_get(&info), DT_OK);
    if (strcasecmp(info.blas_kernel, child_core) != 0)
        fail_msg("forced OPENBLAS_CORETYPE=%s but OpenBLAS uses %s", child_core, info.blas_kernel);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest gemm_tests[] = {
        cmocka_unit_test(test_gemm_2d_transposes),     cmocka_unit_test(test_gemm_large),
        cmocka_unit_test(test_gemm_batched_broadcast), cmocka_unit_test(test_gemm_strided),
        cmocka_unit_test(test_gemm_degenerate),        cmocka_unit_test(test_gemm_bias),
    };
    if (argc == 3 && strcmp(argv[1], "--child-core") == 0) {
        child_core = argv[2];
        const struct CMUnitTest child[] = {cmocka_unit_test(test_child_core_in_use)};
        int f = cmocka_run_group_tests_name(argv[2], child, NULL, NULL);
        return f + cmocka_run_group_tests_name("gemm_forced_core", gemm_tests, NULL, NULL);
    }
    const struct CMUnitTest other[] = {
        cmocka_unit_test(test_runtime_info),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_force_core_switches),
        cmocka_unit_test(test_gemm_every_candidate),
    };
    int f = cmocka_run_group_tests_name("gemm", gemm_tests, NULL, NULL);
    return f + cmocka_run_group_tests_name("blas_kernel", other, NULL, NULL);
}
