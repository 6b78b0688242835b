/*
 * All-to-all of 2-D blocks between ranks of one host by direct copies
 * between their address spaces (the backend's peer_copy: Linux cross-memory
 * attach for UCX). One copy per byte, no packing and no staging:
 *   round 1: each pair swaps descriptors of the blocks it exchanges; then
 *            each rank copies its own block locally and, for every pair
 *            where it is the mover (dt__peer_copy_run), copies the peer's
 *            block straight from or into the peer's memory;
 *   round 2: each rank tells every peer its status; the peers' buffers may
 *            be reused only after all of them reported, and a rank that
 *            failed (say, a size mismatch) makes everyone fail with it.
 */
#include "comm/comm_impl.h"

#include "comm/algo/algo_util.h"

#define DT_PEER_COPY_SLICE      (2048u * 1024) /* ~ L2; best of 0.25-4 MiB measured */
#define DT_PEER_COPY_MAX_SLICES 256u

dt_status dt__algo_alltoallw_peer_copy(dt_comm *c, const dt__block2d *send, const dt__block2d *recv,
                                       dt__sched *s)
{
    const int p = c->size, r = c->rank;
    /* scratch: mine[2q] / mine[2q+1] = what I send q / where q's block lands,
     * theirs[2q] / theirs[2q+1] = the same two of q's, then a status word
     * per rank (status[r] is mine: a failing copy writes it, all get it) */
    size_t nblk = 4 * (size_t)p;
    dt__block2d *blk = dt__sched_scratch(s, nblk * sizeof(dt__block2d) + (size_t)p * 8);
    if (blk == NULL)
        return s->status;
    dt__block2d *mine = blk, *theirs = blk + 2 * p;
    uint64_t *status = (uint64_t *)(blk + nblk);
    for (int q = 0; q < p; q++) {
        mine[2 * q] = send[q];
        mine[2 * q + 1] = recv[q];
        status[q] = DT_OK;
    }
    dt__sched_round(s, false);
    for (int k = 1; k < p; k++) {
        int q = dt__mod(r + k, p);
        dt__sched_recv(s, &theirs[2 * q], 2 * sizeof(dt__block2d), q);
        dt__sched_send(s, &mine[2 * q], 2 * sizeof(dt__block2d), q);
    }
    /* In row slices of the source (~DT_PEER_COPY_SLICE bytes over all
     * blocks): the blocks of a redistribute are column stripes of the same
     * rows, so each slice is read from memory once, whole rows in a row,
     * and its stripes go out while it is in the cache (a stripe at a time
     * over the whole source read each row in pieces: 1.6x the kernel time). */
    uint64_t total = 0;
    for (int q = 0; q < p; q++)
        total += send[q].rows * send[q].row_bytes;
    uint64_t slices = (total + DT_PEER_COPY_SLICE - 1) / DT_PEER_COPY_SLICE;
    uint32_t n = slices < 1 ? 1
                            : (slices > DT_PEER_COPY_MAX_SLICES ? DT_PEER_COPY_MAX_SLICES
                                                                : (uint32_t)slices);
    for (uint32_t part = 0; part < n; part++) {
        dt__sched_copy2d(s, &mine[2 * r + 1], &mine[2 * r], part, n);
        for (int k = 1; k < p; k++) { /* from r+1: ranks do not all copy to rank 0 first */
            int q = dt__mod(r + k, p);
            dt__sched_peer_copy(s, q, true, &mine[2 * q], &theirs[2 * q + 1], &status[r], part, n);
            dt__sched_peer_copy(s, q, false, &mine[2 * q + 1], &theirs[2 * q], &status[r], part, n);
        }
    }
    dt__sched_round(s, false);
    for (int k = 1; k < p; k++) {
        int q = dt__mod(r + k, p);
        dt__sched_recv(s, &status[q], 8, q);
        dt__sched_send(s, &status[r], 8, q);
    }
    dt__sched_check(s, status, (size_t)p);
    return s->status;
}
