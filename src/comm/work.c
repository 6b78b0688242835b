/*
 * Work handles: running a collective schedule round by round on the
 * backend's point-to-point, test/wait/release, and deadlines. Waiting never
 * busy-loops for long: the backend's progress() spins briefly and then
 * sleeps on the transport's event fd. A work that fails aborts its comm
 * family (comm_abort.c); a work of an aborted family fails at its next
 * step without waiting for anything.
 */
#include "comm/comm_impl.h"
#include "comm/work_impl.h"

#include <stdlib.h>
#include <string.h>

#include "comm/copy_stream.h"
#include "core/copy.h"
#include "core/error.h"
#include "core/log.h"

/* Abandon the requests in flight. The scratch they may still write into goes
 * to the transport's deferred free instead of back to the allocator. */
static void cancel_pending(dt_work *w)
{
    if (w->reqs == NULL)
        return;
    bool any = false;
    for (size_t i = 0; i < w->sched.nops; i++) {
        if (w->reqs[i] != NULL) {
            w->comm->ops->req_cancel(w->comm, w->reqs[i]);
            w->reqs[i] = NULL;
            any = true;
        }
    }
    if (any && w->sched.scratch != NULL && w->comm->ops->defer_free != NULL) {
        w->comm->ops->defer_free(w->comm, w->sched.scratch, w->sched.scratch_block);
        w->sched.scratch = NULL;
    }
}

/* Cancel what is posted and abort the family: the error it returns (this
 * one, or the family's first) is the work's for good. */
static dt_status fail(dt_work *w, dt_status st)
{
    cancel_pending(w);
    w->status = dt__comm_fail(w->comm, w->what, dt__check_explain(w, st));
    return w->status;
}

static bool family_aborted(const dt_work *w)
{
    return w->comm->family != NULL && w->comm->family->status != DT_OK;
}

static dt_status post_round(dt_work *w, size_t r)
{
    const dt__round *rd = &w->sched.rounds[r];
    dt_comm *c = w->comm;
    /* receives first: a message that arrives finds its buffer (no unexpected copy) */
    for (size_t i = rd->first; i < rd->first + rd->count; i++) {
        dt__op *op = &w->sched.ops[i];
        if (op->kind != DT__OP_RECV)
            continue;
        if (op->src != NULL && c->ops->irecv_reduce != NULL)
            DT_CHECK(c->ops->irecv_reduce(c, op->dst, op->n, op->peer, w->tag, op->src,
                                          w->sched.dtype, w->sched.op, &w->reqs[i]));
        else
            DT_CHECK(c->ops->irecv(c, op->dst, op->n, op->peer, w->tag, &w->reqs[i]));
    }
    for (size_t i = rd->first; i < rd->first + rd->count; i++) {
        dt__op *op = &w->sched.ops[i];
        if (op->kind == DT__OP_SEND2D)
            DT_CHECK(c->ops->isend2d(c, op->src, op->dst, op->peer, w->tag, &w->reqs[i]));
        if (op->kind == DT__OP_SEND)
            DT_CHECK(c->ops->isend(c, op->src, op->n, op->peer, w->tag, &w->reqs[i]));
    }
    return DT_OK;
}

/* DT_OK when every transfer of round r finished. */
static dt_status test_round(dt_work *w, size_t r)
{
    const dt__round *rd = &w->sched.rounds[r];
    dt_status result = DT_OK;
    for (size_t i = rd->first; i < rd->first + rd->count; i++) {
        if (w->reqs[i] == NULL)
            continue;
        dt_status st = w->comm->ops->req_test(w->comm, w->reqs[i]);
        if (st == DT_IN_PROGRESS) {
            result = DT_IN_PROGRESS;
            continue;
        }
        w->reqs[i] = NULL; /* finished or failed: the backend freed it */
        if (st != DT_OK)
            return st;
    }
    return result;
}

/* The first failure among the ranks' status words of a DT__OP_CHECK. */
static dt_status check_status(const dt_work *w, const dt__op *op)
{
    const uint64_t *st = op->src;
    if (st[w->comm->rank] != DT_OK) /* mine: its message is already recorded */
        return (dt_status)st[w->comm->rank];
    for (size_t q = 0; q < op->n; q++)
        if (st[q] != DT_OK)
            return DT_ERR((dt_status)st[q], "%s: rank %zu of %d failed with %s", w->what, q,
                          w->comm->size, dt_status_str((dt_status)st[q]));
    return DT_OK;
}

/* Slices of a large local copy, between which the transport progresses. */
#define DT_COPY_SLICE (256 * 1024)

/* memmove(dst, src, n), progressing the transport between slices of a large
 * copy: transfers posted `early` (streamed through shared memory by both
 * sides) keep moving while this rank copies its own block (2 ranks, 8 MiB
 * all-gather: ~1.3x). */
static void copy_progressing(dt_comm *c, void *dst, const void *src, size_t n)
{
    const char *s = src;
    char *d = dst;
    if (n <= 2 * DT_COPY_SLICE || !dt__bytes_disjoint(dst, src, n)) {
        dt__move_bytes(dst, src, n);
        return;
    }
    const bool stream = n >= DT_COPY_STREAM_MIN_BYTES;
    for (size_t off = 0; off < n; off += DT_COPY_SLICE) {
        size_t len = n - off < DT_COPY_SLICE ? n - off : DT_COPY_SLICE;
        if (stream)
            dt__copy_stream(d + off, s + off, len);
        else
            dt__copy_bytes(d + off, s + off, len);
        (void)c->ops->progress(c, 0); /* a transport failure shows in the transfers */
    }
    if (stream)
        dt__copy_stream_fence();
}

static dt_status run_local(dt_work *w, size_t r)
{
    const dt__sched *s = &w->sched;
    const dt__round *rd = &s->rounds[r];
    for (size_t i = rd->first; i < rd->first + rd->count; i++) {
        const dt__op *op = &s->ops[i];
        dt_status st;
        switch (op->kind) {
        case DT__OP_RECV: /* a recv_reduce the backend could not fold */
            if (op->src != NULL && w->comm->ops->irecv_reduce == NULL)
                dt__reduce(op->dst, op->src, op->n / dt_dtype_size(s->dtype), s->dtype, s->op);
            break;
        case DT__OP_REDUCE:
            if (op->aux != NULL)
                dt__reduce3(op->dst, op->aux, op->src, op->n, s->dtype, s->op);
            else
                dt__reduce(op->dst, op->src, op->n, s->dtype, s->op);
            break;
        case DT__OP_COPY:
            copy_progressing(w->comm, op->dst, op->src, op->n);
            break;
        case DT__OP_SCALE:
            dt__reduce_divide(op->dst, op->n, s->dtype, op->peer);
            break;
        case DT__OP_COPY2D: {
            uint64_t off, len;
            dt__block2d_part(op->src, op->part, op->nparts, &off, &len);
            dt__block2d_copy(op->dst, op->src, off, len);
            if (op->nparts > 1) /* between slices, transfers posted early keep moving */
                (void)w->comm->ops->progress(w->comm, 0);
            break;
        }
        case DT__OP_PEER_COPY:
            st = dt__peer_copy_run(w->comm, w->what, op);
            if (st != DT_OK && *(uint64_t *)op->aux == DT_OK)
                *(uint64_t *)op->aux = (uint64_t)st; /* shared in the next round */
            break;
        case DT__OP_CHECK:
            DT_CHECK(check_status(w, op));
            break;
        default:
            break;
        }
    }
    return DT_OK;
}

/* Advance as far as possible without blocking. */
static dt_status advance(dt_work *w)
{
    if (family_aborted(w)) { /* cancelled at once; status and message of the first failure */
        if (w->status == DT_IN_PROGRESS)
            return fail(w, DT_ERR_BACKEND);
        if (w->status != DT_OK)
            return dt__comm_aborted(w->what, w->comm);
    }
    if (w->native_test != NULL) {
        if (w->status == DT_IN_PROGRESS) {
            dt_status st = w->native_test(w);
            if (st != DT_OK && st != DT_IN_PROGRESS)
                return fail(w, st);
            w->status = st;
        }
        return w->status;
    }
    while (w->status == DT_IN_PROGRESS) {
        if (w->round == w->sched.nrounds) {
            /* an abort that came in while it ran: its peers gave up on it */
            if (family_aborted(w))
                return fail(w, DT_ERR_BACKEND);
            w->status = DT_OK;
            break;
        }
        if (w->posted == w->round) {
            dt_status st = post_round(w, w->round);
            w->posted++;
            if (st != DT_OK)
                return fail(w, st);
        }
        dt_status st = test_round(w, w->round);
        if (st == DT_IN_PROGRESS)
            return st;
        if (st != DT_OK)
            return fail(w, st);
        size_t next = w->round + 1;
        if (next < w->sched.nrounds && w->posted == next && w->sched.rounds[next].early) {
            st = post_round(w, next);
            w->posted++;
            if (st != DT_OK)
                return fail(w, st);
        }
        st = run_local(w, w->round);
        if (st != DT_OK)
            return fail(w, st);
        w->round = next;
    }
    return w->status;
}

/* The first unfinished transfer, for the timeout message. */
static const dt__op *first_pending(const dt_work *w)
{
    if (w->reqs == NULL)
        return NULL;
    for (size_t i = 0; i < w->sched.nops; i++)
        if (w->reqs[i] != NULL)
            return &w->sched.ops[i];
    return NULL;
}

/* Request slots every work block has room for (most collectives need fewer). */
#define DT_WORK_MIN_REQS 16

/*
 * The work and its @p nreqs request slots in one block: the comm's spare
 * block when it is big enough (a blocking collective then allocates
 * nothing), else a new one.
 */
static dt_work *work_alloc(dt_comm *comm, const char *what, size_t nreqs)
{
    dt_work *w = comm->spare_work;
    if (w != NULL && w->cap_reqs >= nreqs) {
        comm->spare_work = NULL;
    } else {
        size_t cap = nreqs > DT_WORK_MIN_REQS ? nreqs : DT_WORK_MIN_REQS;
        w = malloc(sizeof(*w) + cap * sizeof(void *));
        if (w == NULL)
            return NULL;
        w->cap_reqs = cap;
    }
    w->comm = comm;
    w->what = what;
    w->status = DT_IN_PROGRESS;
    w->timeout_s = comm->timeout_s;
    w->tag = 0;
    dt__sched_init(&w->sched, DT_DTYPE_F32, DT_REDUCE_OP_SUM);
    w->round = w->posted = 0;
    w->reqs = (void **)(w + 1);
    memset(w->reqs, 0, nreqs * sizeof(void *));
    w->native_test = NULL;
    w->native_free = NULL;
    w->native = NULL;
    return w;
}

void dt__work_drop_spare(dt_comm *comm)
{
    free(comm->spare_work);
    comm->spare_work = NULL;
}

dt_status dt__work_start(dt_comm *comm, const char *what, dt__sched *s, dt_work **out)
{
    dt_status st = s->status;
    if (st != DT_OK) /* this rank cannot take part: its peers must not wait for it */
        st = dt__comm_fail(comm, what, st);
    else
        st = dt__comm_alive(what, comm);
    if (st != DT_OK) {
        dt__sched_free(s);
        return st;
    }
    size_t nops = s->nops;
    dt_work *w = work_alloc(comm, what, nops);
    if (w == NULL) {
        dt__sched_free(s);
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory for a work handle (%zu requests)", what,
                      nops);
    }
    dt__sched_move(&w->sched, s);
    if (w->sched.p2p) {
        w->tag = DT__TAG_P2P | (w->sched.p2p_tag & DT__TAG_VALUE_MASK);
    } else { /* the call's check rides in every message (comm_check.h) */
        w->tag = dt__comm_next_tag(comm);
        w->desc = comm->desc;
    }
    advance(w); /* post the first round now: non-blocking means already moving */
    *out = w;
    return DT_OK;
}

dt_status dt__work_native(dt_comm *comm, const char *what, dt_status (*test)(dt_work *),
                          void (*free_fn)(dt_work *), void *native, dt_work **out)
{
    dt_work *w = work_alloc(comm, what, 0);
    if (w == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory for a work handle", what);
    w->reqs = NULL;
    w->native_test = test;
    w->native_free = free_fn;
    w->native = native;
    *out = w;
    return DT_OK;
}

/* Progress @p w until @p until (dt__clock_coarse() time): its result, or
 * DT_IN_PROGRESS when it is still running then. */
static dt_status progress_until(dt_work *w, double until)
{
    for (;;) {
        double left = until - dt__clock_coarse();
        if (left <= 0)
            return DT_IN_PROGRESS;
        dt_status st = w->comm->ops->progress(w->comm, left);
        if (st != DT_OK)
            return fail(w, st);
        st = advance(w);
        if (st != DT_IN_PROGRESS)
            return st;
    }
}

/*
 * The timeout of @p w, waiting for @p op (NULL: unknown), naming world
 * ranks. Every rank of a hung job times out at about the same moment, most
 * of them waiting for a rank that only waits, like them, for the one that
 * hung: a peer seen stopped (same host) is named as the cause.
 */
static dt_status timeout_error(dt_work *w, const dt__op *op, double timeout_s)
{
    if (op == NULL)
        return dt__comm_timeout_error(w->comm, w->what, -1, false, 0, timeout_s);
    return dt__comm_timeout_error(w->comm, w->what, op->peer, op->kind == DT__OP_RECV, op->n,
                                  timeout_s);
}

dt_status dt__comm_timeout_error(dt_comm *c, const char *what, int rank, bool recv, size_t n,
                                 double timeout_s)
{
    if (rank < 0)
        return DT_ERR(DT_ERR_TIMEOUT, "%s: timed out after %.3g s (comm rank %d of %d)", what,
                      timeout_s, c->rank, c->size);
    int peer = dt__comm_world_rank(c, rank), pid = 0;
    int stopped = c->ops->stopped_peer != NULL ? c->ops->stopped_peer(c, peer, &pid) : -1;
    char why[96] = "";
    if (stopped == peer)
        snprintf(why, sizeof(why), "; it is stopped (pid %d)", pid);
    else if (stopped >= 0)
        snprintf(why, sizeof(why), "; world rank %d is stopped (pid %d)", stopped, pid);
    return DT_ERR(DT_ERR_TIMEOUT,
                  "%s: timed out after %.3g s waiting for world rank %d (%s of %zu bytes; its "
                  "rank %d, this rank %d of a %d-rank comm)%s",
                  what, timeout_s, peer, recv ? "recv" : "send", n, rank, c->rank, c->size, why);
}

/* Wait for @p w until @p deadline (dt__clock_coarse() time); @p timeout_s for
 * the message. */
static dt_status finish_by(dt_work *w, double deadline, double timeout_s)
{
    dt_status st = advance(w);
    if (st != DT_IN_PROGRESS)
        return st;
    st = progress_until(w, deadline);
    if (st != DT_IN_PROGRESS)
        return st;
    return fail(w, timeout_error(w, first_pending(w), timeout_s));
}

dt_status dt__work_finish(dt_work *w, double timeout_s)
{
    dt_status st = advance(w);
    if (st != DT_IN_PROGRESS) /* finished at once (eager sends): no clock read */
        return st;
    if (timeout_s < 0)
        timeout_s = w->timeout_s;
    return finish_by(w, dt__clock_coarse() + timeout_s, timeout_s);
}

dt_status dt_work_wait_all(dt_work *const *works, size_t n, double timeout_s)
{
    if (n > 0 && works == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_work_wait_all: argument 'works' is NULL");
    double deadline = -1;
    dt_status first = DT_OK;
    for (size_t i = 0; i < n; i++) {
        dt_work *w = works[i];
        if (w == NULL)
            continue;
        dt_status st = advance(w);
        if (st == DT_IN_PROGRESS) { /* one deadline for the whole batch, from the first wait */
            double t = timeout_s < 0 ? w->timeout_s : timeout_s;
            if (deadline < 0)
                deadline = dt__clock_coarse() + t;
            st = finish_by(w, deadline, t);
        }
        if (first == DT_OK && st != DT_OK)
            first = st; /* the rest fail at once: the failure aborted their family */
    }
    if (first != DT_OK) /* its message, not a later work's */
        for (size_t i = 0; i < n; i++)
            if (works[i] != NULL && works[i]->status == first && family_aborted(works[i]))
                return dt__comm_aborted("dt_work_wait_all", works[i]->comm);
    return first;
}

dt_status dt_work_test(dt_work *work, bool *done)
{
    DT_ARG_NOT_NULL(work);
    DT_ARG_NOT_NULL(done);
    dt_status st = advance(work);
    if (st == DT_IN_PROGRESS) {
        /* one non-blocking progress pass so polling alone moves data */
        dt_status pst = work->comm->ops->progress(work->comm, 0);
        if (pst != DT_OK)
            return fail(work, pst);
        st = advance(work);
    }
    *done = (st != DT_IN_PROGRESS);
    return (st == DT_IN_PROGRESS) ? DT_OK : st;
}

dt_status dt_work_wait(dt_work *work, double timeout_s)
{
    DT_ARG_NOT_NULL(work);
    return dt__work_finish(work, timeout_s);
}

void dt_work_release(dt_work *work)
{
    if (work == NULL)
        return;
    /* a failure aborts the family (fail): the next call on it reports it */
    if (work->status == DT_IN_PROGRESS)
        (void)dt__work_finish(work, -1);
    cancel_pending(work);
    if (work->native_free != NULL)
        work->native_free(work);
    dt__sched_free(&work->sched);
    dt_comm *c = work->comm;
    if (c->spare_work == NULL) /* keep one block for the next collective */
        c->spare_work = work;
    else if (c->spare_work->cap_reqs < work->cap_reqs) {
        free(c->spare_work);
        c->spare_work = work;
    } else
        free(work); /* the request slots live in the same block */
}
