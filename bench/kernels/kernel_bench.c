/*
 * kernel_bench: side by side, in one run
 *   1. dtensor's matmul (kernel table, auto-selected OpenBLAS kernel) vs a
 *      direct cblas_sgemm call into the same library, M=N=K 512/1024/2048,
 *      1 and 2 threads (goal: within 3%);
 *   2. LayerNorm / softmax / gelu throughput in GB/s vs memcpy of the same
 *      bytes (goal: >= 50% of memcpy); 2b. the same and gelu backward and add
 *      on bf16 operands, read natively vs through f32 copies;
 *   3. OpenBLAS with dtensor's auto-selected kernel vs as loaded by default
 *      (DT_BLAS_AUTOSELECT=0) vs each candidate kernel forced
 *      (OPENBLAS_CORETYPE), each in a child process, 1 and 2 threads
 *      (goal: auto >= 0.9x the best).
 * Timings are best-of-R with the two sides interleaved, because the machine
 * is shared; single-threaded runs are timed in thread CPU time (time spent
 * descheduled by other load does not count), 2-thread GEMM in wall time.
 * Read the ratios, not the absolute numbers.
 * Usage: kernel_bench [--quick] [--bf16 (section 2b only)]   (--gemm-child is internal)
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dtensor.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/kernel_ops.h"

static const int64_t sizes[3] = {512, 1024, 2048};
static int quick;

static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(bench_clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Thread CPU time for one thread, wall time for more (OpenBLAS's own threads). */
static void use_clock_for(int threads)
{
    bench_clock = threads == 1 ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
}

/* More repetitions for wall-clock (2-thread) runs: best-of filters the load. */
static int reps_for(int64_t n, int threads)
{
    int r = (n <= 512 ? 20 : (n <= 1024 ? 6 : 3)) * (threads > 1 ? 2 : 1);
    return quick ? (r + 2) / 3 : r;
}

static dt_tensor *rand_tensor(int ndim, const int64_t *shape)
{
    dt_tensor *t = NULL;
    if (dt_tensor_empty(ndim, shape, DT_DTYPE_F32, dt_device_cpu(), &t) != DT_OK ||
        dt_tensor_fill_uniform(t, -1.0, 1.0, 42, NULL, NULL) != DT_OK) {
        fprintf(stderr, "kernel_bench: %s\n", dt_last_error());
        exit(1);
    }
    return t;
}

static void die_on(dt_status s)
{
    if (s != DT_OK) {
        fprintf(stderr, "kernel_bench: %s: %s\n", dt_status_str(s), dt_last_error());
        exit(1);
    }
}

/* ---------------------------------------------------------------- GEMM */

typedef struct gemm_case {
    dt_tensor *a, *b, *c;
    int n;
} gemm_case;

static gemm_case gemm_case_new(int64_t n)
{
    int64_t s[2] = {n, n};
    gemm_case g = {rand_tensor(2, s), rand_tensor(2, s), rand_tensor(2, s), (int)n};
    return g;
}

static void gemm_case_free(gemm_case *g)
{
    dt_tensor_release(g->a);
    dt_tensor_release(g->b);
    dt_tensor_release(g->c);
}

static double time_dtensor(const gemm_case *g)
{
    double t = now_s();
    die_on(dt__kernels_for(dt_device_cpu())->gemm(g->a, g->b, false, false, 1.0f, 0.0f, g->c));
    return now_s() - t;
}

static double time_direct(const dt__blas *blas, const gemm_case *g)
{
    double t = now_s();
    blas->sgemm(DT_CBLAS_ROW_MAJOR, DT_CBLAS_NO_TRANS, DT_CBLAS_NO_TRANS, g->n, g->n, g->n, 1.0f,
                dt_tensor_data(g->a), g->n, dt_tensor_data(g->b), g->n, 0.0f, dt_tensor_data(g->c),
                g->n);
    return now_s() - t;
}

static double gflops(int64_t n, double t)
{
    return 2.0 * (double)n * (double)n * (double)n / t / 1e9;
}

/* Best GFLOP/s of dtensor and of the direct call, interleaved; [threads-1][size]. */
static double dt_gf[2][3], direct_gf[2][3];

static void bench_gemm_vs_direct(const dt__blas *blas)
{
    printf("\n## 1. matmul: dtensor kernel table vs direct cblas_sgemm (same library)\n");
    printf("%-6s %-8s %14s %14s %8s\n", "N", "threads", "dtensor GF/s", "cblas GF/s", "ratio");
    for (int th = 1; th <= 2; th++) {
        dt__kernels_set_num_threads(th);
        use_clock_for(th);
        for (int i = 0; i < 3; i++) {
            gemm_case g = gemm_case_new(sizes[i]);
            time_direct(blas, &g); /* warm up: pages, OpenBLAS buffers, threads */
            double bd = 1e30, bc = 1e30;
            for (int r = 0; r < reps_for(sizes[i], th); r++) {
                double td = time_dtensor(&g), tc = time_direct(blas, &g);
                bd = td < bd ? td : bd;
                bc = tc < bc ? tc : bc;
            }
            dt_gf[th - 1][i] = gflops(sizes[i], bd);
            direct_gf[th - 1][i] = gflops(sizes[i], bc);
            printf("%-6lld %-8d %14.1f %14.1f %8.3f\n", (long long)sizes[i], th, dt_gf[th - 1][i],
                   direct_gf[th - 1][i], bc / bd);
            gemm_case_free(&g);
        }
    }
    dt__kernels_set_num_threads(0);
}

/* Child: time the loaded OpenBLAS directly; print "gemm N threads gflops core". */
static int gemm_child(void)
{
    const dt__blas *blas = NULL;
    die_on(dt__blas_get(&blas));
    for (int th = 1; th <= 2; th++) {
        blas->set_num_threads(th);
        use_clock_for(th);
        for (int i = 0; i < 3; i++) {
            gemm_case g = gemm_case_new(sizes[i]);
            time_direct(blas, &g);
            double best = 1e30;
            for (int r = 0; r < reps_for(sizes[i], th); r++) {
                double t = time_direct(blas, &g);
                best = t < best ? t : best;
            }
            printf("gemm %lld %d %.3f %s\n", (long long)sizes[i], th, gflops(sizes[i], best),
                   blas->get_corename());
            gemm_case_free(&g);
        }
    }
    return 0;
}

/* Run this binary as a child with @p env_prefix; parse its GF/s into gf[2][3]. */
static int run_child(const char *env_prefix, double gf[2][3], char *core, size_t core_len)
{
    char self[PATH_MAX], cmd[PATH_MAX + 256], line[256];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    snprintf(cmd, sizeof(cmd), "env %s DT_LOG=error '%s' --gemm-child%s", env_prefix, self,
             quick ? " --quick" : "");
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    int got = 0;
    while (fgets(line, sizeof(line), p) != NULL) {
        long long size = 0;
        int th = 0;
        double v = 0;
        char name[64] = "";
        if (sscanf(line, "gemm %lld %d %lf %63s", &size, &th, &v, name) != 4 || th < 1 || th > 2)
            continue;
        for (int i = 0; i < 3; i++)
            if (sizes[i] == size) {
                gf[th - 1][i] = v;
                got++;
            }
        snprintf(core, core_len, "%s", name);
    }
    return pclose(p) == 0 && got == 6 ? 0 : -1;
}

/* Keep the best of each entry (rounds of children at different moments). */
static void keep_best(double best[2][3], double now[2][3])
{
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 3; i++)
            best[t][i] = now[t][i] > best[t][i] ? now[t][i] : best[t][i];
}

/*
 * Every configuration runs in its own child process (dtensor's auto-selection
 * too, so all start alike), round-robin for several rounds, best kept: under a
 * shared machine's load each configuration gets several chances at a quiet
 * moment.
 */
static void bench_kernel_selection(void)
{
    const char *cand[8];
    int nc = dt__blas_candidates(cand, 8), rounds = quick ? 1 : 3;
    double autos[2][3] = {{0}}, def[2][3] = {{0}}, forced[8][2][3], tmp[2][3];
    char auto_core[64] = "?", def_core[64] = "?", core[64];
    memset(forced, 0, sizeof(forced));
    for (int r = 0; r < rounds; r++) {
        memset(tmp, 0, sizeof(tmp));
        if (run_child("", tmp, auto_core, sizeof(auto_core)) == 0)
            keep_best(autos, tmp);
        else
            fprintf(stderr, "kernel_bench: auto-selection child failed\n");
        memset(tmp, 0, sizeof(tmp));
        if (run_child("-u OPENBLAS_CORETYPE DT_BLAS_AUTOSELECT=0", tmp, def_core,
                      sizeof(def_core)) == 0)
            keep_best(def, tmp);
        else
            fprintf(stderr, "kernel_bench: default-kernel child failed\n");
        for (int c = 0; c < nc; c++) {
            char env[96];
            snprintf(env, sizeof(env), "OPENBLAS_CORETYPE=%s", cand[c]);
            memset(tmp, 0, sizeof(tmp));
            if (run_child(env, tmp, core, sizeof(core)) == 0)
                keep_best(forced[c], tmp);
            else
                fprintf(stderr, "kernel_bench: child with %s failed\n", env);
        }
    }
    printf("\n## 3. OpenBLAS kernel: dtensor auto-selected vs library default vs each candidate"
           " forced (GF/s, best of %d rounds of child processes; ratio = auto / best)\n",
           rounds);
    printf("%-6s %-8s %10s %10s", "N", "threads", "auto", "default");
    for (int c = 0; c < nc; c++)
        printf(" %12s", cand[c]);
    printf(" %8s\n", "ratio");
    printf("%-6s %-8s %10s %10s", "", "", auto_core, def_core);
    for (int c = 0; c < nc; c++)
        printf(" %12s", "(forced)");
    printf("\n");
    for (int th = 1; th <= 2; th++)
        for (int i = 0; i < 3; i++) {
            double best = def[th - 1][i];
            printf("%-6lld %-8d %10.1f %10.1f", (long long)sizes[i], th, autos[th - 1][i],
                   def[th - 1][i]);
            for (int c = 0; c < nc; c++) {
                printf(" %12.1f", forced[c][th - 1][i]);
                best = forced[c][th - 1][i] > best ? forced[c][th - 1][i] : best;
            }
            printf(" %8.3f\n", best > 0 ? autos[th - 1][i] / best : 0.0);
        }
}

/* ---------------------------------------------------------------- bandwidth */

typedef enum { EW_LAYER_NORM, EW_SOFTMAX, EW_GELU, EW_GELU_BWD, EW_ADD, EW_COUNT } ew_kind;
static const char *ew_names[EW_COUNT] = {"layer_norm", "softmax", "gelu_tanh", "gelu_bwd", "add"};

/* w, b: LayerNorm's weight and bias; the second operand of gelu_bwd and add: b */
static void run_ew(ew_kind k, dt_tensor *x, dt_tensor *y, dt_tensor *w, dt_tensor *b)
{
    const dt_kernel_ops *ops = dt__kernels_for(dt_device_cpu());
    switch (k) {
    case EW_LAYER_NORM:
        die_on(ops->layer_norm(x, w, b, 1e-5f, y, NULL, NULL));
        break;
    case EW_SOFTMAX:
        die_on(ops->softmax(x, 1.0f, false, false, y));
        break;
    case EW_GELU:
        die_on(ops->unary(DT_UNARY_GELU_TANH, x, 0.0f, y));
        break;
    case EW_GELU_BWD:
        die_on(ops->unary_backward(DT_UNARY_GELU_TANH, x, b, y));
        break;
    case EW_ADD:
        die_on(ops->binary(DT_BINARY_ADD, x, b, y));
        break;
    case EW_COUNT:
        break;
    }
}

static void bench_bandwidth(void)
{
    const int64_t rows = quick ? 2048 : 8192, cols = 1024; /* 32 MiB per tensor */
    int64_t s[2] = {rows, cols}, ps[1] = {cols};
    dt_tensor *x = rand_tensor(2, s), *y = rand_tensor(2, s);
    dt_tensor *w = rand_tensor(1, ps), *b = rand_tensor(1, ps);
    size_t bytes = (size_t)(rows * cols) * sizeof(float);
    use_clock_for(1);
    printf("\n## 2. row/element-wise kernels vs memcpy of the same bytes ([%lld, %lld] f32, "
           "GB/s = (read + written) / time)\n",
           (long long)rows, (long long)cols);
    printf("%-12s %12s %12s %8s\n", "kernel", "kernel GB/s", "memcpy GB/s", "ratio");
    for (int k = 0; k < 3; k++) {
        double bk = 1e30, bm = 1e30;
        run_ew(k, x, y, w, b);
        for (int r = 0; r < (quick ? 3 : 8); r++) {
            double t = now_s();
            run_ew(k, x, y, w, b);
            double tk = now_s() - t;
            t = now_s();
            memcpy(dt_tensor_data(y), dt_tensor_data(x), bytes);
            double tm = now_s() - t;
            bk = tk < bk ? tk : bk;
            bm = tm < bm ? tm : bm;
        }
        printf("%-12s %12.2f %12.2f %8.3f\n", ew_names[k], 2.0 * (double)bytes / bk / 1e9,
               2.0 * (double)bytes / bm / 1e9, bm / bk);
    }
    dt_tensor_release(x);
    dt_tensor_release(y);
    dt_tensor_release(w);
    dt_tensor_release(b);
}

static dt_tensor *bf16_tensor(int ndim, const int64_t *shape)
{
    dt_tensor *f = rand_tensor(ndim, shape), *h = NULL;
    die_on(dt_tensor_empty(ndim, shape, DT_DTYPE_BF16, dt_device_cpu(), &h));
    die_on(dt__kernels_for(dt_device_cpu())->copy(h, f));
    dt_tensor_release(f);
    return h;
}

/* bf16 operands read natively vs through f32 copies of whole tensors
 * (bf16_widen.c, dt__cpu_half_native off), interleaved, best of R. */
static void bench_bf16(void)
{
    const int64_t rows = quick ? 1024 : 4096, cols = 1024; /* 8 MiB per bf16 tensor */
    int64_t s[2] = {rows, cols}, ps[1] = {cols};
    dt_tensor *x = bf16_tensor(2, s), *y = bf16_tensor(2, s), *g = bf16_tensor(2, s);
    dt_tensor *w = bf16_tensor(1, ps), *b = bf16_tensor(1, ps);
    use_clock_for(1);
    printf("\n## 2b. bf16 operands ([%lld, %lld] bf16): native vs through f32 copies\n",
           (long long)rows, (long long)cols);
    printf("%-12s %12s %12s %8s\n", "kernel", "native ms", "f32-copy ms", "speedup");
    for (int k = 0; k < EW_COUNT; k++) {
        bool rowwise = k == EW_LAYER_NORM || k == EW_SOFTMAX;
        double best[2] = {1e30, 1e30};
        for (int r = 0; r < (quick ? 3 : 8) + 1; r++)
            for (int native = 0; native < 2; native++) {
                dt__cpu_half_native = native;
                double t = now_s();
                run_ew(k, x, y, w, rowwise ? b : g);
                t = now_s() - t;
                if (r > 0 && t < best[native]) /* round 0 warms up */
                    best[native] = t;
            }
        printf("%-12s %12.2f %12.2f %8.2fx\n", ew_names[k], 1e3 * best[1], 1e3 * best[0],
               best[0] / best[1]);
    }
    dt__cpu_half_native = true;
    dt_tensor *objs[] = {x, y, g, w, b};
    for (int i = 0; i < 5; i++)
        dt_tensor_release(objs[i]);
}

int main(int argc, char **argv)
{
    bool child = false, bf16_only = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[i], "--bf16") == 0)
            bf16_only = true;
        else if (strcmp(argv[i], "--gemm-child") == 0)
            child = true;
    }
    if (child)
        return gemm_child();
    if (bf16_only) {
        bench_bf16();
        return 0;
    }
    const dt__blas *blas = NULL;
    die_on(dt__blas_get(&blas));
    dt_runtime_info info;
    die_on(dt_runtime_info_get(&info));
    printf("# kernel_bench: %s %s, kernel %s (%s), cpu [%s]\n", info.blas_library,
           info.blas_version, info.blas_kernel, blas->how, info.cpu_features);
    bench_gemm_vs_direct(blas);
    bench_bandwidth();
    bench_bf16();
    bench_kernel_selection();
    return 0;
}
