/*
 * Point-to-point on NCCL. NCCL matches sends and receives between two ranks
 * in posting order only, and an ncclRecv alone on a stream blocks it until its
 * send arrives, so a ring of "receive from the left, send to the right" posted
 * as separate calls deadlocks. Here every send and receive goes into the
 * comm's open group (ncclGroupStart), which stays open until something needs
 * the operations to run: a test or wait of one of them, a collective, a
 * progress call, destroy. Then ncclGroupEnd launches them together, matching
 * peer operations included, and each op's completion event is recorded.
 * Tags: NCCL has none. A user tag is honoured by refusing what NCCL cannot
 * keep: a send (receive) with another tag while one to (from) the same peer
 * is still outstanding would match by order, not tag.
 */
#include <stdlib.h>

#include "comm/comm_impl.h"
#include "comm/nccl/nccl_impl.h"

/* The tag tables, made on the first user point-to-point. */
static dt_status tag_tables(dt_nccl_comm *c, const char *fn)
{
    for (int d = 0; d < 2; d++) {
        if (c->p2p_tag[d] == NULL)
            c->p2p_tag[d] = calloc((size_t)c->base.size, sizeof(uint32_t));
        if (c->p2p_count[d] == NULL)
            c->p2p_count[d] = calloc((size_t)c->base.size, sizeof(int));
        if (c->p2p_tag[d] == NULL || c->p2p_count[d] == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory for tag tables", fn);
    }
    return DT_OK;
}

/* A user tag NCCL can honour: none other outstanding with that peer that way. */
static dt_status check_tag(dt_nccl_comm *c, const char *fn, int dir, int peer, uint32_t tag)
{
    DT_CHECK(tag_tables(c, fn));
    if (c->p2p_count[dir][peer] > 0 && c->p2p_tag[dir][peer] != tag)
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "%s: tag %u %s rank %d while tag %u is outstanding: NCCL matches "
                      "point-to-point by order, not by tag (wait for it first)",
                      fn, tag & DT__TAG_VALUE_MASK, dir == 0 ? "to" : "from", peer,
                      c->p2p_tag[dir][peer] & DT__TAG_VALUE_MASK);
    c->p2p_tag[dir][peer] = tag;
    c->p2p_count[dir][peer]++;
    return DT_OK;
}

void dt__nccl_p2p_done(dt_nccl_op *op)
{
    dt_nccl_comm *c = op->comm;
    if (op->p2p_dir >= 0 && c->p2p_count[op->p2p_dir] != NULL)
        c->p2p_count[op->p2p_dir][op->p2p_peer]--;
    op->p2p_dir = -1;
}

void dt__nccl_p2p_free(dt_nccl_comm *c)
{
    for (int d = 0; d < 2; d++) {
        free(c->p2p_tag[d]);
        free(c->p2p_count[d]);
        c->p2p_tag[d] = NULL;
        c->p2p_count[d] = NULL;
    }
}

dt_status dt__nccl_p2p_post(dt_nccl_comm *c, const char *fn, bool is_send, void *buf, size_t bytes,
                            int peer, uint32_t tag, dt_nccl_op **out)
{
    int dir = is_send ? 0 : 1;
    bool user = (tag & DT__TAG_P2P) != 0;
    if (user)
        DT_CHECK(check_tag(c, fn, dir, peer, tag));
    dt_nccl_op *op = calloc(1, sizeof(*op));
    dt_status st = op != NULL ? DT_OK : DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory for a request", fn);
    if (st == DT_OK)
        st = dt__nccl_stage_in(c, fn, is_send ? buf : NULL, is_send ? bytes : 0,
                               is_send ? NULL : buf, is_send ? 0 : bytes, &op->stage);
    if (st != DT_OK) {
        free(op);
        if (user)
            c->p2p_count[dir][peer]--;
        return st;
    }
    op->comm = c;
    op->p2p_dir = user ? dir : -1;
    op->p2p_peer = peer;
    ncclResult_t r = ncclSuccess;
    if (!c->group_open) {
        r = ncclGroupStart();
        c->group_open = r == ncclSuccess;
    }
    if (r == ncclSuccess)
        r = is_send ? ncclSend(op->stage.send, bytes, ncclUint8, peer, c->nccl, c->stream)
                    : ncclRecv(op->stage.recv, bytes, ncclUint8, peer, c->nccl, c->stream);
    op->next = c->unflushed; /* flushed (and failed) together with its group */
    c->unflushed = op;
    *out = op;
    if (r != ncclSuccess)
        return dt__nccl_fail(
            c, dt__nccl_error(r, c, fn, is_send ? "ncclSend" : "ncclRecv", __FILE__, __LINE__));
    return DT_OK;
}

dt_status dt__nccl_flush(dt_nccl_comm *c, const char *fn)
{
    if (!c->group_open)
        return DT_OK;
    c->group_open = false;
    ncclResult_t r = ncclGroupEnd();
    if (r == ncclInProgress)
        r = dt__nccl_wait_ready(c->nccl, c->base.timeout_s);
    cudaError_t e = cudaSuccess;
    for (dt_nccl_op *op = c->unflushed; op != NULL && r == ncclSuccess && e == cudaSuccess;
         op = op->next) {
        e = cudaEventCreateWithFlags(&op->done, cudaEventDisableTiming);
        if (e == cudaSuccess)
            e = cudaEventRecord(op->done, c->stream);
    }
    c->unflushed = NULL;
    if (r != ncclSuccess)
        return dt__nccl_fail(c, dt__nccl_error(r, c, fn, "ncclGroupEnd", __FILE__, __LINE__));
    if (e != cudaSuccess)
        return dt__nccl_fail(c, DT_ERR(DT_ERR_BACKEND, "%s: recording completion events failed: %s",
                                       fn, cudaGetErrorString(e)));
    return DT_OK;
}
