/*
 * Markers for the direct TCP path (ucx_tcp.h): why a mismatched call fails
 * at once there too. Both ends pick the path by their own message size, so
 * when the two sizes straddle DT_TCP_DIRECT_MIN_KB (a bug in the caller) one
 * message would go where its receiver does not look, and the receive would
 * wait for DT_TIMEOUT_S. So every direct message also sends an empty UCX
 * message with the same tag, and every direct receive posts a 0-byte UCX
 * receive for it. UCX matches these in posting order with the pair's other
 * messages of that (comm, tag), as it matches any two messages, so:
 *   - sizes that agree: marker meets marker receive, bytes meet bytes;
 *   - the sender direct, the receiver on UCX: its receive gets 0 bytes
 *     where it expected more (and the direct message it announced is taken
 *     out of the stream when it is here);
 *   - the sender on UCX, the receiver direct: the marker receive gets bytes
 *     (truncated).
 * Either way the receive fails at once naming the peer's world rank and the
 * comm aborts, which tells the other ranks, as on UCX alone. A 0-byte
 * point-to-point message goes direct (ucx_tcp.c), or a marker would pass
 * for it; a collective's 0-byte messages stay on UCX: a collective whose
 * sizes differ differs in its check bits, which a marker carries too.
 * Cost: one empty UCX message per direct message of 64 KiB or more.
 */
#include "comm/ucx/ucx_tcp.h"

#include <stdlib.h>

#include "core/error.h"

dt_status dt__ucx_tcp_mark_send(dt_comm *c, int wp, uint32_t tag)
{
    void *m = NULL;
    DT_CHECK(dt__ucx_isend_ucx(c, NULL, 0, wp, tag, &m));
    if (m != NULL) /* nobody waits for it: freed when UCX is done with it */
        dt__ucx_req_cancel(c, m);
    return DT_OK;
}

dt_status dt__ucx_tcp_mark_post(dt_comm *c, dt_ucx_req *r)
{
    dt_ucx_comm *uc = c->impl;
    r->mark = dt__ucx_recv_post(uc->shared, uc->id, NULL, 0, r->world_peer, r->tag);
    if (r->mark == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "ucx: no memory for a receive request");
    return DT_OK;
}

/* The marker receive @p m of direct receive @p r finished: the error when it
 * met a message instead of a marker, or another failure. */
static dt_status marker_status(dt_comm *c, const dt_ucx_req *r, const dt_ucx_req *m)
{
    if (m->status == UCS_ERR_MESSAGE_TRUNCATED || (m->status == UCS_OK && m->got > 0))
        return DT_ERR(
            DT_ERR_INVALID_ARG,
            "ucx: receive from world rank %d: expected %zu bytes, the peer sent a message "
            "under %zu bytes (it took UCX, not the direct TCP path of "
            "DT_TCP_DIRECT_MIN_KB; mismatched sizes or collective arguments?)",
            r->world_peer, r->expect, ((dt_ucx_comm *)c->impl)->shared->tcp->min_bytes);
    return dt__ucx_req_status(c, m); /* a lost peer, the check bits, ... */
}

dt_status dt__ucx_tcp_marked(dt_comm *c, dt_ucx_req *r)
{
    dt_ucx_req *m = r->mark;
    if (!m->done) {
        if (!r->done || r->status == UCS_OK)
            return DT_IN_PROGRESS;
        /* the message itself failed (truncated, a lost peer): say so now */
        dt__ucx_req_cancel(c, m);
        r->mark = NULL;
        return DT_OK;
    }
    r->mark = NULL;
    dt_status st = marker_status(c, r, m);
    dt__ucx_req_put(m);
    if (st != DT_OK)
        dt__ucx_tcp_cancel(c, r);
    return st;
}

/* Take the first early direct message of (@p comm, @p tag) out of @p p's
 * stream: its length, or SIZE_MAX when none is here (yet). */
static size_t take_announced(dt_tcp_peer *p, uint16_t comm, uint32_t tag)
{
    for (dt_tcp_early **ep = &p->eq; *ep != NULL; ep = &(*ep)->next) {
        dt_tcp_early *e = *ep;
        if (e->h.comm != comm || (e->h.tag ^ tag) & dt__tag_match_mask(tag))
            continue;
        *ep = e->next;
        if (p->eq_end == &e->next)
            p->eq_end = ep;
        if (p->ecur == e)
            p->ecur = NULL; /* the rest of it goes to the sink */
        size_t len = e->h.len;
        free(e->data);
        free(e);
        return len;
    }
    return SIZE_MAX;
}

dt_status dt__ucx_tcp_marker_met(dt_comm *c, const dt_ucx_req *r)
{
    dt_ucx_shared *sh = ((dt_ucx_comm *)c->impl)->shared;
    size_t len = take_announced(dt__tcp_peer_of(sh, r->world_peer), r->comm, r->tag);
    if (len != SIZE_MAX)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "ucx: receive from world rank %d got %zu bytes (on the direct TCP path), "
                      "expected %zu (mismatched collective arguments?)",
                      r->world_peer, len, r->expect);
    return DT_ERR(
        DT_ERR_INVALID_ARG,
        "ucx: receive from world rank %d got 0 bytes or a direct TCP message of %zu bytes "
        "or more (DT_TCP_DIRECT_MIN_KB), expected %zu (mismatched collective arguments?)",
        r->world_peer, sh->tcp->min_bytes, r->expect);
}
