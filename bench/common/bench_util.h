/*
 * Timing helpers shared by the benchmark programs (header-only; benchmarks
 * link the public library only, so they do not use src/core/clock.h).
 */
#ifndef DT_BENCH_UTIL_H
#define DT_BENCH_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

/* Monotonic wall clock in seconds. */
static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* User + system CPU seconds of the process: on a shared machine a steadier
 * cost than wall time (it leaves out waiting for a core), page-fault
 * handling included. */
static inline double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* qsort comparator for doubles, ascending. */
static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[1..n-1] (the steps after the first, a warm-up); sorts that part of v. */
static inline double median_after_first(double *v, int64_t n)
{
    int64_t m = n - 1;
    qsort(v + 1, (size_t)m, sizeof *v, cmp_double);
    return m % 2 ? v[1 + m / 2] : 0.5 * (v[m / 2] + v[m / 2 + 1]);
}

#endif
