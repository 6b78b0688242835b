/*
 * Segmented direct reduce-scatter ("fold", issue 21): rank r receives piece j
 * of block r from each of the p-1 others and folds them with its own piece
 * while they are in the cache, then goes on with piece j+1. Each rank reads
 * its input from memory once and writes its block once; the ring instead
 * makes p-1 passes over a block-sized partial, each reading two blocks and
 * writing one, which on 3-4 ranks is what bounds it at ~0.6x the all-reduce
 * (bench/comm/results_onehost.md). Pieces are small enough that the p-1 received ones
 * stay in L2; round j+1's transfers run while round j folds (two sets of
 * slots). Every block is folded by its owner alone, in a fixed order (the
 * piece of rank r-1 first, then r-2, ...), so the result is deterministic.
 */
#include "comm/comm_impl.h"

#include "comm/algo/algo_util.h"

#include <stdlib.h>

#include "core/error.h"

/* Largest piece per peer and round (or the ring's segment, if smaller): the
 * p-1 pieces of a round and the next round's stay in a 1 MiB L2 on 4 ranks. */
#define DT_FOLD_SEGMENT_BYTES (256 * 1024)

/* Elements [j * seg, ...) of a block of @p n: how many there are. */
static size_t piece_len(size_t n, size_t seg, size_t j)
{
    size_t first = j * seg;
    return first >= n ? 0 : (n - first < seg ? n - first : seg);
}

/* Round j's folds into @p dst (piece j of block r): the pieces in @p slot,
 * slot k - 1 from rank r - k; slot 0 already folded unless in place. */
static void fold_round(dt__sched *s, char *dst, const char *slot, size_t slot_bytes, int p,
                       size_t n, bool inplace)
{
    for (int k = inplace ? 1 : 2; k < p; k++)
        dt__sched_reduce(s, dst, slot + (size_t)(k - 1) * slot_bytes, n);
    if (s->divisor > 1)
        dt__sched_scale(s, dst, n, s->divisor);
}

dt_status dt__algo_reduce_scatterv_fold(dt_comm *c, const void *send, void *recv,
                                        const size_t *counts, dt__sched *s)
{
    const int p = c->size, r = c->rank;
    const size_t esz = dt_dtype_size(s->dtype);
    size_t maxblk = 0;
    for (int i = 0; i < p; i++)
        maxblk = counts[i] > maxblk ? counts[i] : maxblk;
    size_t segb = dt__algo_ring_segment_bytes();
    size_t seg = (segb < DT_FOLD_SEGMENT_BYTES ? segb : DT_FOLD_SEGMENT_BYTES) / esz;
    if (seg == 0)
        seg = 1;
    const size_t nseg = maxblk > 0 ? (maxblk + seg - 1) / seg : 1;
    const size_t slot_bytes = (maxblk < seg ? maxblk : seg) * esz; /* small blocks: small slots */
    const size_t set_bytes = (size_t)(p - 1) * slot_bytes;
    char *slots = dt__sched_scratch(s, 2 * set_bytes + esz);
    if (slots == NULL)
        return s->status;
    size_t off_small[64], *off = (p <= 64) ? off_small : malloc((size_t)p * sizeof(*off));
    if (off == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "reduce_scatter_fold: no memory for %d offsets", p);
    size_t o = 0, my_off = 0;
    for (int i = 0; i < p; i++) {
        off[i] = o * esz;
        my_off = (i == r) ? off[i] : my_off;
        o += counts[i];
    }
    const char *in = send;
    char *out = recv;
    const bool inplace = (out == in + my_off);
    for (size_t j = 0; j < nseg; j++) {
        dt__sched_round(s, j > 0);
        char *set = slots + (j % 2) * set_bytes, *dst = out + j * seg * esz;
        const size_t n = piece_len(counts[r], seg, j);
        for (int k = 1; k < p; k++) {
            int to = dt__mod(r + k, p), from = dt__mod(r - k, p);
            size_t sn = piece_len(counts[to], seg, j);
            if (sn > 0)
                dt__sched_send(s, in + off[to] + j * seg * esz, sn * esz, to);
            if (n == 0)
                continue;
            char *slot = set + (size_t)(k - 1) * slot_bytes;
            if (k == 1 && !inplace) /* the first piece lands folded with ours, in recv */
                dt__sched_recv_reduce(s, dst, in + my_off + j * seg * esz, n * esz, from);
            else
                dt__sched_recv(s, slot, n * esz, from);
        }
        if (n > 0)
            fold_round(s, dst, set, slot_bytes, p, n, inplace);
    }
    if (off != off_small)
        free(off);
    return s->status;
}
