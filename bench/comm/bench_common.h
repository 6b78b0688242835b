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

typedef enum { B_ALLREDUCE, B_ALLGATHER, B_REDUCE_SCATTER, B_ALLTOALL, B_BROADCAST, B_NCOLL } b_coll;

static const char *const b_coll_names[B_NCOLL] = {"allreduce", "allgather", "reduce_scatter",
                                                  "alltoall", "broadcast"};

typedef struct b_opts {
    size_t min_bytes, max_bytes;
    int factor;
    int iters;  /* 0 = automatic */
    int warmup;
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

/* -b min -e max -f factor -n iters -w warmup -c allreduce,allgather,... */
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
    case B_ALLREDUCE: return 2.0 * (n - 1) / n;
    case B_BROADCAST: return 1.0;
    default: return (double)(n - 1) / n;
    }
}

static void b_header(const char *who, b_coll c, int nranks)
{
    printf("# %s %s, %d ranks\n", who, b_coll_names[c], nranks);
    printf("#%12s %12s %8s %8s %10s %9s %9s\n", "size", "count", "type", "redop", "time",
           "algbw", "busbw");
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

#endif
