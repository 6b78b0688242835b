/*
 * The host layout of a comm, for the hierarchical algorithms
 * (allreduce_hier.c, reduce_scatter_hier.c, allgather_hier.c): hosts in the
 * order of their lowest comm rank, ranks of a host in comm rank order.
 */
#ifndef DT_COMM_ALGO_HIER_TOPO_H
#define DT_COMM_ALGO_HIER_TOPO_H

#include <stdbool.h>

#include "comm/comm_impl.h"

typedef struct dt__hier {
    int nhosts, nlocal; /* hosts; ranks on each (the same on every host) */
    int host, local;    /* this rank's host and its index there */
    int *rank_at;       /* [host * nlocal + local] -> comm rank (malloc'ed) */
} dt__hier;

/*
 * Fill @p h for @p c and return true when the hierarchical algorithms apply:
 * more than one host, more than one rank on each, the same number on every
 * host. Otherwise (or out of memory) false, and @p h holds nothing to free.
 */
bool dt__hier_topo(dt_comm *c, dt__hier *h);
void dt__hier_free(dt__hier *h);
/* Whether dt__hier_topo would return true (the dispatcher's question). */
bool dt__hier_applies(dt_comm *c);

/* Comm rank of local index @p l on host @p g. */
static inline int dt__hier_rank(const dt__hier *h, int g, int l)
{
    return h->rank_at[g * h->nlocal + l];
}

/* Host id of comm rank @p rank (0 when the backend does not say). */
static inline int dt__comm_host_of(const dt_comm *c, int rank)
{
    return c->ops->host_of != NULL ? c->ops->host_of(c, rank) : 0;
}

#endif
