/*
 * Pairwise all-to-all (equal and v): in step k = 1 .. p-1 rank r sends its
 * block for (r+k) and receives the block from (r-k), so each rank talks to
 * one peer at a time and no link is oversubscribed. Its own block is copied.
 * Up to DT_ALLTOALL_ONE_ROUND_BYTES sent per rank, all steps are posted in
 * one round instead: no link to spare there, but p-1 fewer synchronised
 * steps (each a wake-up when ranks share cores).
 */
#include "comm/comm_impl.h"

#include "comm/algo/algo_util.h"
#include "comm/comm_tiny.h"

#define DT_ALLTOALL_ONE_ROUND_BYTES (16 * 1024)
/* the tiny path (comm_tiny.c) sends this one round's messages */
_Static_assert(DT_TINY_BYTES *(DT_TINY_MAX_RANKS - 1) <= DT_ALLTOALL_ONE_ROUND_BYTES,
               "tiny all-to-all: one round");

dt_status dt__algo_alltoallv_pairwise(dt_comm *c, const void *send, const size_t *scounts,
                                      const size_t *sdispls, void *recv, const size_t *rcounts,
                                      const size_t *rdispls, dt__sched *s)
{
    const int p = c->size, r = c->rank;
    const size_t esz = dt_dtype_size(s->dtype);
    const char *in = send;
    char *out = recv;

    size_t sent = 0;
    for (int i = 0; i < p; i++)
        sent += (i == r) ? 0 : scounts[i] * esz;
    const bool one_round = sent <= DT_ALLTOALL_ONE_ROUND_BYTES;
    dt__sched_round(s, false);
    dt__sched_copy(s, out + rdispls[r] * esz, in + sdispls[r] * esz, rcounts[r] * esz);
    for (int k = 1; k < p; k++) {
        int to = dt__mod(r + k, p), from = dt__mod(r - k, p);
        if (!one_round || k == 1)
            dt__sched_round(s, false);
        dt__sched_send(s, in + sdispls[to] * esz, scounts[to] * esz, to);
        dt__sched_recv(s, out + rdispls[from] * esz, rcounts[from] * esz, from);
    }
    return s->status;
}
