/*
 * Recursive-doubling all-reduce for small messages: log2(p) rounds of full
 * vector exchange with partner rank ^ mask. For p not a power of two, the
 * first 2*rem ranks pair up first (even sends to odd, which folds it in), the
 * remaining power of two runs the doubling, and the odd ones hand the result
 * back (MPICH's scheme). Both partners combine the same two operands, so
 * every rank ends bit-identical.
 */
#include "comm/comm_impl.h"

#include "comm/algo/algo_util.h"

/* Real rank of doubling-participant @p v. */
static int real_rank(int v, int rem)
{
    return (v < rem) ? 2 * v + 1 : v + rem;
}

dt_status dt__algo_allreduce_recursive_doubling(dt_comm *c, const void *send, void *recv,
                                                size_t count, dt__sched *s)
{
    const int p = c->size, r = c->rank;
    const size_t bytes = count * dt_dtype_size(s->dtype);
    int p2 = 1;
    while (p2 * 2 <= p)
        p2 *= 2;
    const int rem = p - p2;
    char *tmp = dt__sched_scratch(s, bytes);
    if (tmp == NULL)
        return s->status;

    if (send != recv) {
        dt__sched_round(s, false);
        dt__sched_copy(s, recv, send, bytes);
    }
    if (r < 2 * rem && r % 2 == 0) { /* folded into r + 1, gets the result back */
        dt__sched_round(s, false);
        dt__sched_send(s, recv, bytes, r + 1);
        dt__sched_round(s, false);
        dt__sched_recv(s, recv, bytes, r + 1);
        return s->status;
    }
    if (r < 2 * rem) {
        dt__sched_round(s, false);
        dt__sched_recv(s, tmp, bytes, r - 1);
        dt__sched_reduce(s, recv, tmp, count);
    }
    const int v = (r < 2 * rem) ? r / 2 : r - rem;
    for (int mask = 1; mask < p2; mask <<= 1) {
        int peer = real_rank(v ^ mask, rem);
        dt__sched_round(s, false);
        dt__sched_send(s, recv, bytes, peer);
        dt__sched_recv(s, tmp, bytes, peer);
        dt__sched_reduce(s, recv, tmp, count);
    }
    if (s->divisor > 1) {
        dt__sched_round(s, false);
        dt__sched_scale(s, recv, count, s->divisor);
    }
    if (r < 2 * rem) {
        dt__sched_round(s, false);
        dt__sched_send(s, recv, bytes, r - 1);
    }
    return s->status;
}
