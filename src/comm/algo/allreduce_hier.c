/*
 * Hierarchical all-reduce for a comm spanning hosts of L ranks each (as
 * NCCL's and Open MPI's two-level algorithms): the vector is cut in L
 * blocks; (1) inside each host a direct reduce-scatter leaves local rank l
 * with block l summed over its host (shared memory); (2) the H ranks with
 * local index l, one per host, all-reduce block l over the network, so each
 * host sends (H-1)/H x 2 of the vector at most (flat ring: up to 2(p-1)/p
 * per crossing link, and more crossings); (3) inside each host a direct
 * all-gather. Every block is folded in local then host order by identical
 * steps on every rank holding it, so all ranks end bit-identical. Hosts of
 * different sizes (or one host) fall back to the ring.
 */
#include "comm/comm_impl.h"

#include "comm/algo/algo_util.h"
#include "comm/algo/hier_topo.h"

/* recv's block = fold of n slots (slot i at slot + i * bytes) in order. */
static void fold(dt__sched *s, char *dst, const char *slot, size_t bytes, int n, size_t count)
{
    dt__sched_copy(s, dst, slot, bytes);
    for (int i = 1; i < n; i++)
        dt__sched_reduce(s, dst, slot + (size_t)i * bytes, count);
}

/* Step 2, two hosts: swap blocks with the peer, fold in host order. */
static void inter_swap(dt__sched *s, const dt__hier *h, char *blk, size_t len, char *slot)
{
    const size_t esz = dt_dtype_size(s->dtype), bytes = len * esz;
    dt__sched_round(s, false);
    for (int g = 0; g < h->nhosts; g++) {
        if (g == h->host)
            continue;
        dt__sched_send(s, blk, bytes, dt__hier_rank(h, g, h->local));
        dt__sched_recv(s, slot + (size_t)g * bytes, bytes, dt__hier_rank(h, g, h->local));
    }
    dt__sched_copy(s, slot + (size_t)h->host * bytes, blk, bytes);
    fold(s, blk, slot, bytes, h->nhosts, len);
}

/* Step 2, more hosts: direct reduce-scatter of the block in H pieces, then
 * direct all-gather of the pieces: 2(H-1)/H of the block per rank. */
static void inter_rs_ag(dt__sched *s, const dt__hier *h, char *blk, size_t len, char *slot)
{
    const size_t esz = dt_dtype_size(s->dtype);
    const int H = h->nhosts, me = h->host;
    const size_t moff = dt__block_off(len, H, me), mlen = dt__block_len(len, H, me);
    dt__sched_round(s, false);
    for (int g = 0; g < H; g++) {
        if (g == me)
            continue;
        int peer = dt__hier_rank(h, g, h->local);
        size_t off = dt__block_off(len, H, g), n = dt__block_len(len, H, g);
        if (n > 0)
            dt__sched_send(s, blk + off * esz, n * esz, peer);
        if (mlen > 0)
            dt__sched_recv(s, slot + (size_t)g * mlen * esz, mlen * esz, peer);
    }
    dt__sched_copy(s, slot + (size_t)me * mlen * esz, blk + moff * esz, mlen * esz);
    fold(s, blk + moff * esz, slot, mlen * esz, H, mlen);
    if (s->divisor > 1)
        dt__sched_scale(s, blk + moff * esz, mlen, s->divisor);
    dt__sched_round(s, false);
    for (int g = 0; g < H; g++) {
        if (g == me)
            continue;
        int peer = dt__hier_rank(h, g, h->local);
        size_t off = dt__block_off(len, H, g), n = dt__block_len(len, H, g);
        if (mlen > 0)
            dt__sched_send(s, blk + moff * esz, mlen * esz, peer);
        if (n > 0)
            dt__sched_recv(s, blk + off * esz, n * esz, peer);
    }
}

static void build(dt__sched *s, const dt__hier *h, const char *send, char *recv, size_t count,
                  char *slot)
{
    const size_t esz = dt_dtype_size(s->dtype);
    const int L = h->nlocal, l = h->local;
    const size_t off = dt__block_off(count, L, l), len = dt__block_len(count, L, l);
    char *blk = recv + off * esz;
    /* 1: local reduce-scatter; slot j holds local rank j's copy of block l */
    dt__sched_round(s, false);
    for (int j = 0; j < L; j++) {
        int peer = dt__hier_rank(h, h->host, j);
        size_t n = dt__block_len(count, L, j);
        if (j == l)
            continue;
        if (n > 0)
            dt__sched_send(s, send + dt__block_off(count, L, j) * esz, n * esz, peer);
        if (len > 0)
            dt__sched_recv(s, slot + (size_t)j * len * esz, len * esz, peer);
    }
    dt__sched_copy(s, slot + (size_t)l * len * esz, send + off * esz, len * esz);
    fold(s, blk, slot, len * esz, L, len);
    /* 2: across hosts, block l with the ranks of local index l */
    if (len > 0 && h->nhosts == 2) {
        inter_swap(s, h, blk, len, slot);
        if (s->divisor > 1)
            dt__sched_scale(s, blk, len, s->divisor);
    } else if (len > 0) {
        inter_rs_ag(s, h, blk, len, slot);
    }
    /* 3: local all-gather */
    dt__sched_round(s, false);
    for (int j = 0; j < L; j++) {
        int peer = dt__hier_rank(h, h->host, j);
        size_t n = dt__block_len(count, L, j);
        if (j == l)
            continue;
        if (len > 0)
            dt__sched_send(s, blk, len * esz, peer);
        if (n > 0)
            dt__sched_recv(s, recv + dt__block_off(count, L, j) * esz, n * esz, peer);
    }
}

dt_status dt__algo_allreduce_hier(dt_comm *c, const void *send, void *recv, size_t count,
                                  dt__sched *s)
{
    dt__hier h;
    if (!dt__hier_topo(c, &h))
        return dt__algo_allreduce_ring(c, send, recv, count, s);
    const size_t len = dt__block_len(count, h.nlocal, 0);
    const int nslot = h.nlocal > h.nhosts ? h.nlocal : h.nhosts;
    char *slot = dt__sched_scratch(s, (size_t)nslot * len * dt_dtype_size(s->dtype) + 1);
    if (slot != NULL)
        build(s, &h, send, recv, count, slot);
    dt__hier_free(&h);
    return s->status;
}
