/*
 * Ring all-gather (equal and per-rank counts): in step k every rank forwards
 * to its right neighbour the block it received in step k-1 (its own first),
 * so after p-1 steps everyone holds every block. Blocks go straight into the
 * output buffer. The first step sends this rank's own block from the input
 * and copies it into the output in the same pass (send_copy): through shared
 * memory each piece is read once, for the window and for the output, which
 * on 2 ranks is a third of the all-gather's memory traffic.
 */
#include "comm/comm_impl.h"

#include "comm/algo/algo_util.h"
#include "core/copy.h"

dt_status dt__algo_allgatherv_ring(dt_comm *c, const void *send, void *recv, const size_t *counts,
                                   const size_t *displs, dt__sched *s)
{
    const int p = c->size, r = c->rank;
    const size_t esz = dt_dtype_size(s->dtype);
    const int right = dt__mod(r + 1, p), left = dt__mod(r - 1, p);
    char *out = recv;

    char *mine = out + displs[r] * esz;
    const size_t own = counts[r] * esz;
    /* in place (or overlapping): a copy of its own, run after the first
     * step's transfers are posted (`early`) */
    const bool fused = p > 1 && dt__bytes_disjoint(mine, send, own);
    if (!fused) {
        dt__sched_round(s, false);
        dt__sched_copy(s, mine, send, own);
    }
    for (int k = 0; k < p - 1; k++) {
        int sb = dt__mod(r - k, p), rb = dt__mod(r - k - 1, p);
        dt__sched_round(s, k == 0 && !fused);
        if (k == 0 && fused)
            dt__sched_send_copy(s, send, own, right, mine);
        else
            dt__sched_send(s, k == 0 ? (const char *)send : out + displs[sb] * esz,
                           counts[sb] * esz, right);
        dt__sched_recv(s, out + displs[rb] * esz, counts[rb] * esz, left);
    }
    return s->status;
}
