/* Monotonic time, header-only so tests and tools can share it. */
#ifndef DT_CORE_CLOCK_H
#define DT_CORE_CLOCK_H

#include <time.h>

/* Seconds on CLOCK_MONOTONIC (for timeouts and durations; not wall time). */
static inline double dt__clock_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The same clock at tick resolution (1-4 ms): ~10 ns a read against 40-60 ns
 * for dt__clock_now on a KVM guest, for deadlines of a second or more that
 * are checked on every wait (work.c). Same epoch as dt__clock_now. */
static inline double dt__clock_coarse(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
