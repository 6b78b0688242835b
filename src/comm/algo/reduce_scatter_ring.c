/*
 * Ring reduce-scatter (equal and per-rank counts). In step k rank r sends
 * its running partial sum of block (r-k-1) to the right and receives the
 * left neighbour's partial of block (r-k-2), folding in its own contribution;
 * after p-1 steps the partial it receives is block r, complete. Steps are
 * segmented so the next segment's transfer overlaps this segment's reduce.
 * Partials live in two scratch blocks (step k receives into acc[k % 2] and
 * step k+1 sends from it); the last one arrives straight in recv, which saves
 * copying this rank's block, except in place (recv == send + block r).
 * Received partials are folded with our contribution as they land
 * (recv_reduce): out of the transport's shared-memory window, one pass over
 * the block instead of a copy-out and then a reduce.
 */
#include "comm/comm_impl.h"

#include "comm/algo/algo_util.h"

#include <stdlib.h>

#include "core/error.h"

dt_status dt__algo_reduce_scatterv_ring(dt_comm *c, const void *send, void *recv,
                                        const size_t *counts, dt__sched *s)
{
    const int p = c->size, r = c->rank;
    const size_t esz = dt_dtype_size(s->dtype);
    const int right = dt__mod(r + 1, p), left = dt__mod(r - 1, p);
    size_t maxblk = 0;
    for (int i = 0; i < p; i++)
        maxblk = counts[i] > maxblk ? counts[i] : maxblk;
    size_t seg = dt__algo_ring_segment_bytes() / esz;
    if (seg == 0)
        seg = 1;
    const size_t nseg = (maxblk + seg - 1) / seg > 0 ? (maxblk + seg - 1) / seg : 1;
    const bool early = (nseg >= 2);
    char *acc = dt__sched_scratch(s, 2 * maxblk * esz + esz);
    if (acc == NULL)
        return s->status;
    const char *in = send;
    char *out = recv;
    size_t *off = NULL;
    /* block offsets in send: packed prefix sums (kept on the stack for small p) */
    size_t off_small[64];
    off = (p <= 64) ? off_small : malloc((size_t)p * sizeof(*off));
    if (off == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "reduce_scatter_ring: no memory for %d offsets", p);
    size_t o = 0;
    for (int i = 0; i < p; i++) {
        off[i] = o;
        o += counts[i];
    }

    const bool inplace = (out == in + off[r] * esz);
    size_t unit = 0;
    for (int k = 0; k < p - 1; k++) {
        int sb = dt__mod(r - k - 1, p), rb = dt__mod(r - k - 2, p);
        const char *sbase = (k == 0) ? in + off[sb] * esz : acc + ((k - 1) % 2) * maxblk * esz;
        char *rbase = acc + (k % 2) * maxblk * esz;
        for (size_t j = 0; j < nseg; j++, unit++) {
            size_t slen = counts[sb], rlen = counts[rb];
            size_t s0 = j * seg < slen ? j * seg : slen, sn = slen - s0 < seg ? slen - s0 : seg;
            size_t r0 = j * seg < rlen ? j * seg : rlen, rn = rlen - r0 < seg ? rlen - r0 : seg;
            dt__sched_round(s, early && unit > 0);
            dt__sched_send(s, sbase + s0 * esz, sn * esz, right);
            const char *mine = in + (off[rb] + r0) * esz;
            if (k < p - 2) { /* a partial to pass on: into scratch, plus ours */
                dt__sched_recv_reduce(s, rbase + r0 * esz, mine, rn * esz, left);
                continue;
            }
            char *dst = out + r0 * esz;
            if (inplace) { /* recv already holds our contribution */
                dt__sched_recv(s, rbase + r0 * esz, rn * esz, left);
                dt__sched_reduce(s, dst, rbase + r0 * esz, rn);
            } else { /* the last partial lands in recv, ours is folded in */
                dt__sched_recv_reduce(s, dst, mine, rn * esz, left);
            }
            if (s->divisor > 1)
                dt__sched_scale(s, dst, rn, s->divisor);
        }
    }
    if (off != off_small)
        free(off);
    return s->status;
}
