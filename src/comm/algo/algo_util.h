/* Small helpers shared by the algorithm files. */
#ifndef DT_COMM_ALGO_UTIL_H
#define DT_COMM_ALGO_UTIL_H

#include <stddef.h>

#include "comm/comm_impl.h"
#include "comm/sched.h"

/* Block i of n over count elements: balanced, the first count % n get one more. */
static inline size_t dt__block_off(size_t count, int n, int i)
{
    size_t base = count / (size_t)n, rem = count % (size_t)n;
    return (size_t)i * base + ((size_t)i < rem ? (size_t)i : rem);
}

static inline size_t dt__block_len(size_t count, int n, int i)
{
    return count / (size_t)n + ((size_t)i < count % (size_t)n ? 1 : 0);
}

/* a mod n in [0, n). Algorithms pass -n < a < 2n: two compares instead of
 * two divisions (measured: the divisions were 9% of a small broadcast). */
static inline int dt__mod(int a, int n)
{
    if (a < 0)
        a += n;
    if (a >= n)
        a -= n;
    return (a >= 0 && a < n) ? a : ((a % n) + n) % n;
}

/*
 * recv = the fold, in rank order 0..p-1, of p contributions of @p count
 * elements: rank i's at slots + i * slot_bytes, mine (rank r) at @p own;
 * then the division of an average. The one-round direct algorithms end so.
 */
static inline void dt__algo_fold_slots(dt__sched *s, void *recv, const void *own, const char *slots,
                                       size_t slot_bytes, int r, int p, size_t count)
{
    dt__sched_copy(s, recv, r == 0 ? own : slots, slot_bytes);
    for (int i = 1; i < p; i++)
        dt__sched_reduce(s, recv, i == r ? own : slots + (size_t)i * slot_bytes, count);
    if (s->divisor > 1)
        dt__sched_scale(s, recv, count, s->divisor);
}

#endif
