/*
 * gemm_bench: f32 matmul GFLOP/s of dtensor's GEMM (kernel table, oneDNN
 * engine), and of its bf16 GEMM (bf16 inputs, f32 accumulation and output),
 * against OpenBLAS as this environment loads it and OpenBLAS with
 * its best kernel forced (OPENBLAS_CORETYPE=SkylakeX, set only for a child
 * process: the kernel is chosen when the library loads), 1 and 2 threads,
 * square N = 512..4096 and the shapes of the GPT-small training step.
 * Best of 5 per engine and shape, oneDNN first, then OpenBLAS (its idle
 * workers poll for ~0.1 s after a call and would slow a 2-thread oneDNN call
 * that follows at once: interleaving the two halves oneDNN's speed); one
 * thread is timed in thread CPU time (time descheduled by the machine's other
 * load does not count), two threads in wall time.
 *
 *   gemm_bench [--quick] [--core SkylakeX]   the table
 *   dtrun -n 2 gemm_bench --latency          8 B all-reduce latency right
 *                                            after GEMMs (run.sh: per engine)
 * (--blas-child is internal.)
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dtensor.h"
#include "kernels/cpu/blas.h"
#include "kernels/kernel_ops.h"

#define REPS 5

typedef struct shape {
    const char *name;
    int64_t batch, m, n, k;
    bool ta, tb;
} shape;

/* GPT small (examples/train_gpt, bench/gpt_step): batch 8 x seq 256 = 2048
 * tokens, dim 512, ffn 2048, vocab 4096, 8 heads of 64. */
static const shape shapes[] = {
    {"square 512", 1, 512, 512, 512, false, false},
    {"square 1024", 1, 1024, 1024, 1024, false, false},
    {"square 2048", 1, 2048, 2048, 2048, false, false},
    {"square 4096", 1, 4096, 4096, 4096, false, false},
    {"gpt attn proj x W^T", 1, 2048, 512, 512, false, true},
    {"gpt ffn up x W^T", 1, 2048, 2048, 512, false, true},
    {"gpt ffn down x W^T", 1, 2048, 512, 2048, false, true},
    {"gpt head x W^T", 1, 2048, 4096, 512, false, true},
    {"gpt head dX = dY W", 1, 2048, 512, 4096, false, false},
    {"gpt head dW = dY^T X", 1, 4096, 512, 2048, true, false},
    {"gpt attn Q K^T, 64 x", 64, 256, 256, 64, false, true},
    {"gpt attn P V, 64 x", 64, 256, 64, 256, false, false},
};
enum { NSHAPES = sizeof(shapes) / sizeof(shapes[0]) };

static bool quick;
static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now(void)
{
    struct timespec t;
    clock_gettime(bench_clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die_on(dt_status s, const char *what)
{
    if (s != DT_OK) {
        fprintf(stderr, "gemm_bench: %s: %s\n", what, dt_last_error());
        exit(1);
    }
}

static bool skipped(const shape *s)
{
    return quick && s->m * s->n * s->k > (int64_t)2048 * 2048 * 2048;
}

typedef struct operands {
    dt_tensor *a, *b, *c;
    dt_tensor *a16, *b16; /* a and b rounded to bf16 */
} operands;

static dt_tensor *rand_tensor(int64_t batch, int64_t rows, int64_t cols)
{
    int64_t sh[3] = {batch, rows, cols};
    dt_tensor *t = NULL;
    die_on(dt_tensor_empty(batch > 1 ? 3 : 2, batch > 1 ? sh : sh + 1, DT_DTYPE_F32,
                           dt_device_cpu(), &t),
           "alloc");
    die_on(dt_tensor_fill_uniform(t, -1.0, 1.0, 7, NULL, NULL), "fill");
    return t;
}

static dt_tensor *to_bf16(const dt_tensor *t)
{
    dt_tensor *h = NULL;
    die_on(
        dt_tensor_empty(dt_tensor_ndim(t), dt_tensor_shape(t), DT_DTYPE_BF16, dt_device_cpu(), &h),
        "alloc");
    die_on(dt__kernels_for(dt_device_cpu())->copy(h, t), "to bf16");
    return h;
}

static operands operands_new(const shape *s)
{
    operands o = {rand_tensor(s->batch, s->ta ? s->k : s->m, s->ta ? s->m : s->k),
                  rand_tensor(s->batch, s->tb ? s->n : s->k, s->tb ? s->k : s->n),
                  rand_tensor(s->batch, s->m, s->n), NULL, NULL};
    o.a16 = to_bf16(o.a);
    o.b16 = to_bf16(o.b);
    return o;
}

static void operands_free(operands *o)
{
    dt_tensor_release(o->a);
    dt_tensor_release(o->b);
    dt_tensor_release(o->c);
    dt_tensor_release(o->a16);
    dt_tensor_release(o->b16);
}

static double time_dtensor(const shape *s, const operands *o, bool bf16)
{
    const dt_kernel_ops *k = dt__kernels_for(dt_device_cpu());
    double t = now();
    die_on(k->gemm(bf16 ? o->a16 : o->a, bf16 ? o->b16 : o->b, s->ta, s->tb, 1.0f, 0.0f, o->c),
           "dtensor gemm");
    return now() - t;
}

/* Best of REPS after a warm-up (which creates oneDNN's primitive). */
static double best_dtensor(const shape *s, const operands *o, bool bf16)
{
    double best = time_dtensor(s, o, bf16);
    for (int r = 0; r < REPS; r++) {
        double t = time_dtensor(s, o, bf16);
        best = t < best ? t : best;
    }
    return best;
}

/* cblas_sgemm straight into the loaded OpenBLAS, a loop over the batch. */
static double time_blas(const dt__blas *blas, const shape *s, const operands *o)
{
    const float *a = dt_tensor_data(o->a), *b = dt_tensor_data(o->b);
    float *c = dt_tensor_data(o->c);
    int lda = (int)(s->ta ? s->m : s->k), ldb = (int)(s->tb ? s->k : s->n);
    double t = now();
    for (int64_t i = 0; i < s->batch; i++)
        blas->sgemm(DT_CBLAS_ROW_MAJOR, s->ta ? DT_CBLAS_TRANS : DT_CBLAS_NO_TRANS,
                    s->tb ? DT_CBLAS_TRANS : DT_CBLAS_NO_TRANS, (int)s->m, (int)s->n, (int)s->k,
                    1.0f, a + i * s->m * s->k, lda, b + i * s->k * s->n, ldb, 0.0f,
                    c + i * s->m * s->n, (int)s->n);
    return now() - t;
}

static double gflops(const shape *s, double t)
{
    return 2.0 * (double)(s->batch * s->m * s->n * s->k) / t / 1e9;
}

static void set_threads(int threads)
{
    dt__kernels_set_num_threads(threads);
    bench_clock = threads == 1 ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
}

/* Child: OpenBLAS alone (forced kernel from the environment), "index gflops" lines. */
static int blas_child(int threads)
{
    const dt__blas *blas = NULL;
    die_on(dt__blas_get(&blas), "OpenBLAS");
    set_threads(threads);
    printf("kernel %s\n", blas->get_corename());
    for (int i = 0; i < NSHAPES; i++) {
        if (skipped(&shapes[i]))
            continue;
        operands o = operands_new(&shapes[i]);
        double best = time_blas(blas, &shapes[i], &o); /* warm-up */
        for (int r = 0; r < REPS; r++) {
            double t = time_blas(blas, &shapes[i], &o);
            best = t < best ? t : best;
        }
        printf("%d %.2f\n", i, gflops(&shapes[i], best));
        operands_free(&o);
    }
    return 0;
}

/* The forced-kernel column from a child with OPENBLAS_CORETYPE=@p core for it alone. */
static void run_blas_child(const char *core, int threads, double *gf, char *kernel, size_t klen)
{
    char exe[1024], cmd[1400], line[256];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        fprintf(stderr, "gemm_bench: cannot find my own executable\n");
        exit(1);
    }
    exe[n] = '\0';
    snprintf(cmd, sizeof(cmd), "OPENBLAS_CORETYPE=%s DT_GEMM=openblas '%s' --blas-child %d%s", core,
             exe, threads, quick ? " --quick" : "");
    FILE *p = popen(cmd, "r");
    if (p == NULL) {
        perror("popen");
        exit(1);
    }
    int i = 0;
    double g = 0;
    while (fgets(line, sizeof(line), p) != NULL) {
        if (strncmp(line, "kernel ", 7) == 0)
            snprintf(kernel, klen, "%.*s", (int)strcspn(line + 7, "\n"), line + 7);
        else if (sscanf(line, "%d %lf", &i, &g) == 2 && i >= 0 && i < NSHAPES)
            gf[i] = g;
    }
    if (pclose(p) != 0)
        fprintf(stderr, "gemm_bench: the %s child failed\n", core);
}

static void print_row(const shape *s, int threads, double dnn, double blas, double forced,
                      double dnn16)
{
    double best_blas = blas > forced ? blas : forced;
    double best_f32 = dnn > best_blas ? dnn : best_blas;
    char label[96];
    snprintf(label, sizeof(label), "%s %lldx%lldx%lld", s->name, (long long)s->m, (long long)s->n,
             (long long)s->k);
    printf("| %-38s | %2d | %8.1f | %8.1f | %8.1f | %5.2fx | %7.2fx | %8.1f | %7.2fx |\n", label,
           threads, dnn, blas, forced, dnn / blas, best_blas > 0 ? dnn / best_blas : 0.0, dnn16,
           dnn16 / best_f32);
}

static int table(const char *core)
{
    dt_runtime_info info;
    die_on(dt_runtime_info_get(&info), "runtime info");
    const dt__blas *blas = NULL;
    die_on(dt__blas_get(&blas), "OpenBLAS");
    printf("dtensor GEMM: %s %s, kernel %s, bf16 kernel %s (%s); OpenBLAS %s as loaded: kernel "
           "%s (%s)\n",
           info.gemm_library, info.gemm_version, info.gemm_kernel, info.gemm_kernel_bf16,
           info.gemm_detail, info.blas_version, info.blas_kernel, blas->how);
    printf("CPU: %s; best of %d, GFLOP/s\n\n", info.cpu_features, REPS);
    for (int threads = 1; threads <= 2; threads++) {
        double forced[NSHAPES] = {0};
        char kernel[64] = "?";
        run_blas_child(core, threads, forced, kernel, sizeof(kernel));
        set_threads(threads);
        char title[32];
        snprintf(title, sizeof(title), "shape M x N x K, %d thread%s", threads,
                 threads > 1 ? "s" : "");
        printf("| %-38s | th | dtensor  | OpenBLAS | OpenBLAS | dt/as  | dt/best  | dtensor  | "
               "bf16 /   |\n",
               title);
        printf("| %-38s |    | oneDNN   | %-8.8s | %-8.8s | loaded | OpenBLAS | bf16     | best "
               "f32 |\n",
               "", info.blas_kernel, kernel);
        printf("|%.40s|----|----------|----------|----------|--------|----------|----------|------"
               "----|\n",
               "----------------------------------------");
        for (int i = 0; i < NSHAPES; i++) {
            const shape *s = &shapes[i];
            if (skipped(s))
                continue;
            operands o = operands_new(s);
            /* one engine after the other: OpenBLAS's idle workers poll ~0.1 s after
             * a call and would take oneDNN's second core; let them stop first */
            usleep(200000);
            double td = best_dtensor(s, &o, false), td16 = best_dtensor(s, &o, true);
            double tb = time_blas(blas, s, &o);
            for (int r = 0; r < REPS; r++) {
                double t = time_blas(blas, s, &o);
                tb = t < tb ? t : tb;
            }
            print_row(s, threads, gflops(s, td), gflops(s, tb), forced[i], gflops(s, td16));
            operands_free(&o);
        }
        printf("\n");
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/*
 * 8 B all-reduce latency in the 0.1 s after a GEMM, when idle compute
 * threads that spin would still be spinning: 20 rounds of one 512^3 GEMM then
 * 100 timed all-reduces. Rank 0 prints median, mean and the mean of the
 * first 10 after each GEMM, in microseconds.
 */
static int latency(void)
{
    dt_runtime *rt = NULL;
    die_on(dt_init(NULL, &rt), "dt_init");
    dt_comm *w = dt_runtime_world(rt);
    shape s = {"latency", 1, 512, 512, 512, false, false};
    operands o = operands_new(&s);
    enum { ROUNDS = 20, OPS = 100 };
    static double lat[ROUNDS * OPS];
    double first = 0.0, sum = 0.0;
    float x[2] = {1.0f, 2.0f}, y[2] = {0}, pad[2] = {0};
    for (int r = 0; r < ROUNDS; r++) {
        time_dtensor(&s, &o, false);
        die_on(dt_comm_allreduce(w, x, pad, 1, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL), "sync");
        for (int i = 0; i < OPS; i++) {
            double t = now();
            die_on(dt_comm_allreduce(w, x, y, 2, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL),
                   "all-reduce");
            double us = 1e6 * (now() - t);
            lat[r * OPS + i] = us;
            sum += us;
            first += i < 10 ? us : 0.0;
        }
    }
    dt_runtime_info info;
    die_on(dt_runtime_info_get(&info), "runtime info");
    qsort(lat, ROUNDS * OPS, sizeof(double), cmp_double);
    if (dt_comm_rank(w) == 0)
        printf("latency engine=%s threads=%d: median %.2f us, mean %.2f us, first 10 after a "
               "GEMM %.2f us (%s)\n",
               info.gemm_engine, info.gemm_threads, lat[ROUNDS * OPS / 2], sum / (ROUNDS * OPS),
               first / (ROUNDS * 10), info.gemm_detail);
    operands_free(&o);
    dt_runtime_destroy(rt);
    return 0;
}

int main(int argc, char **argv)
{
    const char *core = "SkylakeX";
    int child_threads = 0;
    bool lat = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = true;
        else if (strcmp(argv[i], "--latency") == 0)
            lat = true;
        else if (strcmp(argv[i], "--core") == 0 && i + 1 < argc)
            core = argv[++i];
        else if (strcmp(argv[i], "--blas-child") == 0 && i + 1 < argc)
            child_threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--quick] [--core CORE] | --latency\n", argv[0]);
            return 2;
        }
    }
    if (child_threads > 0)
        return blas_child(child_threads);
    if (lat)
        return latency();
    setenv("DT_GEMM", "onednn", 1); /* the dtensor column is oneDNN's, or an error */
    return table(core);
}
