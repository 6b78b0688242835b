/*
 * Which comm ranks share a host (the backend's host_of: UCX compares
 * hostname, boot id and namespaces at bootstrap), arranged as a hosts x
 * local-ranks table. Every rank computes the same table from the same ids.
 */
#include "comm/algo/hier_topo.h"

#include <stdlib.h>

void dt__hier_free(dt__hier *h)
{
    free(h->rank_at);
    h->rank_at = NULL;
}

/* hid[i]: comm rank i's host as an index 0..nhosts-1 in order of first
 * appearance; returns nhosts, or -1 when the hosts differ in size. */
static int host_indices(dt_comm *c, int *hid, int *nlocal)
{
    const int p = c->size;
    /* zeroed, one spare: cnt[0] is defined even for an empty comm */
    int *ids = calloc((size_t)p * 2 + 1, sizeof(*ids)), *cnt = ids + p, nh = 0;
    if (ids == NULL)
        return -1;
    for (int i = 0; i < p; i++) {
        int id = dt__comm_host_of(c, i), k = 0;
        while (k < nh && ids[k] != id)
            k++;
        if (k == nh) {
            ids[nh] = id;
            cnt[nh++] = 0;
        }
        hid[i] = k;
        cnt[k]++;
    }
    *nlocal = cnt[0];
    for (int k = 1; k < nh; k++)
        if (cnt[k] != cnt[0])
            nh = -1;
    free(ids);
    return nh;
}

bool dt__hier_topo(dt_comm *c, dt__hier *h)
{
    const int p = c->size;
    h->rank_at = NULL;
    int *hid = malloc((size_t)p * sizeof(*hid)), nlocal = 0;
    if (hid == NULL)
        return false;
    int nh = host_indices(c, hid, &nlocal);
    if (nh < 2 || nlocal < 2 || (h->rank_at = malloc((size_t)p * sizeof(int))) == NULL) {
        free(hid);
        return false;
    }
    h->nhosts = nh;
    h->nlocal = nlocal;
    int *fill = calloc((size_t)nh, sizeof(*fill));
    if (fill == NULL) {
        free(hid);
        dt__hier_free(h);
        return false;
    }
    for (int i = 0; i < p; i++) {
        int l = fill[hid[i]]++;
        h->rank_at[hid[i] * nlocal + l] = i;
        if (i == c->rank) {
            h->host = hid[i];
            h->local = l;
        }
    }
    free(fill);
    free(hid);
    return true;
}

bool dt__hier_applies(dt_comm *c)
{
    if (c->ops->host_of == NULL || c->size < 4)
        return false;
    dt__hier h;
    bool yes = dt__hier_topo(c, &h);
    if (yes)
        dt__hier_free(&h);
    return yes;
}
