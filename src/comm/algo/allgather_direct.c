/*
 * Direct all-gather (equal and per-rank counts) for small blocks on a few
 * ranks: one round in which every rank sends its block straight from the
 * input to every other rank, instead of the ring's p-1 dependent steps (each
 * a wake-up when ranks share cores). Copying the own block into the output
 * overlaps the transfers (their round is posted `early`).
 */
#include "comm/comm_impl.h"
#include "comm/sched.h"

#include "comm/algo/algo_util.h"

dt_status dt__algo_allgatherv_direct(dt_comm *c, const void *send, void *recv, const size_t *counts,
                                     const size_t *displs, dt__sched *s)
{
    const int p = c->size, r = c->rank;
    const size_t esz = dt_dtype_size(s->dtype);
    char *out = recv;

    dt__sched_round(s, false);
    dt__sched_copy(s, out + displs[r] * esz, send, counts[r] * esz);
    dt__sched_round(s, true);
    for (int k = 1; k < p; k++) {
        int to = dt__mod(r + k, p), from = dt__mod(r - k, p);
        dt__sched_recv(s, out + displs[from] * esz, counts[from] * esz, from);
        dt__sched_send(s, send, counts[r] * esz, to);
    }
    return s->status;
}
