/*
 * UCX point-to-point for the generic algorithms: tagged non-blocking send and
 * receive, request testing, cancellation, and progress that spins briefly
 * (DT_SPIN_US, or the automatic policy in ucx_impl.h: yielding the core
 * while it is contended) and then sleeps on the worker's event fd, so
 * oversubscribed ranks give their core away instead of burning it.
 */
#include "comm/ucx/ucx_impl.h"
#include "comm/sched.h"
#include "comm/ucx/ucx_tcp.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"

/* Polls between two clock reads while spinning: on a KVM guest a read (40-60
 * ns) costs more than a poll that finds nothing, and was ~10% of an 8 B
 * all-reduce's time when read after every poll. */
#define DT_UCX_POLLS_PER_CLOCK 16

/* Longest single sleep: keeps UCX's keepalive timers (peer failure) ticking. */
#define DT_UCX_MAX_SLEEP_S 0.1

uint64_t dt__ucx_tag(uint32_t comm_id, uint32_t tag, int src_world_rank)
{
    const uint64_t lmask = (1u << DT__TAG_BITS) - 1u, rmask = (1u << DT_UCX_RANK_BITS) - 1u;
    return ((uint64_t)(comm_id & 0xffffu) << 48) | ((uint64_t)(tag & lmask) << DT_UCX_RANK_BITS) |
           (uint64_t)((uint32_t)src_world_rank & rmask);
}

/* Request records come from a small per-worker free list. */
dt_ucx_req *dt__ucx_req_new(dt_ucx_shared *sh)
{
    dt_ucx_req *r = sh->free_reqs;
    if (r != NULL) {
        sh->free_reqs = r->next_free;
        sh->nfree_reqs--;
        memset(r, 0, sizeof(*r));
    } else {
        r = calloc(1, sizeof(*r));
        if (r == NULL)
            return NULL;
    }
    r->shared = sh;
    return r;
}

void dt__ucx_req_put(dt_ucx_req *r)
{
    dt_ucx_shared *sh = r->shared;
    if (sh == NULL || sh->nfree_reqs >= 64) {
        free(r);
        return;
    }
    r->next_free = sh->free_reqs;
    sh->free_reqs = r;
    sh->nfree_reqs++;
}

void dt__ucx_req_pool_clear(dt_ucx_shared *sh)
{
    while (sh->free_reqs != NULL) {
        dt_ucx_req *r = sh->free_reqs;
        sh->free_reqs = r->next_free;
        free(r);
    }
    sh->nfree_reqs = 0;
}

static void req_finish(dt_ucx_req *r, void *ucp_req, ucs_status_t status)
{
    r->done = true;
    r->status = status;
    if (ucp_req != NULL)
        ucp_request_free(ucp_req);
    r->ucp_req = NULL;
    if (r->orphaned) {
        dt_ucx_shared *sh = r->shared;
        for (int i = 0; sh != NULL && i < sh->orphans; i++) {
            if (sh->orphan_list[i] == r) {
                sh->orphan_list[i] = sh->orphan_list[--sh->orphans];
                break;
            }
        }
        dt__ucx_req_put(r);
    }
}

static void send_cb(void *request, ucs_status_t status, void *user_data)
{
    req_finish(user_data, request, status);
}

static void recv_cb(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                    void *user_data)
{
    dt_ucx_req *r = user_data;
    if (status == UCS_OK) {
        r->got = info->length;
        r->got_tag = (uint32_t)(info->sender_tag >> DT_UCX_RANK_BITS) & ((1u << DT__TAG_BITS) - 1u);
    }
    req_finish(r, request, status);
}

static const char *peer_why(const dt_ucx_peer *p)
{
    return p->local ? "its process exited" : ucs_status_string(p->why);
}

/* Map a completed request's status to ours, recording the message. */
dt_status dt__ucx_req_status(dt_comm *c, const dt_ucx_req *r)
{
    dt_ucx_comm *uc = c->impl;
    dt_ucx_peer *peer = &uc->shared->peers[r->world_peer];
    const char *dir = r->is_recv ? "receive from" : "send to";
    if (r->status == UCS_OK) {
        if (r->is_recv && r->got_tag != r->tag) /* only check bits can differ */
            return dt__comm_check_mismatch(r->world_peer, r->tag, r->got_tag);
        if (r->is_recv && r->got != r->expect && r->got == 0 && !r->tcp &&
            dt__ucx_tcp_reaches(uc->shared, r->world_peer))
            return dt__ucx_tcp_marker_met(c, r); /* a direct message's, not a message */
        if (r->is_recv && r->got != r->expect)
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "ucx: receive from world rank %d got %zu bytes, "
                          "expected %zu (mismatched collective arguments?)",
                          r->world_peer, r->got, r->expect);
        return DT_OK;
    }
    if (peer->dead || r->status == UCS_ERR_CONNECTION_RESET ||
        r->status == UCS_ERR_ENDPOINT_TIMEOUT || r->status == UCS_ERR_UNREACHABLE)
        return DT_ERR(DT_ERR_PEER_LOST, "ucx: %s world rank %d failed: peer lost (%s)", dir,
                      r->world_peer, peer->dead ? peer_why(peer) : ucs_status_string(r->status));
    if (r->status == UCS_ERR_MESSAGE_TRUNCATED)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "ucx: receive from world rank %d: message longer "
                      "than the %zu bytes expected",
                      r->world_peer, r->expect);
    return DT_ERR(DT_ERR_BACKEND, "ucx: %s world rank %d failed: %s", dir, r->world_peer,
                  ucs_status_string(r->status));
}

/* A request that finished inside the post call: NULL, or the error. */
static dt_status post_result(dt_comm *c, dt_ucx_req *r, ucs_status_ptr_t sp, void **out)
{
    if (sp == NULL) {
        dt__ucx_req_put(r);
        *out = NULL;
        return DT_OK;
    }
    if (UCS_PTR_IS_ERR(sp)) {
        r->done = true;
        r->status = UCS_PTR_STATUS(sp);
        dt_status st = dt__ucx_req_status(c, r);
        dt__ucx_req_put(r);
        return st;
    }
    if (r->done) { /* the callback already ran inside the call */
        dt_status st = dt__ucx_req_status(c, r);
        dt__ucx_req_put(r);
        *out = NULL;
        return st;
    }
    r->ucp_req = sp;
    *out = r;
    return DT_OK;
}

dt_status dt__ucx_isend(dt_comm *c, const void *buf, size_t bytes, int peer, uint32_t tag,
                        void **req)
{
    dt_ucx_comm *uc = c->impl;
    dt_ucx_shared *sh = uc->shared;
    int wp = uc->members[peer];
    if (sh->peers[wp].dead)
        return DT_ERR(DT_ERR_PEER_LOST, "ucx: send to world rank %d: peer lost (%s)", wp,
                      peer_why(&sh->peers[wp]));
    if (dt__ucx_shm_carries(sh, wp))
        return dt__ucx_shm_isend(c, buf, bytes, wp, tag, req);
    /* abort notices stay on UCX, where their wildcard receive waits */
    if (uc->id != DT_UCX_NOTICE_ID && dt__ucx_tcp_carries(sh, wp, bytes, tag))
        return dt__ucx_tcp_isend(c, buf, bytes, wp, tag, req);
    return dt__ucx_isend_ucx(c, buf, bytes, wp, tag, req);
}

dt_status dt__ucx_isend_ucx(dt_comm *c, const void *buf, size_t bytes, int wp, uint32_t tag,
                            void **req)
{
    dt_ucx_comm *uc = c->impl;
    dt_ucx_shared *sh = uc->shared;
    dt_ucx_req *r = dt__ucx_req_new(sh);
    if (r == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "ucx: no memory for a send request");
    r->world_peer = wp;
    ucp_request_param_t prm = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = send_cb,
        .user_data = r,
    };
    ucs_status_ptr_t sp = ucp_tag_send_nbx(sh->peers[wp].ep, buf, bytes,
                                           dt__ucx_tag(uc->id, tag, sh->world_rank), &prm);
    return post_result(c, r, sp, req);
}

/* Streamed through the pair's shared-memory window, each piece gathered from
 * the rows as it enters (ucx_shm_bulk.c). */
dt_status dt__ucx_isend2d(dt_comm *c, const dt__block2d *src, const dt__block2d *ride, int peer,
                          uint32_t tag, void **req)
{
    dt_ucx_comm *uc = c->impl;
    int wp = uc->members[peer];
    size_t bytes = (size_t)(src->rows * src->row_bytes);
    if (!dt__ucx_shm_carries(uc->shared, wp) || bytes <= DT_UCX_SHM_MAX_BYTES)
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "ucx: a 2-D send of %zu bytes to world rank %d needs shared memory and more "
                      "than %d bytes",
                      bytes, wp, DT_UCX_SHM_MAX_BYTES);
    DT_CHECK(dt__ucx_isend(c, NULL, bytes, peer, tag, req));
    ((dt_ucx_req *)*req)->src2d = src; /* a bulk send: nothing moved before the CTS */
    ((dt_ucx_req *)*req)->ride = ride;
    return DT_OK;
}

dt_status dt__ucx_irecv(dt_comm *c, void *buf, size_t bytes, int peer, uint32_t tag, void **req)
{
    dt_ucx_comm *uc = c->impl;
    dt_ucx_shared *sh = uc->shared;
    int wp = uc->members[peer];
    if (dt__ucx_shm_carries(sh, wp))
        return dt__ucx_shm_irecv(c, buf, bytes, wp, tag, req);
    if (dt__ucx_tcp_carries(sh, wp, bytes, tag))
        return dt__ucx_tcp_irecv(c, buf, bytes, wp, tag, req);
    dt_ucx_req *r = dt__ucx_recv_post(sh, uc->id, buf, bytes, wp, tag);
    if (r == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "ucx: no memory for a receive request");
    *req = NULL;
    if (!r->done) {
        *req = r;
        return DT_OK;
    }
    dt_status st = dt__ucx_req_status(c, r);
    dt__ucx_req_put(r);
    return st;
}

dt_ucx_req *dt__ucx_recv_post(dt_ucx_shared *sh, uint32_t comm_id, void *buf, size_t bytes, int wp,
                              uint32_t tag)
{
    dt_ucx_req *r = dt__ucx_req_new(sh);
    if (r == NULL)
        return NULL;
    r->world_peer = wp;
    r->is_recv = true;
    r->expect = bytes;
    r->comm = (uint16_t)comm_id;
    r->tag = r->got_tag = tag;
    /* a collective's check bits take no part in matching (comm_impl.h) */
    uint64_t mask =
        ~((uint64_t)(~dt__tag_match_mask(tag) & ((1u << DT__TAG_BITS) - 1u)) << DT_UCX_RANK_BITS);
    /* always through the callback: it reports the received length */
    ucp_request_param_t prm = {
        .op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
        .cb.recv = recv_cb,
        .user_data = r,
    };
    ucs_status_ptr_t sp =
        ucp_tag_recv_nbx(sh->worker, buf, bytes, dt__ucx_tag(comm_id, tag, wp), mask, &prm);
    if (UCS_PTR_IS_ERR(sp)) {
        r->done = true;
        r->status = UCS_PTR_STATUS(sp);
    } else if (sp == NULL) { /* not with NO_IMM_CMPL; as a completed receive */
        r->done = true;
        r->got = bytes;
    } else if (!r->done) { /* the callback may have run inside the call */
        r->ucp_req = sp;
    }
    return r;
}

/* The schedule's reduce, run here: pieces of a bulk message as they land
 * (ucx_shm_bulk.c), anything else once it is whole. */
dt_status dt__ucx_irecv_reduce(dt_comm *c, void *buf, size_t bytes, int peer, uint32_t tag,
                               const void *fold, dt_dtype dtype, dt_reduce_op op, void **req)
{
    DT_CHECK(dt__ucx_irecv(c, buf, bytes, peer, tag, req));
    if (*req == NULL) { /* it was here already */
        dt__reduce(buf, fold, bytes / dt_dtype_size(dtype), dtype, op);
        return DT_OK;
    }
    dt_ucx_req *r = *req;
    r->buf = buf;
    r->fold = fold;
    r->fold_dtype = dtype;
    r->fold_op = op;
    return DT_OK;
}

void dt__ucx_fold(dt_ucx_req *r, size_t upto)
{
    if (r->fold == NULL || upto <= r->folded)
        return;
    dt__reduce((char *)r->buf + r->folded, (const char *)r->fold + r->folded,
               (upto - r->folded) / dt_dtype_size(r->fold_dtype), r->fold_dtype, r->fold_op);
    r->folded = upto;
}

dt_status dt__ucx_req_test(dt_comm *c, void *req)
{
    dt_ucx_req *r = req;
    dt_ucx_comm *uc = c->impl;
    if (r->mark != NULL) { /* a direct receive: its message and its marker (ucx_tcp.c) */
        dt_status ms = dt__ucx_tcp_marked(c, r);
        if (ms != DT_OK && ms != DT_IN_PROGRESS)
            return ms; /* a mismatch: r is released */
    }
    if (!r->done || r->mark != NULL) {
        dt_ucx_peer *peer = &uc->shared->peers[r->world_peer];
        if (!peer->dead)
            return DT_IN_PROGRESS;
        /* a receive is not tied to an endpoint, so UCX never fails it: we do */
        dt_status st =
            DT_ERR(DT_ERR_PEER_LOST, "ucx: %s world rank %d: peer lost (%s)",
                   r->is_recv ? "receive from" : "send to", r->world_peer, peer_why(peer));
        dt__ucx_req_cancel(c, r);
        return st;
    }
    dt_status st = dt__ucx_req_status(c, r);
    if (st == DT_OK && r->is_recv)
        dt__ucx_fold(r, r->expect);
    dt__ucx_req_put(r);
    return st;
}

void dt__ucx_req_cancel(dt_comm *c, void *req)
{
    dt_ucx_req *r = req;
    if (r == NULL)
        return;
    dt_ucx_comm *uc = c->impl;
    if (r->shm) { /* ours alone: unqueue it */
        dt__ucx_shm_cancel(uc->shared, r);
        return;
    }
    if (r->tcp) {
        dt__ucx_tcp_cancel(c, r);
        return;
    }
    if (r->done) {
        dt__ucx_req_put(r);
        return;
    }
    dt_ucx_shared *sh = uc->shared;
    if (sh->orphans == sh->orphan_cap) {
        int cap = sh->orphan_cap ? 2 * sh->orphan_cap : 16;
        dt_ucx_req **l = realloc(sh->orphan_list, (size_t)cap * sizeof(*l));
        if (l == NULL) { /* cannot track it: leak it rather than free it under UCX */
            r->orphaned = true;
            r->shared = NULL;
            return;
        }
        sh->orphan_list = l;
        sh->orphan_cap = cap;
    }
    sh->orphan_list[sh->orphans++] = r;
    r->orphaned = true; /* the callback (on cancel or completion) frees it */
    if (r->is_recv)
        ucp_request_cancel(uc->shared->worker, r->ucp_req);
}

void dt__ucx_defer_free(dt_comm *c, void *p, size_t block)
{
    dt_ucx_shared *sh = ((dt_ucx_comm *)c->impl)->shared;
    if (sh->n_grave == sh->grave_cap) {
        int cap = sh->grave_cap ? 2 * sh->grave_cap : 8;
        void **g = realloc(sh->grave, (size_t)cap * sizeof(*g));
        if (g != NULL)
            sh->grave = g;
        size_t *b = g != NULL ? realloc(sh->grave_block, (size_t)cap * sizeof(*b)) : NULL;
        if (b == NULL)
            return; /* cannot track it: leak it rather than free it under UCX */
        sh->grave_block = b;
        sh->grave_cap = cap;
    }
    sh->grave[sh->n_grave] = p;
    sh->grave_block[sh->n_grave++] = block;
}

/* Automatic budget: an event that came after @p waited s of this wait. */
static void adapt_spin(dt_ucx_shared *sh, double waited, bool arrived)
{
    if (!sh->spin_auto)
        return;
    if (arrived && waited < sh->spin_max_s) {
        double grown = 2 * (sh->spin_s > waited ? sh->spin_s : waited);
        sh->spin_s = grown < sh->spin_max_s ? grown : sh->spin_max_s;
    } else {
        sh->spin_s /= 2;
        if (sh->spin_s < sh->spin_min_s)
            sh->spin_s = sh->spin_min_s;
    }
}

/* One look at both transports: how many events. */
static int poll_once(dt_ucx_shared *sh)
{
    int n =
        dt__ucx_shm_progress(sh) + dt__ucx_tcp_progress(sh) + (int)ucp_worker_progress(sh->worker);
    if (sh->notice_arrived)
        dt__ucx_notice_take(sh);
    return n;
}

/* Up to @p k looks until one finds events: how many. */
static int poll_burst(dt_ucx_shared *sh, int k)
{
    int n = 0;
    for (int i = 0; i < k && n == 0; i++)
        n = poll_once(sh);
    return n;
}

dt_status dt__ucx_progress(dt_comm *c, double wait_s)
{
    dt_ucx_comm *uc = c->impl;
    dt_ucx_shared *sh = uc->shared;
    /* a wait that may spin first polls a burst before any clock read; a test
     * (or a rank that must not spin: oversubscribed) looks once */
    if (poll_burst(sh, wait_s > 0 && sh->spin_s > 0 ? DT_UCX_POLLS_PER_CLOCK : 1) != 0)
        return DT_OK;
    double t0 = dt__clock_now(); /* one clock read for the checks below */
    dt__ucx_check_liveness(sh, false, t0);
    if (wait_s <= 0)
        return DT_OK;
    /* Poll, then poll yielding the core, then sleep (policy: ucx_impl.h). */
    dt__ucx_update_spin(sh, t0);
    bool sock = dt__ucx_tcp_busy(sh);
    for (double t = 0; !sock && t < sh->spin_s; t = dt__clock_now() - t0)
        if (poll_burst(sh, DT_UCX_POLLS_PER_CLOCK) != 0)
            return DT_OK;
    double t1 = dt__clock_now();
    for (double t = 0; !sock && t < sh->yield_s; t = dt__clock_now() - t1) {
        /* caught while yielding: no budget change. Growing it here was measured
         * (2 ranks on 2 loaded cores) to make 8 B all-reduce 0.6 -> 120 us: when
         * the peer shares our core, plain polling only delays it. */
        if (poll_once(sh) != 0)
            return DT_OK;
        sched_yield();
    }
    if (!dt__ucx_shm_sleep_begin(sh))
        return DT_OK; /* a ring message came in while announcing the sleep */
    ucs_status_t us = ucp_worker_arm(sh->worker);
    if (us != UCS_OK)
        dt__ucx_shm_sleep_end(sh, false);
    if (us == UCS_ERR_BUSY)
        return DT_OK; /* events arrived meanwhile: the caller progresses again */
    if (us != UCS_OK)
        return DT_ERR(DT_ERR_BACKEND, "ucx: ucp_worker_arm failed: %s", ucs_status_string(us));
    double left = wait_s - (dt__clock_now() - t0);
    if (left > DT_UCX_MAX_SLEEP_S)
        left = DT_UCX_MAX_SLEEP_S;
    /* UCX's event fd, the rings' wake-up socket, the direct sockets */
    struct pollfd two[2];
    int npfd;
    struct pollfd *pfd = dt__ucx_tcp_pollset(sh, two, &npfd);
    pfd[0] = (struct pollfd){.fd = sh->efd, .events = POLLIN};
    pfd[1] = (struct pollfd){.fd = dt__ucx_shm_wake_fd(sh), .events = POLLIN};
    int ms = left > 0 ? (int)(left * 1000.0) + 1 : 0;
    int rc = poll(pfd, (nfds_t)npfd, ms); /* a negative fd (no rings) is skipped */
    dt__ucx_shm_sleep_end(sh, rc > 0 && (pfd[1].revents & POLLIN) != 0);
    dt__ucx_tcp_polled(sh, rc);
    if (rc < 0 && errno != EINTR)
        return DT_ERR(DT_ERR_SYSTEM, "ucx: poll on the worker event fd failed: %s",
                      strerror(errno));
    adapt_spin(sh, dt__clock_now() - t0, rc > 0);
    return DT_OK;
}
