/* Timing and the checks every failure test makes (see CMakeLists.txt). */
#ifndef DT_TEST_FAILURE_UTIL_H
#define DT_TEST_FAILURE_UTIL_H

#include <time.h>

#include "comm/comm_test_util.h"

static inline double ft_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The call that returned @p st, started at @p t0, must have failed within
 * @p limit_s with a message naming a world rank. */
static inline void ft_expect_failed(dt_status st, double t0, double limit_s, const char *what)
{
    double took = ft_now() - t0;
    int me = dt_runtime_rank(ct_rt);
    if (st == DT_OK)
        fail_msg("%s: rank %d returned DT_OK after %.2f s", what, me, took);
    if (took > limit_s)
        fail_msg("%s: rank %d took %.2f s to fail (limit %.0f s): %s", what, me, took, limit_s,
                 dt_last_error());
    if (strstr(dt_last_error(), "world rank") == NULL)
        fail_msg("%s: rank %d's error names no world rank: %s", what, me, dt_last_error());
    print_message("%s: %s after %.3f s: %s\n", what, dt_status_str(st), took, dt_last_error());
}

#endif
