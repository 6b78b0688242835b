/*
 * Ring all-gather (equal and per-rank counts): in step k every rank forwards
 * to its right neighbour the block it received in step k-1 (its own first),
 * so after p-1 steps everyone holds every block. Blocks go straight into the
 * output buffer. The first step sends from the input, so copying this rank's
 * own block into the output overlaps it (its round is posted `early`).
 */
#include "comm/comm_impl.h"

#include "comm/algo/algo_util.h"

dt_status dt__algo_allgatherv_ring(dt_comm *c, const void *send, void *recv, const size_t *counts,
                                   const size_t *displs, dt__sched *s)
{
    const int p = c->size, r = c->rank;
    const size_t esz = dt_dtype_size(s->dtype);
    const int right = dt__mod(r + 1, p), left = dt__mod(r - 1, p);
    char *out = recv;

    dt__sched_round(s, false);
    dt__sched_copy(s, out + displs[r] * esz, send, counts[r] * esz);
    for (int k = 0; k < p - 1; k++) {
        int sb = dt__mod(r - k, p), rb = dt__mod(r - k - 1, p);
        dt__sched_round(s, k == 0);
        const char *src = (k == 0) ? (const char *)send : out + displs[sb] * esz;
        dt__sched_send(s, src, counts[sb] * esz, right);
        dt__sched_recv(s, out + displs[rb] * esz, counts[rb] * esz, left);
    }
    return s->status;
}
