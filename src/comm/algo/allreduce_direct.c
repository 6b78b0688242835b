/*
 * Direct all-reduce for small messages on a few ranks: one round in which
 * every rank sends its whole vector to every other rank, then each rank sums
 * the p contributions itself. One network latency instead of log2(p) rounds
 * (what matters when ranks share cores and every round costs a context
 * switch), at (p-1) x the traffic, so it is used only for small vectors.
 * Every rank folds the contributions in rank order 0..p-1, so all ranks end
 * bit-identical.
 */
#include "comm/comm_impl.h"

#include "comm/algo/algo_util.h"

dt_status dt__algo_allreduce_direct(dt_comm *c, const void *send, void *recv, size_t count,
                                    dt__sched *s)
{
    const int p = c->size, r = c->rank;
    const size_t bytes = count * dt_dtype_size(s->dtype);
    char *slot = dt__sched_scratch(s, (size_t)p * bytes + 1); /* slot i: rank i's vector */
    if (slot == NULL)
        return s->status;
    dt__sched_round(s, false);
    for (int k = 1; k < p; k++) {
        int to = dt__mod(r + k, p), from = dt__mod(r - k, p);
        dt__sched_recv(s, slot + (size_t)from * bytes, bytes, from);
        dt__sched_send(s, send, bytes, to);
    }
    /* in place, recv is overwritten below before our own term is read: keep a copy */
    const char *own = send;
    if (send == recv) {
        dt__sched_copy(s, slot + (size_t)r * bytes, send, bytes);
        own = slot + (size_t)r * bytes;
    }
    dt__algo_fold_slots(s, recv, own, slot, bytes, r, p, count);
    return s->status;
}
