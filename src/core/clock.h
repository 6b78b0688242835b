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

#endif
