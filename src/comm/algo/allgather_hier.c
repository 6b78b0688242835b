/*
 * Hierarchical all-gather for a comm spanning hosts of L ranks each: (1) the
 * H ranks with local index l, one per host, swap their blocks over the
 * network, so each host sends its L blocks once to each other host (flat
 * ring: up to p-1 blocks over a crossing link); (2) inside each host, local
 * rank l hands the H blocks it holds to the other local ranks (shared
 * memory). Hosts of different sizes (or one host) fall back to the ring.
 */
#include "comm/comm_impl.h"

#include "comm/algo/algo_util.h"
#include "comm/algo/hier_topo.h"

static void build(dt__sched *s, const dt__hier *h, const char *send, char *out,
                  const size_t *counts, const size_t *displs)
{
    const size_t esz = dt_dtype_size(s->dtype);
    const int me = dt__hier_rank(h, h->host, h->local);
    /* 1: across hosts, with the ranks of my local index */
    dt__sched_round(s, false);
    for (int g = 0; g < h->nhosts; g++) {
        int q = dt__hier_rank(h, g, h->local);
        if (g == h->host)
            continue;
        if (counts[me] > 0)
            dt__sched_send(s, send, counts[me] * esz, q);
        if (counts[q] > 0)
            dt__sched_recv(s, out + displs[q] * esz, counts[q] * esz, q);
    }
    if (out + displs[me] * esz != send)
        dt__sched_copy(s, out + displs[me] * esz, send, counts[me] * esz);
    /* 2: inside the host, my column of H blocks for theirs */
    dt__sched_round(s, false);
    for (int j = 0; j < h->nlocal; j++) {
        int peer = dt__hier_rank(h, h->host, j);
        if (j == h->local)
            continue;
        for (int g = 0; g < h->nhosts; g++) {
            int mine = dt__hier_rank(h, g, h->local), theirs = dt__hier_rank(h, g, j);
            if (counts[mine] > 0)
                dt__sched_send(s, out + displs[mine] * esz, counts[mine] * esz, peer);
            if (counts[theirs] > 0)
                dt__sched_recv(s, out + displs[theirs] * esz, counts[theirs] * esz, peer);
        }
    }
}

dt_status dt__algo_allgatherv_hier(dt_comm *c, const void *send, void *recv, const size_t *counts,
                                   const size_t *displs, dt__sched *s)
{
    dt__hier h;
    if (!dt__hier_topo(c, &h))
        return dt__algo_allgatherv_ring(c, send, recv, counts, displs, s);
    build(s, &h, send, recv, counts, displs);
    dt__hier_free(&h);
    return s->status;
}
