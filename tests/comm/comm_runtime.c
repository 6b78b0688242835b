/*
 * dt_init's single-process choices: DT_DEVICE=auto picks CUDA only when a GPU
 * is present (a CUDA build on a machine without one runs on the CPU), and
 * BLAS is loaded and reported at init (DT_LOG=info names library, version,
 * kernel and threads before any GEMM runs).
 */
#include "comm_test_util.h"

#include <unistd.h>

#ifdef DT_HAVE_CUDA
#include "kernels/cuda/kernels_cuda.h"
#endif

static char log_path[256];

static bool gpu_present(void)
{
#ifdef DT_HAVE_CUDA
    return dt__cuda_device_count() > 0;
#else
    return false;
#endif
}

static void test_device_auto(void **state)
{
    (void)state;
    dt_device d = dt_runtime_device(ct_rt);
    assert_int_equal(d.type, gpu_present() ? DT_DEVICE_CUDA : DT_DEVICE_CPU);
    assert_string_equal(dt_comm_backend(dt_runtime_world(ct_rt)), "self");
    assert_ptr_equal(dt_runtime_world(ct_rt), dt_runtime_host_world(ct_rt));
}

/* The BLAS report was written by dt_init itself: nothing after it multiplied. */
static void test_blas_reported_at_init(void **state)
{
    (void)state;
    FILE *f = fopen(log_path, "r");
    assert_non_null(f);
    char line[512];
    bool found = false;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strstr(line, "blas: ") != NULL && strstr(line, "kernel ") != NULL &&
            strstr(line, "threads") != NULL)
            found = true;
    fclose(f);
    assert_true(found);
    dt_runtime_info info;
    CT_OK(dt_runtime_info_get(&info));
    assert_true(info.blas_kernel[0] != '\0');
    assert_true(info.blas_threads >= 1);
}

/* DT_DEVICE=cpu on any build gives a working CPU runtime. */
static void test_device_cpu_explicit(void **state)
{
    (void)state;
    setenv("DT_DEVICE", "cpu", 1);
    dt_runtime *rt = NULL;
    dt_runtime_destroy(ct_rt);
    ct_rt = NULL;
    CT_OK(dt_init(NULL, &rt));
    ct_rt = rt;
    assert_int_equal(dt_runtime_device(rt).type, DT_DEVICE_CPU);
    int32_t x[3] = {1, 2, 3}, y[3] = {0};
    CT_OK(dt_comm_allreduce(dt_runtime_world(rt), x, y, 3, DT_DTYPE_I32, DT_REDUCE_OP_SUM, NULL));
    assert_memory_equal(x, y, sizeof(x));
}

/* DT_DEVICE=cuda without a usable GPU fails at init, naming why. */
static void test_device_cuda_explicit(void **state)
{
    (void)state;
    if (gpu_present())
        skip();
    setenv("DT_DEVICE", "cuda", 1);
    dt_runtime *rt = NULL;
    dt_status st = dt_init(NULL, &rt);
#ifdef DT_HAVE_CUDA
    assert_int_equal(st, DT_ERR_INVALID_ARG); /* built in, but no device */
    assert_non_null(strstr(dt_last_error(), "no CUDA device is visible"));
#else
    assert_int_equal(st, DT_ERR_UNSUPPORTED);
#endif
    assert_null(rt);
    setenv("DT_DEVICE", "cpu", 1);
}

int main(void)
{
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMI_RANK");
    unsetenv("PMI_SIZE");
    unsetenv("SLURM_PROCID");
    unsetenv("SLURM_NTASKS");
    setenv("DT_DEVICE", "auto", 1);
    snprintf(log_path, sizeof(log_path), "/tmp/dt_comm_runtime_%d.log", (int)getpid());
    unlink(log_path);
    setenv("DT_LOG", "info", 1);
    setenv("DT_LOG_SUBSYS", "kernel", 1);
    setenv("DT_LOG_FILE", log_path, 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_auto),
        cmocka_unit_test(test_blas_reported_at_init),
        cmocka_unit_test(test_device_cpu_explicit),
        cmocka_unit_test(test_device_cuda_explicit),
    };
    int rc = cmocka_run_group_tests(tests, ct_setup, ct_teardown);
    unlink(log_path);
    return rc;
}
