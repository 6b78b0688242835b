/*
 * bench_redistribute: each redistribute transition side by side with the bare
 * collective it runs, in the same process and run, on the same bytes:
 *   S(0)->R  vs all-gather,     P->R    vs all-reduce,
 *   P->S(0)  vs reduce-scatter, S(0)->S(1) vs all-to-all,
 * reporting time and bus bandwidth (nccl-tests convention) and the ratio
 * (iterations of the two alternate; median of the slowest rank's times).
 * Then the per-op cost of the distributed layer on small tensors: wrapping a
 * shard (dt_from_local with a shape), a no-op redistribute (plan cache hit),
 * next to a 64x64 matmul on the local kernel.
 *
 *   dtrun -n 4 build/bench/redistribute/bench_redistribute [--mib 64] [--iters 5]
 *                                                          [--only S(0)->S(1)] [--best] [--cpu]
 *
 * --best reports the fastest iteration instead of the median: on a shared,
 * loaded machine the best of many is what the code costs. --cpu adds each
 * rank's mean process CPU time per call of both: on a loaded machine it
 * shows what the copies cost and whether one rank works more than another
 * (the slowest sets the pace), where wall times mostly show the load.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dtensor.h"

#define CHECK(call)                                                                                \
    do {                                                                                           \
        dt_status s_ = (call);                                                                     \
        if (s_ != DT_OK) {                                                                         \
            fprintf(stderr, "bench: %s: %s\n", dt_status_str(s_), dt_last_error());                \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The slowest rank's time of each iteration; the median (or the best) over iterations. */
static double median_max(dt_comm *w, double *t, int iters, bool best)
{
    CHECK(dt_comm_allreduce(w, t, t, (size_t)iters, DT_DTYPE_F64, DT_REDUCE_OP_MAX, NULL));
    qsort(t, (size_t)iters, sizeof(double), cmp_double);
    return t[best ? 0 : iters / 2];
}

typedef struct bench {
    dt_runtime *rt;
    dt_mesh *mesh;
    int n, rank, iters;
    bool best;          /* the fastest iteration, not the median */
    bool cpu;           /* print each rank's mean CPU time per call */
    double cpu_s;       /* CPU seconds of the timed calls, summed by the caller */
    const char *only;   /* "FROM->TO": just that transition, no overhead table */
    int64_t rows, cols; /* global [rows, cols] f32 */
} bench;

enum { K_GATHER, K_REDUCE, K_SCATTER, K_A2A };

/* One timed call of the bare collective moving the same bytes as the transition. */
static double time_bare(bench *b, int kind, float *in, float *out)
{
    dt_comm *c = dt_mesh_dim_comm(b->mesh, 0);
    size_t total = (size_t)(b->rows * b->cols), part = total / (size_t)b->n;
    CHECK(dt_comm_barrier(dt_runtime_world(b->rt), NULL));
    double t0 = now(), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    switch (kind) {
    case K_GATHER:
        CHECK(dt_comm_allgather(c, in, out, part, DT_DTYPE_F32, NULL));
        break;
    case K_REDUCE:
        CHECK(dt_comm_allreduce(c, in, out, total, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL));
        break;
    case K_SCATTER:
        CHECK(dt_comm_reduce_scatter(c, in, out, part, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL));
        break;
    case K_A2A:
        CHECK(dt_comm_alltoall(c, in, out, part / (size_t)b->n, DT_DTYPE_F32, NULL));
        break;
    }
    b->cpu_s = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    return now() - t0;
}

/* One timed dt_redistribute of @p d to @p pt (the result is dropped). */
static double time_redist(bench *b, dt_tensor *d, dt_placement pt)
{
    dt_tensor *y = NULL;
    CHECK(dt_comm_barrier(dt_runtime_world(b->rt), NULL));
    double t0 = now(), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    CHECK(dt_redistribute(d, 1, &pt, &y));
    double t = now() - t0;
    b->cpu_s = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    dt_tensor_release(y);
    return t;
}

/* A buffer for the bare collective from the library's own allocator, as the
 * tensors redistribute moves (a heap buffer measured up to 20% slower). */
static float *lib_buffer(size_t n, dt_tensor **owner)
{
    int64_t len = (int64_t)n;
    CHECK(dt_tensor_empty(1, &len, DT_DTYPE_F32, dt_device_cpu(), owner));
    return dt_tensor_data(*owner);
}

/* Bare and redistribute alternate, iteration by iteration, so a machine
 * whose load changes during the run treats both alike. */
static void run_pair(bench *b, int kind, const char *from, const char *to, double *t_bare,
                     double *t_redist)
{
    size_t total = (size_t)(b->rows * b->cols);
    dt_tensor *in_t = NULL, *out_t = NULL;
    float *in = lib_buffer(total, &in_t), *out = lib_buffer(total, &out_t);
    /* touch every page: an untouched calloc'ed page reads as the kernel's one
     * shared zero page, which a cross-process copy reads from cache */
    for (size_t i = 0; i < total; i++)
        in[i] = out[i] = (float)(i & 1023);
    double *tb = calloc((size_t)b->iters, sizeof(double));
    double *tr = calloc((size_t)b->iters, sizeof(double));
    dt_placement pf, pt;
    CHECK(dt_placement_parse(from, &pf));
    CHECK(dt_placement_parse(to, &pt));
    int64_t shape[2] = {b->rows, b->cols};
    dt_tensor *x = NULL, *d = NULL;
    CHECK(dt_tensor_zeros(2, shape, DT_DTYPE_F32, dt_device_cpu(), &x));
    CHECK(dt_distribute(x, b->mesh, 1, &pf, &d));
    dt_tensor_release(x);
    time_bare(b, kind, in, out); /* warm-up: pages, connections, plan cache */
    time_redist(b, d, pt);
    double cpu_bare = 0, cpu_redist = 0;
    for (int it = 0; it < b->iters; it++) {
        tb[it] = time_bare(b, kind, in, out);
        cpu_bare += b->cpu_s;
        tr[it] = time_redist(b, d, pt);
        cpu_redist += b->cpu_s;
    }
    if (b->cpu)
        printf("    rank %d: mean CPU per call %s->%s %.2f ms, bare %.2f ms\n", b->rank, from, to,
               cpu_redist / b->iters * 1e3, cpu_bare / b->iters * 1e3);
    fflush(stdout);
    *t_bare = median_max(dt_runtime_world(b->rt), tb, b->iters, b->best);
    *t_redist = median_max(dt_runtime_world(b->rt), tr, b->iters, b->best);
    dt_tensor_release(d);
    dt_tensor_release(in_t);
    dt_tensor_release(out_t);
    free(tb);
    free(tr);
}

/* Bus bandwidth in GB/s of moving S bytes with the given collective. */
static double busbw(int kind, double bytes, int n, double t)
{
    double f = kind == K_REDUCE ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
    if (kind == K_A2A)
        bytes /= n; /* nccl-tests: per-rank buffer */
    return bytes * f / t / 1e9;
}

static void bench_collectives(bench *b)
{
    static const struct {
        const char *from, *to, *name;
        int kind;
    } cases[] = {
        {"S(0)", "R", "all-gather", K_GATHER},
        {"P(sum)", "R", "all-reduce", K_REDUCE},
        {"P(sum)", "S(0)", "reduce-scatter", K_SCATTER},
        {"S(0)", "S(1)", "all-to-all", K_A2A},
    };
    double bytes = (double)(b->rows * b->cols) * 4.0;
    if (b->rank == 0)
        printf("%d ranks, tensor [%lld, %lld] f32 = %.0f MiB, %s of %d (slowest rank)\n", b->n,
               (long long)b->rows, (long long)b->cols, bytes / 1048576.0,
               b->best ? "best" : "median", b->iters);
    fflush(stdout); /* before the ranks' --cpu lines */
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        double tb, tr;
        char name[32];
        snprintf(name, sizeof(name), "%s->%s", cases[i].from, cases[i].to);
        if (b->only != NULL && strcmp(b->only, name) != 0)
            continue;
        run_pair(b, cases[i].kind, cases[i].from, cases[i].to, &tb, &tr);
        if (b->rank == 0)
            printf(
                "  %-6s -> %-5s %8.2f ms %6.2f GB/s | bare %-14s %8.2f ms %6.2f GB/s | %5.1f%%\n",
                cases[i].from, cases[i].to, tr * 1e3, busbw(cases[i].kind, bytes, b->n, tr),
                cases[i].name, tb * 1e3, busbw(cases[i].kind, bytes, b->n, tb), 100.0 * tb / tr);
    }
}

/* Microseconds per call of the distributed layer's bookkeeping on a 64x64. */
static void bench_overhead(bench *b)
{
    int64_t s[2] = {64, 64};
    dt_tensor *x = NULL, *w = NULL, *y = NULL, *d = NULL, *e = NULL;
    CHECK(dt_tensor_ones(2, s, DT_DTYPE_F32, dt_device_cpu(), &x));
    CHECK(dt_tensor_ones(2, s, DT_DTYPE_F32, dt_device_cpu(), &w));
    dt_placement r = dt_replicate();
    int64_t gs[2] = {64, 64};
    const int reps = 20000;
    double t0 = now();
    for (int i = 0; i < reps; i++) {
        CHECK(dt_matmul(x, w, false, false, &y));
        dt_tensor_release(y);
    }
    double t_mm = (now() - t0) / reps;
    t0 = now();
    for (int i = 0; i < reps; i++) {
        CHECK(dt_from_local(x, b->mesh, 1, &r, gs, &d));
        dt_tensor_release(d);
    }
    double t_wrap = (now() - t0) / reps;
    CHECK(dt_from_local(x, b->mesh, 1, &r, gs, &d));
    t0 = now();
    for (int i = 0; i < reps; i++) {
        CHECK(dt_redistribute(d, 1, &r, &e));
        dt_tensor_release(e);
    }
    double t_noop = (now() - t0) / reps;
    dt_placement s0 = dt_shard(0);
    t0 = now();
    for (int i = 0; i < reps / 10; i++) { /* R -> S(0): plan cache hit + a local slice */
        CHECK(dt_redistribute(d, 1, &s0, &e));
        dt_tensor_release(e);
    }
    double t_slice = (now() - t0) / (reps / 10);
    if (b->rank == 0)
        printf("per op (rank 0): 64x64 matmul %.2f us; from_local wrap %.3f us; no-op "
               "redistribute %.3f us; R->S(0) local slice %.2f us\n",
               t_mm * 1e6, t_wrap * 1e6, t_noop * 1e6, t_slice * 1e6);
    /* the same matmul on distributed inputs (Replicate x Replicate: no
     * communication), when the sharding rules are there */
    dt_tensor *dw = NULL;
    CHECK(dt_from_local(w, b->mesh, 1, &r, gs, &dw));
    dt_status st = dt_matmul(d, dw, false, false, &y);
    if (st == DT_OK) {
        dt_tensor_release(y);
        t0 = now();
        for (int i = 0; i < reps; i++) {
            CHECK(dt_matmul(d, dw, false, false, &y));
            dt_tensor_release(y);
        }
        double t_dmm = (now() - t0) / reps;
        if (b->rank == 0)
            printf("distributed 64x64 matmul (R x R) %.2f us: %.2f us over the local kernel\n",
                   t_dmm * 1e6, (t_dmm - t_mm) * 1e6);
    } else if (b->rank == 0) {
        printf("distributed matmul: not measured (%s)\n", dt_last_error());
    }
    dt_tensor_release(dw);
    dt_tensor_release(d);
    dt_tensor_release(x);
    dt_tensor_release(w);
}

int main(int argc, char **argv)
{
    bench b;
    memset(&b, 0, sizeof(b));
    double mib = 64;
    b.iters = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--best") == 0)
            b.best = true;
        else if (strcmp(argv[i], "--cpu") == 0)
            b.cpu = true;
        else if (i + 1 == argc)
            break;
        else if (strcmp(argv[i], "--mib") == 0)
            mib = atof(argv[++i]);
        else if (strcmp(argv[i], "--iters") == 0)
            b.iters = atoi(argv[++i]);
        else if (strcmp(argv[i], "--only") == 0)
            b.only = argv[++i];
    }
    CHECK(dt_init(NULL, &b.rt));
    b.n = dt_runtime_size(b.rt);
    b.rank = dt_runtime_rank(b.rt);
    CHECK(dt_mesh_create(b.rt, 1, &b.n, NULL, &b.mesh));
    /* a square-ish f32 tensor of `mib` MiB, both dims divisible by n*n */
    int64_t elems = (int64_t)(mib * 1048576.0 / 4.0), q = (int64_t)b.n * b.n;
    b.cols = 1024 / q * q;
    b.rows = (elems / b.cols) / q * q;
    if (b.rows < q)
        b.rows = q;
    bench_collectives(&b);
    if (b.only == NULL)
        bench_overhead(&b);
    dt_mesh_release(b.mesh);
    dt_runtime_destroy(b.rt);
    return 0;
}
