/*
 * The consistency check of collective calls (comm_check.c): every rank of a
 * comm must call the same collective with the same arguments. Each call's
 * descriptor (what, dtype, count, op, root and the caller's context, e.g.
 * the redistribute's placements and shape) is hashed into the check bits of
 * its messages' tags, so ranks that disagree fail when the first message
 * between them arrives, at no extra round trip. DT_DEBUG=detail also swaps
 * the descriptors before every call, so the error prints both sides.
 */
#ifndef DT_COMM_CHECK_H
#define DT_COMM_CHECK_H

#include "comm/comm_impl.h"

/* The caller's context, mixed into every collective's descriptor until
 * restored: @p text (borrowed) is printed with DT_DEBUG=detail. */
typedef struct dt__comm_ctx {
    uint32_t hash;
    const char *text;
} dt__comm_ctx;
dt__comm_ctx dt__comm_context_set(uint32_t hash, const char *text);
void dt__comm_context_restore(dt__comm_ctx saved);
/* A 32-bit hash of @p n bytes, chained from @p h (0 to start). */
uint32_t dt__comm_hash(uint32_t h, const void *p, size_t n);

/* Whether DT_DEBUG=detail is on (read once). */
bool dt__comm_check_detail(void);

/* A v-collective's counts (the same array on every rank) for its check:
 * their sum, and a hash that is never 0 (0: no counts). */
static inline size_t dt__counts_total(const size_t *counts, int n)
{
    size_t t = 0;
    for (int i = 0; i < n; i++)
        t += counts[i];
    return t;
}
static inline uint64_t dt__counts_hash(const size_t *counts, int n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < n; i++)
        h = (h ^ counts[i]) * 0x100000001b3ull;
    return h | 1;
}

/* A validated collective @p d starts on @p c: remember it for the tags (and
 * with DT_DEBUG=detail, compare it with every rank's first). */
dt_status dt__comm_begin(dt_comm *c, const dt__coll_desc *d, size_t what_len);
/* dt__comm_begin on `comm` with the fields of dt__coll_desc but ctx (the
 * first, `fn`, a char array); returns on error. */
#define DT__COMM_BEGIN(...)                                                                        \
    DT_CHECK(dt__comm_begin(comm, &(dt__coll_desc){__VA_ARGS__, 0}, sizeof(fn) - 1))

#endif
