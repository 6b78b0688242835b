/*
 * All-to-all of 2-D blocks on a comm whose members all talk through shared
 * memory (the S(a) -> S(b) of redistribute). The bare all-to-all streams each
 * block through the pair's shared-memory window: two copies per byte. Packing
 * a strided block first, as alltoallw_pack does, adds a third; cross-memory
 * attach (alltoallw_peer_copy) makes one copy, but in the kernel at a third
 * of memcpy's speed. Here a strided send block is gathered row by row
 * straight into the window (isend2d), so S(0) -> S(1), whose receive blocks
 * are contiguous, costs what the bare all-to-all does. Strided receive blocks
 * land in scratch and are unpacked at the end; small strided send blocks are
 * packed (the ring copies them whole). All transfers are posted at once (to
 * r+k, from r-k, k = 1..p-1), not in pairwise steps: the transport fills
 * every pair's window in turn, so the p-1 stripes of a stretch of rows leave
 * while those rows are cached, where each step used to read the whole
 * source for its stripe (4 ranks, 64 MiB: best of 30 8.96-9.46 ms against
 * 10.4-10.8, 8% less CPU time). Its own block rides
 * along with the gathered send to r+1 (isend2d's ride): the two are
 * column stripes of the same rows, and copied in step each row is read from
 * memory once (copied apart, the second pass found the rows evicted: one
 * rank's local copies for 2 ranks, 64 MiB, 4.2-5.0 ms against 1.7-2.1 row by
 * row). Otherwise it is copied in slices while the transfers move.
 */
#include "comm/comm_impl.h"

#include "comm/algo/algo_util.h"

/* Slices of the own block's copy, between which the transport progresses. */
#define DT_SELF_COPY_SLICE      (1024u * 1024)
#define DT_SELF_COPY_MAX_SLICES 64u

static uint64_t block_bytes(const dt__block2d *b)
{
    return b->rows * b->row_bytes;
}

static bool strided(const dt__block2d *b)
{
    return dt__block2d_runs(b) > 1;
}

/* A send block goes as is: contiguous, or gathered by isend2d. */
static bool sent_as_is(const dt__block2d *b)
{
    return !strided(b) || block_bytes(b) > DT__SEND2D_MIN_BYTES;
}

/* @p b's bytes at @p buf + *cursor (which then passes them), as one run. */
static dt__block2d staged_at(const dt__block2d *b, char *buf, size_t *cursor)
{
    uint64_t bytes = block_bytes(b);
    dt__block2d d = {(uint64_t)(uintptr_t)(buf + *cursor), 1, bytes, bytes};
    *cursor += bytes;
    return d;
}

static uint32_t self_slices(const dt__block2d *b)
{
    uint64_t n = (block_bytes(b) + DT_SELF_COPY_SLICE - 1) / DT_SELF_COPY_SLICE;
    return n < 1 ? 1 : (n > DT_SELF_COPY_MAX_SLICES ? DT_SELF_COPY_MAX_SLICES : (uint32_t)n);
}

dt_status dt__algo_alltoallw_stream(dt_comm *c, const dt__block2d *send, const dt__block2d *recv,
                                    dt__sched *s)
{
    const int p = c->size, r = c->rank;
    size_t stage = 0;
    for (int q = 0; q < p; q++)
        if (q != r) {
            stage += sent_as_is(&send[q]) ? 0 : block_bytes(&send[q]);
            stage += strided(&recv[q]) ? block_bytes(&recv[q]) : 0;
        }
    /* scratch: the caller's blocks (they must outlive a non-blocking call),
     * where each travels from / lands, then the staging bytes */
    dt__block2d *blk = dt__sched_scratch(s, (4 * (size_t)p + 2) * sizeof(dt__block2d) + stage);
    if (blk == NULL)
        return s->status;
    dt__block2d *snd = blk, *rcv = blk + p, *sst = blk + 2 * p, *rst = blk + 3 * p;
    dt__block2d *ride = blk + 4 * p; /* {dst, src} of my own block */
    char *buf = (char *)(blk + 4 * p + 2);
    size_t cursor = 0;
    for (int q = 0; q < p; q++) {
        snd[q] = send[q];
        rcv[q] = recv[q];
        sst[q] = (q == r || sent_as_is(&snd[q])) ? snd[q] : staged_at(&snd[q], buf, &cursor);
        rst[q] = (q == r || !strided(&rcv[q])) ? rcv[q] : staged_at(&rcv[q], buf, &cursor);
    }
    dt__sched_round(s, false); /* packing, before anything is sent */
    for (int q = 0; q < p; q++)
        if (q != r && sst[q].addr != snd[q].addr)
            dt__sched_copy2d(s, &sst[q], &snd[q], 0, 1);
    ride[0] = rcv[r];
    ride[1] = snd[r];
    const bool rides = p > 1 && strided(&sst[dt__mod(r + 1, p)]) && block_bytes(&snd[r]) > 0;
    dt__sched_round(s, false); /* my own block, while the first step moves */
    uint32_t n = rides ? 0 : self_slices(&snd[r]);
    for (uint32_t part = 0; part < n; part++)
        dt__sched_copy2d(s, &rcv[r], &snd[r], part, n);
    dt__sched_round(s, true); /* every transfer at once: see above */
    for (int k = 1; k < p; k++) {
        int to = dt__mod(r + k, p), from = dt__mod(r - k, p);
        if (strided(&sst[to]))
            dt__sched_send2d(s, &sst[to], k == 1 && rides ? ride : NULL, to);
        else
            dt__sched_send(s, (const void *)(uintptr_t)sst[to].addr, block_bytes(&sst[to]), to);
        dt__sched_recv(s, (void *)(uintptr_t)rst[from].addr, block_bytes(&rst[from]), from);
    }
    dt__sched_round(s, false);
    for (int q = 0; q < p; q++)
        if (q != r && rst[q].addr != rcv[q].addr)
            dt__sched_copy2d(s, &rcv[q], &rst[q], 0, 1);
    return s->status;
}
