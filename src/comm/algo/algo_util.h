/* Small helpers shared by the algorithm files. */
#ifndef DT_COMM_ALGO_UTIL_H
#define DT_COMM_ALGO_UTIL_H

#include <stddef.h>

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

static inline int dt__mod(int a, int n)
{
    return ((a % n) + n) % n;
}

#endif
