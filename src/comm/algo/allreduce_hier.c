/*
 * Hierarchical all-reduce for a comm spanning hosts of L ranks each (as
 * NCCL's and Open MPI's two-level algorithms): the vector is cut in L
 * blocks; (1) inside each host a direct reduce-scatter leaves local rank l
 * with block l summed over its host (shared memory); (2) the H ranks with
 * local index l, one per host, all-reduce block l over the network (on two
 * hosts a swap, on more a direct reduce-scatter + all-gather), so each host
 * sends 2(H-1)/H of the vector (flat ring over 2 hosts x 2 ranks: 1.5x that
 * over each crossing link); (3) inside each host a direct all-gather. On two
 * hosts the steps are pipelined over chunks. Every block is folded in local
 * then host order by identical steps on every rank holding it, so all ranks
 * end bit-identical. Hosts of different sizes (or one host) fall back to
 * the ring.
 */
#include "comm/comm_impl.h"

#include "comm/algo/algo_util.h"
#include "comm/algo/hier_topo.h"

#include "core/config.h"

/* recv's block = fold of n slots (slot i at slot + i * bytes) in order. */
static void fold(dt__sched *s, char *dst, const char *slot, size_t bytes, int n, size_t count)
{
    dt__sched_copy(s, dst, slot, bytes);
    for (int i = 1; i < n; i++)
        dt__sched_reduce(s, dst, slot + (size_t)i * bytes, count);
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
    if (len > 0)
        inter_rs_ag(s, h, blk, len, slot);
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

/* Elements of chunk @p c of a block of @p blen elements cut in @p seg. */
static size_t chunk_len(size_t blen, size_t seg, size_t c)
{
    size_t a = c * seg;
    return a >= blen ? 0 : (blen - a < seg ? blen - a : seg);
}

/* The three steps on chunk c of every block, in rounds t = c, c+1, c+2. */
typedef struct pipe {
    const dt__hier *h;
    const char *send;
    char *recv, *rs_slot; /* rs_slot: the local ranks' copies of a chunk */
    char *x_slot;         /* two chunks: the other host's copy, or host 1's partial */
    size_t count, seg, esz;
} pipe;

static char *chunk_at(const pipe *pp, char *base, int j, size_t c)
{
    return base + (dt__block_off(pp->count, pp->h->nlocal, j) + c * pp->seg) * pp->esz;
}

/* Chunk c's half of x_slot: step 1 of chunk c+1 runs beside step 2 of c. */
static char *x_at(const pipe *pp, size_t c)
{
    return pp->x_slot + (c & 1) * pp->seg * pp->esz;
}

/* Where step 1 leaves its sum of chunk c: host 0 in the block itself, host 1
 * beside it, so that step 2 folds the other host's copy into the block as it
 * lands (received first: host order) with no copies on either host. */
static char *rs_dst(const pipe *pp, size_t c)
{
    return pp->h->host == 0 ? chunk_at(pp, pp->recv, pp->h->local, c) : x_at(pp, c);
}

static bool overlap(const char *a, const char *b, size_t n)
{
    return n > 0 && a < b + n && b < a + n;
}

/*
 * Step 1 of chunk c: local rank j's chunk c of block l, folded in local
 * order straight into rs_dst: local rank 0's copy is received there (local
 * rank 1 folds its own in as it lands; local rank 0 sums its own and local
 * rank 1's in one pass), the rest into rs slots. In place on host 0 (rs_dst
 * is my own copy) the slots take every copy, as unpipelined.
 */
static void pipe_rs(dt__sched *s, const pipe *pp, size_t c, bool fold_now)
{
    const dt__hier *h = pp->h;
    const int L = h->nlocal, l = h->local;
    const size_t n = chunk_len(dt__block_len(pp->count, L, l), pp->seg, c), b = n * pp->esz;
    char *send = (char *)pp->send, *own = chunk_at(pp, send, l, c), *dst = rs_dst(pp, c);
    const bool slots = overlap(dst, own, b); /* in place */
    if (fold_now) {
        if (slots) {
            dt__sched_copy(s, pp->rs_slot + (size_t)l * b, own, b);
            fold(s, dst, pp->rs_slot, b, L, n);
            return;
        }
        int j = l == 1 ? 2 : 1; /* operand 0 (local rank 1's: and 1) is in dst */
        if (l == 0 && L > 1) {  /* mine and local rank 1's in one pass */
            dt__sched_reduce3(s, dst, own, pp->rs_slot + b, n);
            j = 2;
        } else if (l == 0) {
            dt__sched_copy(s, dst, own, b);
        }
        for (; j < L; j++)
            dt__sched_reduce(s, dst, j == l ? own : pp->rs_slot + (size_t)j * b, n);
        return;
    }
    for (int j = 0; j < L; j++) {
        size_t nj = chunk_len(dt__block_len(pp->count, L, j), pp->seg, c);
        int peer = dt__hier_rank(h, h->host, j);
        if (j == l)
            continue;
        if (nj > 0)
            dt__sched_send(s, chunk_at(pp, send, j, c), nj * pp->esz, peer);
        if (n == 0)
            continue;
        if (slots || j > 0)
            dt__sched_recv(s, pp->rs_slot + (size_t)j * b, b, peer);
        else if (l == 1)
            dt__sched_recv_reduce(s, dst, own, b, peer);
        else
            dt__sched_recv(s, dst, b, peer);
    }
}

/* Step 2 of chunk c (two hosts): swap partials with the other host; both
 * fold host 0's then host 1's (host 1 as host 1's partial lands). */
static void pipe_x(dt__sched *s, const pipe *pp, size_t c, bool fold_now)
{
    const dt__hier *h = pp->h;
    const size_t n = chunk_len(dt__block_len(pp->count, h->nlocal, h->local), pp->seg, c);
    const size_t b = n * pp->esz;
    char *blk = chunk_at(pp, pp->recv, h->local, c), *x = x_at(pp, c);
    const int peer = dt__hier_rank(h, 1 - h->host, h->local);
    if (n == 0)
        return;
    if (!fold_now) {
        dt__sched_send(s, h->host == 0 ? blk : x, b, peer);
        if (h->host == 0)
            dt__sched_recv(s, x, b, peer);
        else
            dt__sched_recv_reduce(s, blk, x, b, peer);
        return;
    }
    if (h->host == 0)
        dt__sched_reduce(s, blk, x, n);
    if (s->divisor > 1)
        dt__sched_scale(s, blk, n, s->divisor);
}

/* Step 3 of chunk c: local all-gather. */
static void pipe_ag(dt__sched *s, const pipe *pp, size_t c)
{
    const dt__hier *h = pp->h;
    const int L = h->nlocal, l = h->local;
    const size_t n = chunk_len(dt__block_len(pp->count, L, l), pp->seg, c);
    for (int j = 0; j < L; j++) {
        size_t nj = chunk_len(dt__block_len(pp->count, L, j), pp->seg, c);
        if (j == l)
            continue;
        if (n > 0)
            dt__sched_send(s, chunk_at(pp, pp->recv, l, c), n * pp->esz,
                           dt__hier_rank(h, h->host, j));
        if (nj > 0)
            dt__sched_recv(s, chunk_at(pp, pp->recv, j, c), nj * pp->esz,
                           dt__hier_rank(h, h->host, j));
    }
}

/*
 * Two hosts: the steps pipelined over chunks of DT_HIER_SEGMENT_KB. Round t
 * carries step 1 of chunk t, step 2 of chunk t-1 and step 3 of chunk t-2
 * (disjoint parts of the buffers), so shared-memory copies overlap the
 * network and a rank's time is the slowest step's, not their sum. The folds
 * are the unpipelined ones, chunk by chunk: the same bits; but received
 * straight where they are summed, 3-4 fewer passes over a chunk per rank
 * than copying every operand into slots first.
 */
static void build_pipelined(dt__sched *s, const dt__hier *h, const void *send, void *recv,
                            size_t count, char *slot, size_t seg)
{
    pipe pp = {.h = h, .send = send, .recv = recv, .rs_slot = slot, .count = count, .seg = seg};
    pp.esz = dt_dtype_size(s->dtype);
    pp.x_slot = slot + (size_t)h->nlocal * seg * pp.esz; /* two chunks */
    const size_t len = dt__block_len(count, h->nlocal, 0);
    const size_t nch = (len + seg - 1) / seg;
    for (size_t t = 0; t < nch + 2; t++) {
        dt__sched_round(s, false);
        if (t < nch)
            pipe_rs(s, &pp, t, false);
        if (t >= 1 && t <= nch)
            pipe_x(s, &pp, t - 1, false);
        if (t >= 2)
            pipe_ag(s, &pp, t - 2);
        if (t < nch)
            pipe_rs(s, &pp, t, true);
        if (t >= 1 && t <= nch)
            pipe_x(s, &pp, t - 1, true);
    }
}

dt_status dt__algo_allreduce_hier(dt_comm *c, const void *send, void *recv, size_t count,
                                  dt__sched *s)
{
    dt__hier h;
    if (!dt__hier_topo(c, &h))
        return dt__algo_allreduce_ring(c, send, recv, count, s);
    const size_t esz = dt_dtype_size(s->dtype), len = dt__block_len(count, h.nlocal, 0);
    const size_t seg_bytes = (size_t)dt__config_int("DT_HIER_SEGMENT_KB") * 1024;
    if (h.nhosts == 2 && len > 0 && seg_bytes > 0) {
        size_t seg = seg_bytes / esz < len ? (seg_bytes / esz ? seg_bytes / esz : 1) : len;
        char *slot = dt__sched_scratch(s, (size_t)(h.nlocal + 2) * seg * esz + 1);
        if (slot != NULL)
            build_pipelined(s, &h, send, recv, count, slot, seg);
    } else {
        const int nslot = h.nlocal > h.nhosts ? h.nlocal : h.nhosts;
        char *slot = dt__sched_scratch(s, (size_t)nslot * len * esz + 1);
        if (slot != NULL)
            build(s, &h, send, recv, count, slot);
    }
    dt__hier_free(&h);
    return s->status;
}
