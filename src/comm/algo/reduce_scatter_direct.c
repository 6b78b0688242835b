/*
 * Direct reduce-scatter for small messages on a few ranks: one round in which
 * every rank sends block q of its input to rank q, then each rank folds the p
 * contributions to its own block, in rank order. One latency instead of the
 * ring's p-1 dependent steps, which matters when ranks share cores (each step
 * waits for a context switch); the bytes sent are the same as the ring's.
 */
#include "comm/comm_impl.h"

#include "comm/algo/algo_util.h"

dt_status dt__algo_reduce_scatterv_direct(dt_comm *c, const void *send, void *recv,
                                          const size_t *counts, dt__sched *s)
{
    const int p = c->size, r = c->rank;
    const size_t esz = dt_dtype_size(s->dtype), mine = counts[r] * esz;
    const char *in = send;
    size_t my_off = 0;
    for (int q = 0; q < r; q++)
        my_off += counts[q] * esz;
    char *slot = dt__sched_scratch(s, (size_t)p * mine + 1); /* slot q: rank q's block */
    if (slot == NULL)
        return s->status;
    dt__sched_round(s, false);
    for (int k = 1; k < p; k++) {
        int to = dt__mod(r + k, p), from = dt__mod(r - k, p);
        size_t to_off = 0;
        for (int q = 0; q < to; q++)
            to_off += counts[q] * esz;
        dt__sched_recv(s, slot + (size_t)from * mine, mine, from);
        dt__sched_send(s, in + to_off, counts[to] * esz, to);
    }
    /* in place (recv is my block of send): keep my term before recv is written */
    const char *own = in + my_off;
    if (own == (const char *)recv) {
        dt__sched_copy(s, slot + (size_t)r * mine, own, mine);
        own = slot + (size_t)r * mine;
    }
    dt__algo_fold_slots(s, recv, own, slot, mine, r, p, counts[r]);
    return s->status;
}
