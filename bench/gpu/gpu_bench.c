/*
 * gpu_bench: dtensor's CUDA GEMM, called through the kernel table
 * (dt__kernels_for(cuda:0)->gemm), against cublasSgemm called directly on the
 * same device buffers, f32, square M=N=K. Both sides use cuBLAS's default math
 * mode (no TF32), as dtensor does, so the ratio measures dtensor's overhead
 * (argument checks, handle lock, launch path), not a different algorithm.
 *
 * Timing: CUDA events on the legacy default stream (the stream dtensor's CUDA
 * kernels run on), a batch of calls per sample, best of R samples with the two
 * sides interleaved. One line per size:
 *   gemm N: dtensor X TFLOP/s, cublas Y TFLOP/s, ratio X/Y, max_rel_diff D
 *
 * Usage: gpu_bench [--sizes 1024,2048,4096] [--reps R]
 *        gpu_bench --devices   (prints the number of usable CUDA devices; when
 *                               0, the CUDA runtime's reason on stderr)
 * Exits 77 when no CUDA device is usable (no GPU or no driver), 1 on error.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "dtensor.h"
#include "kernels/kernel_ops.h"

#define MAX_SIZES 8

static void die(const char *what, const char *why)
{
    fprintf(stderr, "gpu_bench: %s: %s\n", what, why);
    exit(1);
}

static void cuda_ok(cudaError_t e, const char *what)
{
    if (e != cudaSuccess)
        die(what, cudaGetErrorString(e));
}

static void blas_ok(cublasStatus_t s, const char *what)
{
    if (s != CUBLAS_STATUS_SUCCESS)
        die(what, cublasGetStatusString(s));
}

static void dt_ok(dt_status s, const char *what)
{
    if (s != DT_OK)
        die(what, dt_last_error());
}

/* 0 when there is no GPU or no usable driver (cudaGetDeviceCount fails then);
 * with @p why, the runtime's reason goes to stderr. */
static int device_count(bool why)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        if (why)
            fprintf(stderr, "%s\n", cudaGetErrorString(e));
        (void)cudaGetLastError(); /* clear it: not an error for a count */
        return 0;
    }
    return n;
}

/* An n x n f32 tensor on @p dev with uniform [-1, 1) values (filled on the host). */
static dt_tensor *rand_on(dt_device dev, int64_t n, uint64_t seed)
{
    int64_t shape[2] = {n, n};
    dt_tensor *h = NULL, *d = NULL;
    dt_ok(dt_tensor_empty(2, shape, DT_DTYPE_F32, dt_device_cpu(), &h), "dt_tensor_empty");
    dt_ok(dt_tensor_fill_uniform(h, -1.0, 1.0, seed, NULL, NULL), "dt_tensor_fill_uniform");
    dt_ok(dt_tensor_to_device(h, dev, &d), "dt_tensor_to_device");
    dt_tensor_release(h);
    return d;
}

typedef struct gemm_case {
    const dt_kernel_ops *kd;
    cublasHandle_t handle;
    dt_tensor *a, *b, *c_dt, *c_blas;
    int n;
} gemm_case;

static void run_dtensor(const gemm_case *g)
{
    dt_ok(g->kd->gemm(g->a, g->b, false, false, 1.0f, 0.0f, g->c_dt), "dtensor gemm");
}

/* Row-major C = A B is column-major C^T = B^T A^T: swap the operands. */
static void run_cublas(const gemm_case *g)
{
    const float alpha = 1.0f, beta = 0.0f;
    blas_ok(cublasSgemm(g->handle, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &alpha,
                        dt_tensor_data(g->b), g->n, dt_tensor_data(g->a), g->n, &beta,
                        dt_tensor_data(g->c_blas), g->n),
            "cublasSgemm");
}

/* Seconds per call: @p calls calls between two events on the default stream. */
static double time_calls(void (*fn)(const gemm_case *), const gemm_case *g, int calls,
                         cudaEvent_t start, cudaEvent_t stop)
{
    cuda_ok(cudaEventRecord(start, 0), "cudaEventRecord");
    for (int i = 0; i < calls; i++)
        fn(g);
    cuda_ok(cudaEventRecord(stop, 0), "cudaEventRecord");
    cuda_ok(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    cuda_ok(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    return 1e-3 * (double)ms / calls;
}

/* Largest |x - y| / max(|y|, 1) between the two results (a sanity check). */
static double max_rel_diff(const gemm_case *g)
{
    size_t count = (size_t)g->n * (size_t)g->n;
    float *x = malloc(count * sizeof(float)), *y = malloc(count * sizeof(float));
    if (x == NULL || y == NULL)
        die("malloc", "out of memory");
    cuda_ok(cudaMemcpy(x, dt_tensor_data(g->c_dt), count * sizeof(float), cudaMemcpyDeviceToHost),
            "cudaMemcpy");
    cuda_ok(cudaMemcpy(y, dt_tensor_data(g->c_blas), count * sizeof(float), cudaMemcpyDeviceToHost),
            "cudaMemcpy");
    double worst = 0;
    for (size_t i = 0; i < count; i++) {
        double d = fabs((double)x[i] - (double)y[i]) / fmax(fabs((double)y[i]), 1.0);
        worst = d > worst ? d : worst;
    }
    free(x);
    free(y);
    return worst;
}

static void bench_size(const dt_kernel_ops *kd, cublasHandle_t handle, dt_device dev, int n,
                       int reps)
{
    gemm_case g = {
        kd, handle, rand_on(dev, n, 1), rand_on(dev, n, 2), rand_on(dev, n, 3), rand_on(dev, n, 3),
        n};
    cudaEvent_t start, stop;
    cuda_ok(cudaEventCreate(&start), "cudaEventCreate");
    cuda_ok(cudaEventCreate(&stop), "cudaEventCreate");
    /* warm up both paths: cuBLAS handles, kernel selection, clocks */
    run_dtensor(&g);
    run_cublas(&g);
    dt_ok(dt_device_synchronize(dev), "dt_device_synchronize");
    cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    /* about 10 ms of work per sample on a ~50 TFLOP/s GPU, at least 2 calls */
    double flop = 2.0 * (double)n * (double)n * (double)n;
    int calls = (int)fmax(2.0, fmin(200.0, 5e11 / flop));
    double best_dt = 1e30, best_blas = 1e30;
    for (int r = 0; r < reps; r++) {
        double td = time_calls(run_dtensor, &g, calls, start, stop);
        double tb = time_calls(run_cublas, &g, calls, start, stop);
        best_dt = td < best_dt ? td : best_dt;
        best_blas = tb < best_blas ? tb : best_blas;
    }
    dt_ok(dt_device_synchronize(dev), "dt_device_synchronize");
    double tf_dt = flop / best_dt / 1e12, tf_blas = flop / best_blas / 1e12;
    printf("gemm %d: dtensor %.2f TFLOP/s, cublas %.2f TFLOP/s, ratio %.3f, max_rel_diff %.2e\n", n,
           tf_dt, tf_blas, tf_dt / tf_blas, max_rel_diff(&g));
    fflush(stdout);
    cuda_ok(cudaEventDestroy(start), "cudaEventDestroy");
    cuda_ok(cudaEventDestroy(stop), "cudaEventDestroy");
    dt_tensor_release(g.a);
    dt_tensor_release(g.b);
    dt_tensor_release(g.c_dt);
    dt_tensor_release(g.c_blas);
}

static int parse_sizes(const char *text, int *sizes)
{
    int count = 0;
    const char *p = text;
    while (*p != '\0' && count < MAX_SIZES) {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 65536 || (*end != ',' && *end != '\0'))
            die("--sizes", "expected a comma-separated list of sizes in 1..65536");
        sizes[count++] = (int)v;
        p = *end == ',' ? end + 1 : end;
    }
    return count;
}

int main(int argc, char **argv)
{
    int sizes[MAX_SIZES] = {1024, 2048, 4096}, nsizes = 3, reps = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--devices") == 0) {
            printf("%d\n", device_count(true));
            return 0;
        } else if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
            nsizes = parse_sizes(argv[++i], sizes);
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
            if (reps < 1)
                die("--reps", "expected a count >= 1");
        } else {
            fprintf(stderr, "usage: %s [--sizes 1024,2048,4096] [--reps R] | --devices\n", argv[0]);
            return 2;
        }
    }
    if (device_count(false) < 1) {
        printf("# no usable CUDA device (no GPU or no driver): skipped\n");
        return 77;
    }
    dt_device dev = {DT_DEVICE_CUDA, 0};
    const dt_kernel_ops *kd = dt__kernels_for(dev);
    if (kd == NULL || kd->gemm == NULL)
        die("dt__kernels_for(cuda:0)", "this build has no CUDA kernel table");
    cuda_ok(cudaSetDevice(0), "cudaSetDevice");
    struct cudaDeviceProp prop;
    cuda_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    printf("# %s, f32 GEMM, default math mode (no TF32), best of %d\n", prop.name, reps);
    cublasHandle_t handle = NULL;
    blas_ok(cublasCreate(&handle), "cublasCreate");
    blas_ok(cublasSetStream(handle, 0), "cublasSetStream");
    blas_ok(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    for (int i = 0; i < nsizes; i++)
        bench_size(kd, handle, dev, sizes[i], reps);
    cublasDestroy(handle);
    return 0;
}
