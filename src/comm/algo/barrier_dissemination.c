/*
 * Dissemination barrier: ceil(log2 p) rounds of zero-byte messages; in round
 * k rank r signals r + 2^k and waits for r - 2^k. Nobody leaves before every
 * rank has entered.
 */
#include "comm/comm_impl.h"

#include "comm/algo/algo_util.h"

dt_status dt__algo_barrier_dissemination(dt_comm *c, dt__sched *s)
{
    static char token;
    const int p = c->size, r = c->rank;
    for (int d = 1; d < p; d <<= 1) {
        dt__sched_round(s, false);
        dt__sched_send(s, &token, 0, dt__mod(r + d, p));
        dt__sched_recv(s, &token, 0, dt__mod(r - d, p));
    }
    return s->status;
}
