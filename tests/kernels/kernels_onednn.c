/*
 * oneDNN as the GEMM engine (this process sets DT_GEMM=onednn):
 *   - dt__onednn_matmul against a float64 reference: every transpose,
 *     non-square, leading dims past the row, alpha/beta, batches (dense,
 *     padded, one operand shared), odd sizes (1, 3, 17, 1000 x 1 x 1000),
 *     beta accumulation, a NaN in c ignored when beta is 0, repeatability;
 *   - the thread count follows dt__kernels_set_num_threads;
 *   - in child processes (the choice is made once per process): DT_GEMM
 *     auto/onednn/openblas, a bad DT_ONEDNN_LIB (an error for onednn, the
 *     OpenBLAS fallback for auto), the OpenMP environment at load and as left,
 *     and a 2-entry primitive cache cycling through 5 shapes.
 * Exits 77 (skipped) when the library was built without oneDNN's headers.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/cpu/onednn.h"
#include "kernels_test_util.h"

#define BAD_LIB "/nonexistent/dir/libdnnl.so.2"

static float *rand_buf(int64_t n)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)(2.0 * ku_uniform() - 1.0);
    return p;
}

/* Elements an operand spans: its last batch's start plus one matrix. */
static int64_t span(const dt__onednn_mm *mm, int64_t bstride, int64_t rows, int64_t ld)
{
    return (mm->batch - 1) * bstride + (rows - 1) * ld + ld;
}

/* alpha op(A) op(B) + beta C0 per batch, in float64, as c's layout (ldc, sc). */
static double *reference(const dt__onednn_mm *mm, const float *a, const float *b, const float *c0,
                         int64_t clen)
{
    double *out = malloc((size_t)clen * sizeof(double));
    assert_non_null(out);
    for (int64_t i = 0; i < clen; i++)
        out[i] = c0[i]; /* padding past N stays as it was */
    for (int64_t bi = 0; bi < mm->batch; bi++) {
        const float *pa = a + bi * mm->sa, *pb = b + bi * mm->sb;
        for (int64_t m = 0; m < mm->m; m++)
            for (int64_t n = 0; n < mm->n; n++) {
                double s = 0.0;
                for (int64_t k = 0; k < mm->k; k++)
                    s += (double)(mm->trans_a ? pa[k * mm->lda + m] : pa[m * mm->lda + k]) *
                         (double)(mm->trans_b ? pb[n * mm->ldb + k] : pb[k * mm->ldb + n]);
                int64_t at = bi * mm->sc + m * mm->ldc + n;
                double old = mm->beta == 0.0f ? 0.0 : mm->beta * (double)c0[at];
                out[at] = mm->alpha * s + old;
            }
    }
    return out;
}

static void expect_near(const char *what, const dt__onednn_mm *mm, const float *got,
                        const double *want, int64_t n)
{
    double atol = 2e-6 * (double)(mm->k + 1) * (fabs(mm->alpha) + 1.0), rtol = 1e-5;
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= atol + rtol * fabs(want[i])))
            fail_msg("%s (batch %lld, %lld x %lld x %lld, t%d%d, alpha %g beta %g): element %lld "
                     "is %.9g, expected %.9g",
                     what, (long long)mm->batch, (long long)mm->m, (long long)mm->n,
                     (long long)mm->k, mm->trans_a, mm->trans_b, (double)mm->alpha,
                     (double)mm->beta, (long long)i, (double)got[i], want[i]);
}

/* Fill in dense leading dims and batch strides where the case left them 0. */
static void complete(dt__onednn_mm *mm, bool shared_a, bool shared_b)
{
    if (mm->batch == 0)
        mm->batch = 1;
    if (mm->lda == 0)
        mm->lda = mm->trans_a ? mm->m : mm->k;
    if (mm->ldb == 0)
        mm->ldb = mm->trans_b ? mm->k : mm->n;
    if (mm->ldc == 0)
        mm->ldc = mm->n;
    if (mm->sa == 0 && !shared_a && mm->batch > 1)
        mm->sa = mm->lda * (mm->trans_a ? mm->k : mm->m);
    if (mm->sb == 0 && !shared_b && mm->batch > 1)
        mm->sb = mm->ldb * (mm->trans_b ? mm->n : mm->k);
    if (mm->sc == 0)
        mm->sc = mm->ldc * mm->m;
}

/* Run @p mm on random data and compare with the reference. */
static void check(const char *what, dt__onednn_mm mm, bool shared_a, bool shared_b)
{
    complete(&mm, shared_a, shared_b);
    int64_t alen = span(&mm, mm.sa, mm.trans_a ? mm.k : mm.m, mm.lda);
    int64_t blen = span(&mm, mm.sb, mm.trans_b ? mm.n : mm.k, mm.ldb);
    int64_t clen = span(&mm, mm.sc, mm.m, mm.ldc);
    float *a = rand_buf(alen), *b = rand_buf(blen), *c = rand_buf(clen);
    double *want = reference(&mm, a, b, c, clen);
    if (dt__onednn_matmul(&mm, a, b, c) != DT_OK)
        fail_msg("%s: %s", what, dt_last_error());
    expect_near(what, &mm, c, want, clen);
    free(a);
    free(b);
    free(c);
    free(want);
}

static void test_transposes_and_ld(void **state)
{
    (void)state;
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        dt__onednn_mm mm = {.m = 37, .n = 53, .k = 29, .trans_a = ta, .trans_b = tb, .alpha = 1};
        check("plain", mm, false, false);
        mm.alpha = 0.5f, mm.beta = 2.0f;
        check("alpha beta", mm, false, false);
        mm.alpha = -1.5f, mm.beta = 1.0f;
        check("alpha, beta 1", mm, false, false);
        /* rows longer than the matrix (a narrowed view), c with padding too */
        mm.lda = (ta ? mm.m : mm.k) + 5, mm.ldb = (tb ? mm.k : mm.n) + 3, mm.ldc = mm.n + 7;
        check("leading dims", mm, false, false);
    }
}

static void test_odd_sizes(void **state)
{
    (void)state;
    static const int64_t sizes[][3] = {{1, 1, 1},       {3, 3, 3},       {17, 17, 17},
                                       {1000, 1000, 1}, {1, 1000, 1000}, {1000, 1, 1000},
                                       {17, 3, 1},      {2, 5, 1000},    {129, 65, 257}};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        for (int t = 0; t < 4; t++) {
            dt__onednn_mm mm = {.m = sizes[i][0],
                                .n = sizes[i][1],
                                .k = sizes[i][2],
                                .trans_a = t & 1,
                                .trans_b = t & 2,
                                .alpha = 1};
            check("odd size", mm, false, false);
            mm.beta = 0.25f;
            check("odd size beta", mm, false, false);
        }
}

static void test_batched(void **state)
{
    (void)state;
    for (int t = 0; t < 4; t++) {
        dt__onednn_mm mm = {.batch = 6,
                            .m = 7,
                            .n = 8,
                            .k = 9,
                            .trans_a = t & 1,
                            .trans_b = t & 2,
                            .alpha = 0.125f};
        check("batched", mm, false, false);
        check("batched, a shared", mm, true, false);
        check("batched, b shared", mm, false, true);
        mm.beta = 1.0f;
        check("batched beta", mm, false, false);
        mm.lda = (t & 1 ? 7 : 9) + 4; /* rows and batches not back to back */
        mm.sa = mm.lda * (t & 1 ? 9 : 7) + 13;
        check("batched padded", mm, false, false);
    }
}

/* Batches that overlap (sliding windows) are not one oneDNN batch: the kernel splits them. */
static void test_overlapping_batches(void **state)
{
    (void)state;
    int64_t fs[2] = {8, 6}, bs[2] = {6, 7}, cs[3] = {4, 5, 7};
    dt_tensor *full = ku_rand(2, fs, -1, 1), *b = ku_rand(2, bs, -1, 1);
    dt_tensor *c = ku_empty(3, cs, DT_DTYPE_F32);
    dt_tensor win = *full; /* batch i: rows i..i+4 */
    win.ndim = 3;
    int64_t ws[3] = {4, 5, 6}, wst[3] = {6, 6, 1};
    memcpy(win.shape, ws, sizeof(ws));
    memcpy(win.strides, wst, sizeof(wst));
    double *vf = ku_values(full), *vb = ku_values(b), want[4 * 5 * 7];
    for (int i = 0; i < 4; i++)
        for (int m = 0; m < 5; m++)
            for (int n = 0; n < 7; n++) {
                double acc = 0.0;
                for (int k = 0; k < 6; k++)
                    acc += vf[(i + m) * 6 + k] * vb[k * 7 + n];
                want[(i * 5 + m) * 7 + n] = acc;
            }
    assert_int_equal(ku_cpu()->gemm(&win, b, false, false, 1.0f, 0.0f, c), DT_OK);
    ku_expect_close("overlapping batches", c, want, 1e-5, 1e-5);
    free(vf);
    free(vb);
    dt_tensor_release(full);
    dt_tensor_release(b);
    dt_tensor_release(c);
}

/* c = a b, then c += a b with beta 1 gives 2 a b; beta 0 never reads c (a NaN there). */
static void test_beta_accumulates(void **state)
{
    (void)state;
    dt__onednn_mm mm = {
        .batch = 1, .m = 20, .n = 30, .k = 40, .lda = 40, .ldb = 30, .ldc = 30, .alpha = 1.0f};
    float *a = rand_buf(20 * 40), *b = rand_buf(40 * 30), *c = rand_buf(20 * 30);
    c[7] = NAN;
    float *zero = calloc(20 * 30, sizeof(float));
    double *once = reference(&mm, a, b, zero, 20 * 30);
    assert_int_equal(dt__onednn_matmul(&mm, a, b, c), DT_OK);
    expect_near("beta 0 over a NaN", &mm, c, once, 20 * 30);
    mm.beta = 1.0f;
    assert_int_equal(dt__onednn_matmul(&mm, a, b, c), DT_OK);
    for (int i = 0; i < 20 * 30; i++)
        once[i] *= 2.0;
    expect_near("beta 1 accumulates", &mm, c, once, 20 * 30);
    free(a);
    free(b);
    free(c);
    free(zero);
    free(once);
}

/* Same call, same bits (the bitwise cpu-vs-sim comparisons rely on it). */
static void test_repeatable(void **state)
{
    (void)state;
    dt__onednn_mm mm = {.batch = 1,
                        .m = 300,
                        .n = 200,
                        .k = 500,
                        .lda = 500,
                        .ldb = 200,
                        .ldc = 200,
                        .alpha = 1.0f};
    float *a = rand_buf(300 * 500), *b = rand_buf(500 * 200);
    float *c1 = calloc(300 * 200, sizeof(float)), *c2 = calloc(300 * 200, sizeof(float));
    assert_int_equal(dt__onednn_matmul(&mm, a, b, c1), DT_OK);
    assert_int_equal(dt__onednn_matmul(&mm, a, b, c2), DT_OK);
    assert_memory_equal(c1, c2, 300 * 200 * sizeof(float));
    free(a);
    free(b);
    free(c1);
    free(c2);
}

static void test_threads_follow(void **state)
{
    (void)state;
    dt_runtime_info info;
    assert_int_equal(dt_runtime_info_get(&info), DT_OK);
    assert_string_equal(info.gemm_engine, "onednn");
    assert_int_equal(info.gemm_threads, dt__kernels_num_threads());
    assert_non_null(strstr(info.gemm_library, "oneDNN"));
    assert_int_equal(strncmp(info.gemm_version, "2.", 2), 0);
    assert_true(info.gemm_kernel[0] != '\0' && strcmp(info.gemm_kernel, "unknown") != 0);
    assert_non_null(strstr(info.gemm_reason, "DT_GEMM=onednn"));
    dt__kernels_set_num_threads(1);
    assert_int_equal(dt__onednn_num_threads(), 1);
    check("one thread", (dt__onednn_mm){.m = 64, .n = 96, .k = 128, .alpha = 1}, false, false);
    assert_int_equal(dt_runtime_info_get(&info), DT_OK);
    assert_int_equal(info.gemm_threads, 1);
    dt__kernels_set_num_threads(0);
    assert_int_equal(dt__onednn_num_threads(), dt__kernels_num_threads());
}

/* ---- child processes: one engine decision each ---- */

/* Re-run this binary as `--child mode` with @p env ("NAME=value", or "NAME" to unset). */
static void run_child(const char *mode, const char *const *env)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        for (; env != NULL && *env != NULL; env++) {
            const char *eq = strchr(*env, '=');
            if (eq == NULL) {
                unsetenv(*env);
                continue;
            }
            char name[64];
            snprintf(name, sizeof(name), "%.*s", (int)(eq - *env), *env);
            setenv(name, eq + 1, 1);
        }
        execl("/proc/self/exe", "kernels_onednn", "--child", mode, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("child '%s' failed (status %d)", mode, st);
}

static bool onednn_mapped(void)
{
    void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_NOLOAD);
    if (h != NULL)
        dlclose(h);
    return h != NULL;
}

static void small_gemm(dt_status want)
{
    int64_t as[2] = {5, 6}, bs[2] = {6, 7}, cs[2] = {5, 7};
    dt_tensor *a = ku_rand(2, as, -1, 1), *b = ku_rand(2, bs, -1, 1), *c = ku_rand(2, cs, 0, 1);
    assert_int_equal(ku_cpu()->gemm(a, b, false, false, 1.0f, 0.0f, c), want);
    dt_tensor_release(a);
    dt_tensor_release(b);
    dt_tensor_release(c);
}

static void child_engine(const char *mode)
{
    dt_runtime_info info;
    if (strcmp(mode, "bad_onednn") == 0) {
        small_gemm(DT_ERR_BACKEND);
        assert_non_null(strstr(dt_last_error(), "DT_GEMM=onednn"));
        assert_non_null(strstr(dt_last_error(), BAD_LIB));
        small_gemm(DT_ERR_BACKEND); /* every matmul, not just the first */
        assert_int_equal(dt_runtime_info_get(&info), DT_OK);
        assert_string_equal(info.gemm_engine, "onednn");
        assert_non_null(strstr(info.gemm_reason, BAD_LIB));
        return;
    }
    small_gemm(DT_OK);
    assert_int_equal(dt_runtime_info_get(&info), DT_OK);
    if (strcmp(mode, "bad_auto") == 0) {
        assert_string_equal(info.gemm_engine, "openblas");
#ifdef DT_SANITIZE_BUILD
        assert_non_null(strstr(info.gemm_reason, "sanitizer")); /* auto never tries oneDNN */
#else
        assert_non_null(strstr(info.gemm_reason, "did not load"));
        assert_non_null(strstr(info.gemm_reason, BAD_LIB));
#endif
    } else if (strcmp(mode, "openblas") == 0) {
        assert_string_equal(info.gemm_engine, "openblas");
        assert_string_equal(info.gemm_kernel, info.blas_kernel);
        assert_false(onednn_mapped()); /* today's path: oneDNN never loaded */
    } else {                           /* auto */
#ifdef DT_SANITIZE_BUILD
        assert_string_equal(info.gemm_engine, "openblas");
        assert_non_null(strstr(info.gemm_reason, "sanitizer"));
#else
        assert_string_equal(info.gemm_engine, "onednn");
        assert_string_equal(info.gemm_reason, "default (DT_GEMM=auto)");
#endif
    }
}

/* What libgomp says its wait policy is (omp_display_env, captured from stderr). */
static void omp_wait_policy(char *out, size_t len)
{
    void *h = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    void (*display)(int) = NULL;
    *(void **)&display = dlsym(h, "omp_display_env");
    assert_non_null(display);
    char path[] = "/tmp/kernels_onednn_XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    assert_true(fd >= 0 && saved >= 0);
    fflush(stderr);
    dup2(fd, 2);
    display(0);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char buf[4096] = {0};
    assert_true(pread(fd, buf, sizeof(buf) - 1, 0) > 0);
    close(fd);
    unlink(path);
    dlclose(h);
    const char *p = strstr(buf, "OMP_WAIT_POLICY = '");
    assert_non_null(p);
    p += strlen("OMP_WAIT_POLICY = '");
    snprintf(out, len, "%.*s", (int)strcspn(p, "'"), p);
}

/* The OpenMP settings at load, and the environment left exactly as found. */
static void child_env(const char *mode)
{
    const dt__onednn_info *i = NULL;
    assert_int_equal(dt__onednn_load(&i), DT_OK);
    char policy[32];
    omp_wait_policy(policy, sizeof(policy));
    if (strcmp(mode, "env_passive") == 0) {
        assert_string_equal(policy, "PASSIVE");
        assert_non_null(strstr(i->detail, "passive"));
        assert_string_equal(getenv("OMP_NUM_THREADS"), ""); /* empty stays empty */
        assert_null(getenv("OMP_WAIT_POLICY"));
    } else { /* env_active: the user's policy stands */
        assert_string_equal(policy, "ACTIVE");
        assert_null(strstr(i->detail, "passive"));
        assert_string_equal(getenv("OMP_WAIT_POLICY"), "active");
        assert_null(getenv("OMP_NUM_THREADS"));
    }
    assert_null(getenv("GOMP_SPINCOUNT"));
    assert_null(getenv("KMP_BLOCKTIME"));
    check("after load", (dt__onednn_mm){.m = 33, .n = 44, .k = 55, .alpha = 1}, false, false);
    dt_runtime_info info;
    assert_int_equal(dt_runtime_info_get(&info), DT_OK);
    assert_int_equal(info.gemm_threads, 1); /* DT_NUM_THREADS=1 */
}

/* DT_GEMM_CACHE=2, 5 shapes in turn: every call evicts, every result right. */
static void child_cache(void)
{
    static const int64_t shapes[5][3] = {
        {8, 9, 10}, {16, 3, 5}, {1, 7, 64}, {33, 33, 1}, {50, 40, 30}};
    for (int round = 0; round < 3; round++)
        for (int s = 0; s < 5; s++)
            check("cache",
                  (dt__onednn_mm){
                      .m = shapes[s][0], .n = shapes[s][1], .k = shapes[s][2], .alpha = 1},
                  false, false);
    int entries = 0;
    int64_t created = 0, evicted = 0;
    dt__onednn_cache_stats(&entries, &created, &evicted);
    assert_int_equal(entries, 2);
    assert_int_equal(created, 15);
    assert_int_equal(evicted, 13);
}

static const char *child_mode;

static void test_child(void **state)
{
    (void)state;
    if (strncmp(child_mode, "env_", 4) == 0)
        child_env(child_mode);
    else if (strcmp(child_mode, "cache") == 0)
        child_cache();
    else
        child_engine(child_mode);
}

static void test_engine_choice(void **state)
{
    (void)state;
    run_child("bad_onednn", (const char *[]){"DT_GEMM=onednn", "DT_ONEDNN_LIB=" BAD_LIB, NULL});
    run_child("bad_auto", (const char *[]){"DT_GEMM=auto", "DT_ONEDNN_LIB=" BAD_LIB, NULL});
    run_child("openblas", (const char *[]){"DT_GEMM=openblas", NULL});
    run_child("auto", (const char *[]){"DT_GEMM", NULL}); /* unset: the default */
}

static void test_omp_environment(void **state)
{
    (void)state;
    run_child("env_passive",
              (const char *[]){"OMP_NUM_THREADS=", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT",
                               "KMP_BLOCKTIME", "DT_NUM_THREADS=1", NULL});
    run_child("env_active",
              (const char *[]){"OMP_NUM_THREADS", "OMP_WAIT_POLICY=active", "GOMP_SPINCOUNT",
                               "KMP_BLOCKTIME", "DT_NUM_THREADS=1", NULL});
}

static void test_cache_eviction(void **state)
{
    (void)state;
    run_child("cache", (const char *[]){"DT_GEMM_CACHE=2", NULL});
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0) {
        child_mode = argv[2];
        const struct CMUnitTest child[] = {cmocka_unit_test(test_child)};
        return cmocka_run_group_tests_name(argv[2], child, NULL, NULL);
    }
    setenv("DT_GEMM", "onednn", 1); /* this process tests oneDNN itself, whatever the caller set */
    if (dt__onednn_load(NULL) == DT_ERR_UNSUPPORTED) {
        printf("skipped: %s\n", dt_last_error());
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transposes_and_ld), cmocka_unit_test(test_odd_sizes),
        cmocka_unit_test(test_batched),           cmocka_unit_test(test_overlapping_batches),
        cmocka_unit_test(test_beta_accumulates),  cmocka_unit_test(test_repeatable),
        cmocka_unit_test(test_threads_follow),    cmocka_unit_test(test_engine_choice),
        cmocka_unit_test(test_omp_environment),   cmocka_unit_test(test_cache_eviction),
    };
    return cmocka_run_group_tests_name("onednn", tests, NULL, NULL);
}
