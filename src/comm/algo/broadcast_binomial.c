/*
 * Binomial-tree broadcast for small messages: ceil(log2 p) levels; a rank
 * receives once from its parent (relative rank minus its lowest set bit)
 * and then sends to its children, farthest first.
 */
#include "comm/comm_impl.h"

#include "comm/algo/algo_util.h"

dt_status dt__algo_broadcast_binomial(dt_comm *c, void *buf, size_t count, int root, dt__sched *s)
{
    const int p = c->size;
    const int vr = dt__mod(c->rank - root, p);
    const size_t bytes = count * dt_dtype_size(s->dtype);
    int mask = 1;
    while (mask < p && !(vr & mask))
        mask <<= 1;
    if (vr != 0) {
        dt__sched_round(s, false);
        dt__sched_recv(s, buf, bytes, dt__mod(vr - mask + root, p));
    }
    /* children: vr + m for every m below our lowest set bit (all m for the root) */
    dt__sched_round(s, false);
    for (int m = mask >> 1; m > 0; m >>= 1)
        if (vr + m < p)
            dt__sched_send(s, buf, bytes, dt__mod(vr + m + root, p));
    return s->status;
}
