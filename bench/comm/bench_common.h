/*
 * Shared by comm_bench (dtensor) and comm_bench_mpi (Open MPI): the size
 * sweep, iteration counts, and the nccl-tests style output, so the tables
 * of the two programs line up column for column.
 *
 * Sizes follow nccl-tests: "size" is the bytes of the largest buffer of one
 * rank (all-reduce: the buffer; all-gather: the gathered output; reduce-
 * scatter: the input; all-to-all: each of send and recv; broadcast: the
 * buffer), "count" its elements. busbw = algbw * factor with nccl-tests'
 * factors: all-reduce 2(n-1)/n, all-gather/reduce-scatter/all-to-all (n-1)/n,
 * broadcast 1.
 */
#ifndef DT_BENCH_COMM_COMMON_H
#define DT_BENCH_COMM_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum {
    B_ALLREDUCE,
    B_ALLGATHER,
    B_REDUCE_SCATTER,
    B_ALLTOALL,
    B_BROADCAST,
    B_NCOLL
} b_coll;

static const char *const b_coll_names[B_NCOLL] = {"allreduce", "allgather", "reduce_scatter",
                                                  "alltoall", "broadcast"};

typedef struct b_opts {
    size_t min_bytes, max_bytes;
    int factor;
    int iters; /* 0 = automatic */
    int warmup;
    int side; /* -x N: side-by-side mode, N interleaved batches (0: off) */
    bool run[B_NCOLL];
} b_opts;

static double b_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t b_parse_size(const char *s)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (end && (*end == 'K' || *end == 'k'))
        v *= 1024;
    else if (end && (*end == 'M' || *end == 'm'))
        v *= 1024 * 1024;
    else if (end && (*end == 'G' || *end == 'g'))
        v *= 1024.0 * 1024 * 1024;
    return (size_t)v;
}

/* -b min -e max -f factor -n iters -w warmup -x batches -c allreduce,allgather,... */
static int b_parse(int argc, char **argv, b_opts *o)
{
    *o = (b_opts){.min_bytes = 8, .max_bytes = 64u << 20, .factor = 2, .warmup = 3};
    bool any = false;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "-b") == 0)
            o->min_bytes = b_parse_size(argv[i + 1]);
        else if (strcmp(argv[i], "-e") == 0)
            o->max_bytes = b_parse_size(argv[i + 1]);
        else if (strcmp(argv[i], "-f") == 0)
            o->factor = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "-n") == 0)
            o->iters = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "-w") == 0)
            o->warmup = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "-x") == 0)
            o->side = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "-c") == 0) {
            any = true;
            for (int c = 0; c < B_NCOLL; c++)
                o->run[c] = strstr(argv[i + 1], b_coll_names[c]) != NULL;
        } else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return -1;
        }
    }
    if (!any)
        for (int c = 0; c < B_NCOLL; c++)
            o->run[c] = true;
    if (o->factor < 2)
        o->factor = 2;
    if (o->min_bytes < 4)
        o->min_bytes = 4;
    return 0;
}

/* Enough iterations for ~0.1 s of a link at a few GB/s, within [5, 10000]:
 * at 1000 a tiny row lasted 0.4 ms, and one context switch on a loaded host
 * doubled its mean (measured 0.87 against 0.35 us for the same binary). */
static int b_iters(const b_opts *o, size_t bytes)
{
    if (o->iters > 0)
        return o->iters;
    size_t it = (size_t)(256u << 20) / (bytes + 1);
    return it < 5 ? 5 : (it > 10000 ? 10000 : (int)it);
}

/* Warm-up iterations: -w, and at least a tenth of the timed ones (start-up
 * transients of a loaded machine then stay out of the timing). */
static int b_warmup(const b_opts *o, int iters)
{
    return iters / 10 > o->warmup ? iters / 10 : o->warmup;
}

static double b_busbw_factor(b_coll c, int n)
{
    switch (c) {
    case B_ALLREDUCE:
        return 2.0 * (n - 1) / n;
    case B_BROADCAST:
        return 1.0;
    default:
        return (double)(n - 1) / n;
    }
}

static void b_header(const char *who, b_coll c, int nranks)
{
    printf("# %s %s, %d ranks\n", who, b_coll_names[c], nranks);
    printf("#%12s %12s %8s %8s %10s %9s %9s\n", "size", "count", "type", "redop", "time", "algbw",
           "busbw");
    printf("#%12s %12s %8s %8s %10s %9s %9s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)",
           "(GB/s)");
}

static void b_row(b_coll c, int nranks, size_t bytes, double sec)
{
    double algbw = (double)bytes / sec / 1e9;
    printf(" %12zu %12zu %8s %8s %10.2f %9.3f %9.3f   %s\n", bytes, bytes / 4, "float",
           (c == B_ALLREDUCE || c == B_REDUCE_SCATTER) ? "sum" : "none", sec * 1e6, algbw,
           algbw * b_busbw_factor(c, nranks), b_coll_names[c]);
    fflush(stdout);
}

/* Per-rank element counts of collective @p c for a "size" of @p bytes (floats). */
static size_t b_count(b_coll c, size_t bytes, int nranks)
{
    size_t n = bytes / 4;
    if (c == B_ALLGATHER || c == B_REDUCE_SCATTER || c == B_ALLTOALL)
        return n / (size_t)nranks; /* per block */
    return n;
}

/* ------------------------------------------------------------ side by side (-x N) */

/* What the side-by-side mode needs of a library: one collective call (0 on
 * success), the slowest rank's value of a double, and two buffers of the
 * largest size for the memory copy the collectives are measured against. */
typedef struct b_lib {
    const char *name;
    int nranks, rank;
    int (*run)(void *ctx, b_coll c, size_t cnt);
    double (*slowest)(void *ctx, double v);
    void *ctx;
    void *copy_src, *copy_dst;
} b_lib;

static int b_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of the @p n first entries of @p v (sorted in place). */
static double b_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), b_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A ratio's cell: flagged when the half is slower than the whole all-reduce
 * (it contains both halves), marked when over the 0.6 goal. */
static const char *b_mark(double r)
{
    return r > 1.0 ? "SLOWER" : (r > 0.6 ? ">0.6" : "ok");
}

static const b_coll b_side_colls[3] = {B_ALLREDUCE, B_REDUCE_SCATTER, B_ALLGATHER};

/* Entry 3 of a batch: every rank copies @p bytes in its own memory at once,
 * the bandwidth the same ranks reach without communicating (0 on success). */
static int b_side_run(const b_lib *lib, int k, size_t bytes, size_t cnt)
{
    if (k < 3)
        return lib->run(lib->ctx, b_side_colls[k], cnt);
    memcpy(lib->copy_dst, lib->copy_src, bytes);
    return 0;
}

/* Seconds per call of the three collectives and of the memory copy at
 * @p bytes: the median over @p o->side batches, run in turn (ar, rs, ag,
 * copy, ar, ...) so that a burst of load on a shared host hits all four
 * alike; a batch's time is its slowest rank's mean. Non-zero on a failed call. */
static int b_side_times(const b_opts *o, const b_lib *lib, size_t bytes, double sec[4])
{
    double t[4][64];
    int nb = o->side < 64 ? o->side : 64;
    int iters = b_iters(o, bytes) / nb > 1 ? b_iters(o, bytes) / nb : 1;
    for (int k = 0; k < 3; k++) {
        size_t cnt = b_count(b_side_colls[k], bytes, lib->nranks);
        for (int i = 0; i < b_warmup(o, b_iters(o, bytes)); i++)
            if (lib->run(lib->ctx, b_side_colls[k], cnt) != 0)
                return 1;
    }
    for (int b = 0; b < nb; b++) {
        for (int k = 0; k < 4; k++) {
            size_t cnt = k < 3 ? b_count(b_side_colls[k], bytes, lib->nranks) : 0;
            (void)lib->slowest(lib->ctx, 0); /* start together */
            double t0 = b_now();
            for (int i = 0; i < iters; i++)
                if (b_side_run(lib, k, bytes, cnt) != 0)
                    return 1;
            t[k][b] = lib->slowest(lib->ctx, (b_now() - t0) / iters);
        }
    }
    for (int k = 0; k < 4; k++)
        sec[k] = b_median(t[k], nb);
    return 0;
}

/* -x N: per size one row with all-reduce, reduce-scatter and all-gather of
 * the same buffer side by side - time and bus bandwidth - and the halves'
 * time over the all-reduce's, flagged when a half is slower than the whole;
 * then the memory copy's bandwidth (every rank copying a buffer of the
 * size at once) and each bus bandwidth as a fraction of it. */
static int b_side_by_side(const b_opts *o, const b_lib *lib)
{
    const int p = lib->nranks;
    if (lib->rank == 0) {
        printf("# %s side by side, %d ranks: us per call (median of %d interleaved batches), "
               "busbw GB/s\n",
               lib->name, p, o->side);
        printf("#%11s %10s %7s %10s %7s %10s %7s %6s %6s  %-15s %7s %5s %5s %5s\n", "size(B)",
               "ar_us", "ar_bus", "rs_us", "rs_bus", "ag_us", "ag_bus", "rs/ar", "ag/ar", "flag",
               "copy", "ar/cp", "rs/cp", "ag/cp");
    }
    for (size_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= (size_t)o->factor) {
        double sec[4];
        if (b_side_times(o, lib, bytes, sec) != 0)
            return 1;
        if (lib->rank != 0)
            continue;
        double bus[3], rs = sec[1] / sec[0], ag = sec[2] / sec[0];
        double copy = (double)bytes / sec[3] / 1e9;
        for (int k = 0; k < 3; k++)
            bus[k] = (double)bytes / sec[k] / 1e9 * b_busbw_factor(b_side_colls[k], p);
        char flag[32];
        snprintf(flag, sizeof(flag), "rs:%s,ag:%s", b_mark(rs), b_mark(ag));
        printf(" %11zu %10.2f %7.3f %10.2f %7.3f %10.2f %7.3f %6.2f %6.2f  %-15s %7.2f %5.2f "
               "%5.2f %5.2f side\n",
               bytes, sec[0] * 1e6, bus[0], sec[1] * 1e6, bus[1], sec[2] * 1e6, bus[2], rs, ag,
               flag, copy, bus[0] / copy, bus[1] / copy, bus[2] / copy);
        fflush(stdout);
    }
    return 0;
}

#endif
