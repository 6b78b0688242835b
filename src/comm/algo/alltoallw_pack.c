/*
 * All-to-all of 2-D blocks by packing: every strided send block is packed
 * into scratch, the contiguous pieces go pairwise (as alltoall_pairwise.c:
 * in step k rank r sends to r+k and receives from r-k), and every strided
 * receive block is unpacked at the end. Contiguous blocks skip the copy.
 * The transport-independent path of dt_comm_alltoallw.
 */
#include "comm/comm_impl.h"

#include "comm/algo/algo_util.h"

/* Where block @p b travels from or to: itself when contiguous, else the next
 * @p cursor bytes of @p buf (which the cursor then passes). */
static dt__block2d staged(const dt__block2d *b, char *buf, size_t *cursor)
{
    uint64_t bytes = b->rows * b->row_bytes;
    if (dt__block2d_runs(b) <= 1)
        return (dt__block2d){.addr = b->addr, .rows = 1, .row_bytes = bytes, .pitch = bytes};
    dt__block2d d = {.addr = (uint64_t)(uintptr_t)(buf + *cursor),
                     .rows = 1,
                     .row_bytes = bytes,
                     .pitch = bytes};
    *cursor += bytes;
    return d;
}

dt_status dt__algo_alltoallw_pack(dt_comm *c, const dt__block2d *send, const dt__block2d *recv,
                                  dt__sched *s)
{
    const int p = c->size, r = c->rank;
    size_t stage = 0;
    for (int q = 0; q < p; q++)
        if (q != r) {
            stage += dt__block2d_runs(&send[q]) > 1 ? send[q].rows * send[q].row_bytes : 0;
            stage += dt__block2d_runs(&recv[q]) > 1 ? recv[q].rows * recv[q].row_bytes : 0;
        }
    /* scratch: the caller's blocks (they must outlive a non-blocking call),
     * the staged ones, then the staging bytes */
    dt__block2d *blk = dt__sched_scratch(s, 4 * (size_t)p * sizeof(dt__block2d) + stage);
    if (blk == NULL)
        return s->status;
    dt__block2d *snd = blk, *rcv = blk + p, *sst = blk + 2 * p, *rst = blk + 3 * p;
    char *buf = (char *)(blk + 4 * p);
    size_t cursor = 0;
    for (int q = 0; q < p; q++) {
        snd[q] = send[q];
        rcv[q] = recv[q];
        if (q != r) { /* my own block is copied straight across */
            sst[q] = staged(&snd[q], buf, &cursor);
            rst[q] = staged(&rcv[q], buf, &cursor);
        }
    }
    dt__sched_round(s, false);
    dt__sched_copy2d(s, &rcv[r], &snd[r], 0, 1);
    for (int q = 0; q < p; q++)
        if (q != r && sst[q].addr != snd[q].addr)
            dt__sched_copy2d(s, &sst[q], &snd[q], 0, 1);
    for (int k = 1; k < p; k++) {
        int to = dt__mod(r + k, p), from = dt__mod(r - k, p);
        dt__sched_round(s, false);
        dt__sched_send(s, (const void *)(uintptr_t)sst[to].addr, sst[to].row_bytes, to);
        dt__sched_recv(s, (void *)(uintptr_t)rst[from].addr, rst[from].row_bytes, from);
    }
    dt__sched_round(s, false);
    for (int q = 0; q < p; q++)
        if (q != r && rst[q].addr != rcv[q].addr)
            dt__sched_copy2d(s, &rcv[q], &rst[q], 0, 1);
    return s->status;
}
