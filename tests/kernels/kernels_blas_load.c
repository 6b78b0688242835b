/*
 * How OpenBLAS gets the right kernel, end to end, in the two situations a
 * program can be in (built twice by CMakeLists.txt):
 *   kernels_blas_dlopen:    the binary does not link OpenBLAS (--as-needed),
 *                           so dtensor dlopens it with OPENBLAS_CORETYPE set;
 *   kernels_blas_preloaded: OpenBLAS is linked and was loaded before main
 *                           with a fallback kernel (ctest starts it with
 *                           OPENBLAS_CORETYPE=Prescott; main unsets it, as
 *                           if the library had picked Prescott by itself), so
 *                           dtensor must re-select the kernel in place.
 * Both then check the kernel matches the CPU and GEMM is right.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
#include <strings.h>

#include "kernels/cpu/blas.h"
#include "kernels_test_util.h"

static bool expect_preloaded;

static void test_kernel_selected(void **state)
{
    (void)state;
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
    assert_int_equal(h != NULL, expect_preloaded);
    if (h != NULL)
        dlclose(h);
    const dt__blas *b = NULL;
    assert_int_equal(dt__blas_get(&b), DT_OK);
    int level = dt__cpu_level();
    if (level >= 0)
        assert_int_equal(dt__blas_core_level(b->get_corename()), level);
    if (expect_preloaded && level > 0)
        assert_non_null(strstr(b->how, "re-selected"));
    if (!expect_preloaded)
        assert_string_equal(b->how, "auto-selected");
    /* the user's environment is left as found */
    assert_null(getenv("OPENBLAS_CORETYPE"));
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
    if (argc > 1 && strcmp(argv[1], "--preloaded") == 0) {
        expect_preloaded = true;
        unsetenv("OPENBLAS_CORETYPE"); /* OpenBLAS already read it while loading */
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_selected),
        cmocka_unit_test(test_gemm_after_selection),
    };
    return cmocka_run_group_tests_name(expect_preloaded ? "blas_preloaded" : "blas_dlopen", tests,
                                       NULL, NULL);
}
