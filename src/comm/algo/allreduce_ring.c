/*
 * Ring all-reduce for large messages: a ring reduce-scatter then a ring
 * all-gather over p blocks (2(p-1)/p of the data crosses each link, the
 * bandwidth optimum). Each ring step is cut into segments; the transfer of
 * segment j+1 is posted before segment j is reduced, so copy and reduction
 * overlap (rounds flagged `early`); out of place, a partial is folded with
 * this rank's input as it lands (recv_reduce). Every block is reduced by one
 * rank and then copied to the others, so all ranks end bit-identical.
 */
#include "comm/comm_impl.h"

#include "comm/algo/algo_util.h"

#include "core/config.h"

size_t dt__algo_ring_segment_bytes(void)
{
    int64_t kb = dt__config_int("DT_RING_SEGMENT_KB");
    return (kb > 0) ? (size_t)kb * 1024 : 4096 * 1024;
}

dt_status dt__algo_allreduce_ring(dt_comm *c, const void *send, void *recv, size_t count,
                                  dt__sched *s)
{
    const int p = c->size, r = c->rank;
    const size_t esz = dt_dtype_size(s->dtype);
    const size_t maxblk = dt__block_len(count, p, 0);
    size_t seg = dt__algo_ring_segment_bytes() / esz;
    if (seg == 0)
        seg = 1;
    const size_t nseg = (maxblk + seg - 1) / seg > 0 ? (maxblk + seg - 1) / seg : 1;
    const bool early = (nseg >= 2);
    const int right = dt__mod(r + 1, p), left = dt__mod(r - 1, p);
    char *buf = recv;
    const char *own = send;
    /* Out of place, partials arrive straight in recv and this rank's own
     * contribution is folded in from send: no copy of the input, no scratch.
     * In place, they arrive in a two-segment scratch. */
    const bool inplace = (send == recv);
    const size_t slot = (seg < maxblk ? seg : maxblk) * esz;
    char *tmp = NULL;
    if (inplace && (tmp = dt__sched_scratch(s, 2 * slot + esz)) == NULL)
        return s->status;

    size_t unit = 0;
    /* reduce-scatter: after step k rank r holds block (r-k-1) reduced over k+2 ranks */
    for (int k = 0; k < p - 1; k++) {
        int sb = dt__mod(r - k, p), rb = dt__mod(r - k - 1, p);
        size_t soff = dt__block_off(count, p, sb), slen = dt__block_len(count, p, sb);
        size_t roff = dt__block_off(count, p, rb), rlen = dt__block_len(count, p, rb);
        const char *sbase = (k == 0) ? own : buf; /* step 0 sends raw input */
        for (size_t j = 0; j < nseg; j++, unit++) {
            size_t s0 = j * seg < slen ? j * seg : slen, sn = slen - s0 < seg ? slen - s0 : seg;
            size_t r0 = j * seg < rlen ? j * seg : rlen, rn = rlen - r0 < seg ? rlen - r0 : seg;
            char *dst = buf + (roff + r0) * esz;
            dt__sched_round(s, early && unit > 0);
            dt__sched_send(s, sbase + (soff + s0) * esz, sn * esz, right);
            if (inplace) {
                char *t = tmp + (unit % 2) * slot;
                dt__sched_recv(s, t, rn * esz, left);
                dt__sched_reduce(s, dst, t, rn);
            } else {
                dt__sched_recv_reduce(s, dst, own + (roff + r0) * esz, rn * esz, left);
            }
            if (k == p - 2 && s->divisor > 1)
                dt__sched_scale(s, dst, rn, s->divisor);
        }
    }
    /* all-gather: pass the finished blocks around */
    for (int k = 0; k < p - 1; k++) {
        int sb = dt__mod(r + 1 - k, p), rb = dt__mod(r - k, p);
        size_t soff = dt__block_off(count, p, sb), slen = dt__block_len(count, p, sb);
        size_t roff = dt__block_off(count, p, rb), rlen = dt__block_len(count, p, rb);
        for (size_t j = 0; j < nseg; j++, unit++) {
            size_t s0 = j * seg < slen ? j * seg : slen, sn = slen - s0 < seg ? slen - s0 : seg;
            size_t r0 = j * seg < rlen ? j * seg : rlen, rn = rlen - r0 < seg ? rlen - r0 : seg;
            dt__sched_round(s, early);
            dt__sched_send(s, buf + (soff + s0) * esz, sn * esz, right);
            dt__sched_recv(s, buf + (roff + r0) * esz, rn * esz, left);
        }
    }
    return s->status;
}
