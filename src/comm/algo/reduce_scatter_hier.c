/*
 * Hierarchical reduce-scatter for a comm spanning hosts of L ranks each:
 * (1) inside each host a direct reduce-scatter by local index: local rank l
 * gets, summed over its host, the H blocks of the ranks with local index l
 * (one per host); (2) it sends each host's block to that host's rank of
 * index l and folds the H partials of its own block in host order. Each host
 * sends (H-1)/H of the vector over the network (flat ring: up to (p-1)/p
 * per crossing link). Hosts of different sizes (or one host) fall back to
 * the ring.
 */
#include "comm/comm_impl.h"

#include "comm/algo/algo_util.h"
#include "comm/algo/hier_topo.h"

#include <stdlib.h>

#include "core/error.h"

typedef struct rs_plan {
    const dt__hier *h;
    const size_t *counts, *off; /* off: packed offsets of the blocks in send */
    size_t *col;                /* col[g]: offset of host g's block in a column slot */
    size_t colsz;               /* elements of my column: the H blocks of local index l */
} rs_plan;

/* 1: local reduce-scatter by column; leaves my column's host sums in slot 0. */
static void intra(dt__sched *s, const rs_plan *pl, const char *send, char *slot)
{
    const dt__hier *h = pl->h;
    const size_t esz = dt_dtype_size(s->dtype);
    dt__sched_round(s, false);
    for (int j = 0; j < h->nlocal; j++) {
        int peer = dt__hier_rank(h, h->host, j);
        for (int g = 0; g < h->nhosts; g++) {
            int theirs = dt__hier_rank(h, g, j), mine = dt__hier_rank(h, g, h->local);
            char *dst = slot + ((size_t)j * pl->colsz + pl->col[g]) * esz;
            if (j == h->local)
                dt__sched_copy(s, dst, send + pl->off[mine] * esz, pl->counts[mine] * esz);
            else if (pl->counts[theirs] > 0)
                dt__sched_send(s, send + pl->off[theirs] * esz, pl->counts[theirs] * esz, peer);
            if (j != h->local && pl->counts[mine] > 0)
                dt__sched_recv(s, dst, pl->counts[mine] * esz, peer);
        }
    }
    for (int j = 1; j < h->nlocal; j++)
        dt__sched_reduce(s, slot, slot + (size_t)j * pl->colsz * esz, pl->colsz);
}

/* 2: across hosts; partials of my block arrive in @p part, folded into recv. */
static void inter(dt__sched *s, const rs_plan *pl, const char *slot, char *part, char *recv)
{
    const dt__hier *h = pl->h;
    const size_t esz = dt_dtype_size(s->dtype);
    const size_t n = pl->counts[dt__hier_rank(h, h->host, h->local)];
    dt__sched_round(s, false);
    for (int g = 0; g < h->nhosts; g++) {
        int q = dt__hier_rank(h, g, h->local);
        if (g == h->host)
            continue;
        if (pl->counts[q] > 0)
            dt__sched_send(s, slot + pl->col[g] * esz, pl->counts[q] * esz, q);
        if (n > 0)
            dt__sched_recv(s, part + (size_t)g * n * esz, n * esz, q);
    }
    for (int g = 0; g < h->nhosts; g++) {
        const char *src = g == h->host ? slot + pl->col[g] * esz : part + (size_t)g * n * esz;
        if (g == 0)
            dt__sched_copy(s, recv, src, n * esz);
        else
            dt__sched_reduce(s, recv, src, n);
    }
    if (s->divisor > 1)
        dt__sched_scale(s, recv, n, s->divisor);
}

static dt_status build(dt__sched *s, const dt__hier *h, const void *send, void *recv,
                       const size_t *counts, size_t *off)
{
    const int p = h->nhosts * h->nlocal;
    size_t o = 0;
    for (int i = 0; i < p; i++) {
        off[i] = o;
        o += counts[i];
    }
    rs_plan pl = {.h = h, .counts = counts, .off = off, .col = off + p, .colsz = 0};
    for (int g = 0; g < h->nhosts; g++) {
        pl.col[g] = pl.colsz;
        pl.colsz += counts[dt__hier_rank(h, g, h->local)];
    }
    const size_t esz = dt_dtype_size(s->dtype);
    const size_t n = counts[dt__hier_rank(h, h->host, h->local)];
    char *slot =
        dt__sched_scratch(s, ((size_t)h->nlocal * pl.colsz + (size_t)h->nhosts * n) * esz + 1);
    if (slot == NULL)
        return s->status;
    intra(s, &pl, send, slot);
    inter(s, &pl, slot, slot + (size_t)h->nlocal * pl.colsz * esz, recv);
    return s->status;
}

dt_status dt__algo_reduce_scatterv_hier(dt_comm *c, const void *send, void *recv,
                                        const size_t *counts, dt__sched *s)
{
    dt__hier h;
    if (!dt__hier_topo(c, &h))
        return dt__algo_reduce_scatterv_ring(c, send, recv, counts, s);
    size_t *off = malloc((size_t)(c->size + h.nhosts) * sizeof(*off));
    dt_status st = off != NULL ? build(s, &h, send, recv, counts, off)
                               : DT_ERR(DT_ERR_NO_MEMORY, "reduce_scatter_hier: no memory");
    free(off);
    dt__hier_free(&h);
    return st;
}
