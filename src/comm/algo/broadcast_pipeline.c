/*
 * Pipelined chain broadcast for large messages: root -> root+1 -> ... in
 * segments; in round j a rank receives segment j from its left and forwards
 * segment j-1 to its right, so all links stream at once and the time is
 * about (p - 1 + segments) segment transfers.
 */
#include "comm/comm_impl.h"

#include "comm/algo/algo_util.h"

dt_status dt__algo_broadcast_pipeline(dt_comm *c, void *buf, size_t count, int root, dt__sched *s)
{
    const int p = c->size;
    const int vr = dt__mod(c->rank - root, p);
    const size_t esz = dt_dtype_size(s->dtype);
    size_t seg = dt__algo_ring_segment_bytes() / esz;
    if (seg == 0)
        seg = 1;
    const size_t nseg = (count + seg - 1) / seg > 0 ? (count + seg - 1) / seg : 1;
    const int left = dt__mod(c->rank - 1, p), right = dt__mod(c->rank + 1, p);
    const bool has_left = (vr != 0), has_right = (vr != p - 1);
    char *b = buf;

    for (size_t j = 0; j <= nseg; j++) {
        dt__sched_round(s, false);
        if (has_left && j < nseg) {
            size_t o = j * seg < count ? j * seg : count;
            size_t n = count - o < seg ? count - o : seg;
            dt__sched_recv(s, b + o * esz, n * esz, left);
        }
        if (has_right && j > 0) {
            size_t o = (j - 1) * seg < count ? (j - 1) * seg : count;
            size_t n = count - o < seg ? count - o : seg;
            dt__sched_send(s, b + o * esz, n * esz, right);
        }
    }
    return s->status;
}
