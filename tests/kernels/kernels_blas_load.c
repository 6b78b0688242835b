/*
 * How OpenBLAS gets its kernel, end to end, in the two situations a program
 * can be in (built twice by CMakeLists.txt), each checked as this machine's
 * environment has it:
 *   kernels_blas_dlopen:    the binary does not link OpenBLAS (--as-needed),
 *                           so dtensor dlopens it;
 *   kernels_blas_preloaded: OpenBLAS is linked and loaded before main.
 * Where the environment leaves OPENBLAS_CORETYPE unset, dtensor must pick the
 * kernel for this CPU: at its dlopen, or by re-selecting in place when the
 * preloaded library chose a fallback (simulated: this binary re-executes
 * itself once with OPENBLAS_CORETYPE=Prescott, then unsets it, as if the
 * library had picked Prescott by itself). Where the environment sets it (some
 * machines do on purpose: some OpenBLAS builds are wrong on their CPUs), that
 * kernel must be the one in use, nothing re-selected, the variable left as
 * found, and a fallback below the CPU's level reported in a warning.
 * Both then check GEMM is right.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "kernels/cpu/blas.h"
#include "kernels_test_util.h"

static bool expect_preloaded;
static bool simulated_fallback; /* the re-executed child of the preloaded test */
static char user_core[64];      /* the environment's OPENBLAS_CORETYPE ("" when unset) */
static char *env_at_start;      /* the same, as getenv returned it (copied) */
static char warning[1024];      /* the first "kernel" warning logged */

static void capture_warning(dt_log_level level, const char *subsys, const char *line, void *user)
{
    (void)user;
    if (level == DT_LOG_LEVEL_WARN && strcmp(subsys, "kernel") == 0 && warning[0] == '\0')
        snprintf(warning, sizeof(warning), "%s", line);
}

static void test_kernel_selected(void **state)
{
    (void)state;
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
    assert_int_equal(h != NULL, expect_preloaded);
    if (h != NULL)
        dlclose(h);
    dt_log_set(capture_warning, NULL);
    const dt__blas *b = NULL;
    assert_int_equal(dt__blas_get(&b), DT_OK);
    dt_log_set(NULL, NULL);
    int level = dt__cpu_level();
    if (user_core[0] != '\0') {
        /* honoured: the user's kernel, said so, never overridden */
        assert_string_equal(b->how, "OPENBLAS_CORETYPE");
        assert_string_equal(b->wanted, "");
        int want = dt__blas_core_level(user_core);
        if (want >= 0)
            assert_int_equal(dt__blas_core_level(b->get_corename()), want);
        if (want >= 0 && level > want) {
            assert_non_null(strstr(warning, "fallback below what this CPU supports"));
            assert_non_null(strstr(warning, b->get_corename()));
        }
        assert_string_equal(getenv("OPENBLAS_CORETYPE"), env_at_start);
        return;
    }
    if (level >= 0)
        assert_int_equal(dt__blas_core_level(b->get_corename()), level);
    if (simulated_fallback && level > 0)
        assert_non_null(strstr(b->how, "re-selected"));
    if (!expect_preloaded)
        assert_string_equal(b->how, "auto-selected");
    assert_string_equal(warning, "");
    /* the user's environment is left as found */
    const char *now = getenv("OPENBLAS_CORETYPE");
    assert_int_equal(now == NULL, env_at_start == NULL);
    if (now != NULL)
        assert_string_equal(now, env_at_start);
}

static void test_gemm_after_selection(void **state)
{
    (void)state;
    int64_t as[2] = {96, 70}, bs[2] = {70, 130}, cs[2] = {96, 130};
    dt_tensor *a = ku_rand(2, as, -1, 1), *b = ku_rand(2, bs, -1, 1);
    dt_tensor *c = ku_empty(2, cs, DT_DTYPE_F32);
    double *va = ku_values(a), *vb = ku_values(b), *want = malloc(96 * 130 * sizeof(double));
    for (int i = 0; i < 96; i++)
        for (int j = 0; j < 130; j++) {
            double s = 0;
            for (int k = 0; k < 70; k++)
                s += va[i * 70 + k] * vb[k * 130 + j];
            want[i * 130 + j] = s;
        }
    assert_int_equal(ku_cpu()->gemm(a, b, false, false, 1.0f, 0.0f, c), DT_OK);
    ku_expect_close("gemm", c, want, 2e-5, 2e-5);
    free(va);
    free(vb);
    free(want);
    dt_tensor_release(a);
    dt_tensor_release(b);
    dt_tensor_release(c);
}

int main(int argc, char **argv)
{
    const char *env = getenv("OPENBLAS_CORETYPE");
    expect_preloaded = argc > 1 && strcmp(argv[1], "--preloaded") == 0;
    simulated_fallback = argc > 2 && strcmp(argv[2], "--simulated-fallback") == 0;
    if (simulated_fallback) {
        unsetenv("OPENBLAS_CORETYPE"); /* OpenBLAS already read it while loading */
    } else if (expect_preloaded && env == NULL) {
        /* load OpenBLAS again, in a fresh image, with a fallback kernel */
        setenv("OPENBLAS_CORETYPE", "Prescott", 1);
        execl("/proc/self/exe", argv[0], "--preloaded", "--simulated-fallback", (char *)NULL);
        perror("execl /proc/self/exe");
        return 1;
    } else if (env != NULL && env[0] != '\0') {
        snprintf(user_core, sizeof(user_core), "%s", env);
    }
    env = getenv("OPENBLAS_CORETYPE");
    env_at_start = env != NULL ? strdup(env) : NULL;
    dt_log_set_level(DT_LOG_LEVEL_WARN); /* the fallback warning is checked, whatever DT_LOG says */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_selected),
        cmocka_unit_test(test_gemm_after_selection),
    };
    return cmocka_run_group_tests_name(expect_preloaded ? "blas_preloaded" : "blas_dlopen", tests,
                                       NULL, NULL);
}
