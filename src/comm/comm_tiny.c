/*
 * Tiny collectives (issue 21; comm_tiny.h): messages of at most
 * DT_TINY_BYTES on 2..8 ranks that share memory, run blocking without the
 * schedule engine.
 *
 * Why: an 8 B collective through shared memory moves one cache line per
 * peer, and the engine around it (building the schedule, its scratch malloc,
 * the work block, round by round dispatch) cost about as much as the
 * transfers themselves: 1.5-1.8x Open MPI's latency on 2 ranks.
 *
 * Same messages as the normal path. At these sizes every algorithm the
 * normal path picks is one round in which each rank sends to and receives
 * from its peers: the direct algorithms on 3-8 ranks, and on 2 ranks
 * recursive doubling, the rings and the pairwise all-to-all are that one
 * exchange too. The tiny path posts exactly those messages with the tag the
 * work engine would use (dt__comm_next_tag), so a rank that runs the same
 * call as a dt_work, or a forced algorithm's wire-compatible choice, stays
 * in step, and the call's check bits still catch ranks that called
 * different collectives. It folds the same operands in the same order as
 * the algorithm it stands for (dt__reduce, the same kernels), so the bits
 * are the same.
 *
 * Waiting, deadlines and failures are the work engine's (work.c): the
 * backend's progress spins and then sleeps, DT_TIMEOUT_S names the world
 * rank waited for, and any failure aborts the comm family on every rank.
 * Received blocks of reductions land on this stack frame: cancelling a
 * receive is final on a comm whose members all talk through shared memory
 * (the rings' receives belong to this rank alone), which dt__comm_tiny_ready
 * requires.
 */
#include "comm/comm_tiny.h"

#include <string.h>

#include "comm/comm_check.h"
#include "comm/comm_dispatch.h"
#include "comm/sched.h"
#include "comm/work_impl.h"
#include "core/error.h"

/* One send or receive of a tiny collective. */
typedef struct tiny_xfer {
    void *req; /* NULL: done (or not posted) */
    void *buf;
    size_t n;
    int peer;
    bool recv;
} tiny_xfer;

typedef struct tiny_call {
    dt_comm *comm;
    const char *what;
    int n;
    tiny_xfer x[2 * (DT_TINY_MAX_RANKS - 1)];
} tiny_call;

bool dt__comm_tiny_ready(dt_comm *comm)
{
    if (!comm->algo_loaded && dt_comm_set_algo(comm, NULL) != DT_OK)
        return false;
    const dt_comm_ops *o = comm->ops;
    return comm->algo == NULL && o->allreduce == NULL && o->allgatherv == NULL &&
           o->reduce_scatterv == NULL && o->alltoallv == NULL && o->broadcast == NULL &&
           !dt__comm_check_detail() && dt__comm_p2p_shm(comm);
}

static void add(tiny_call *t, bool recv, const void *buf, size_t n, int peer)
{
    t->x[t->n++] = (tiny_xfer){NULL, (void *)buf, n, peer, recv};
}

static bool aborted(const dt_comm *c)
{
    return c->family != NULL && c->family->status != DT_OK;
}

/* Cancel what is in flight and abort the family: its error (this one, or
 * the family's first). */
static dt_status fail(tiny_call *t, dt_status st)
{
    dt_comm *c = t->comm;
    for (int i = 0; i < t->n; i++) {
        if (t->x[i].req != NULL)
            c->ops->req_cancel(c, t->x[i].req);
        t->x[i].req = NULL;
    }
    return dt__comm_fail(c, t->what, dt__check_explain_call(t->what, &c->desc, st));
}

/* DT_OK when every transfer finished, DT_IN_PROGRESS, or the first error. */
static dt_status test_all(tiny_call *t)
{
    dt_comm *c = t->comm;
    dt_status result = DT_OK;
    for (int i = 0; i < t->n; i++) {
        if (t->x[i].req == NULL)
            continue;
        dt_status st = c->ops->req_test(c, t->x[i].req);
        if (st == DT_IN_PROGRESS) {
            result = DT_IN_PROGRESS;
            continue;
        }
        t->x[i].req = NULL; /* finished or failed: the backend freed it */
        if (st != DT_OK)
            return st;
    }
    return result;
}

/* The timeout, naming the first transfer still waiting. */
static dt_status timeout(tiny_call *t)
{
    for (int i = 0; i < t->n; i++)
        if (t->x[i].req != NULL)
            return dt__comm_timeout_error(t->comm, t->what, t->x[i].peer, t->x[i].recv, t->x[i].n,
                                          t->comm->timeout_s);
    return dt__comm_timeout_error(t->comm, t->what, -1, false, 0, t->comm->timeout_s);
}

/* Progress until every transfer finished, the deadline passed or the family aborted. */
static dt_status wait_all(tiny_call *t)
{
    dt_comm *c = t->comm;
    const double deadline = dt__clock_coarse() + c->timeout_s;
    for (;;) {
        double left = deadline - dt__clock_coarse();
        if (left <= 0)
            return timeout(t);
        dt_status st = c->ops->progress(c, left);
        if (st != DT_OK)
            return st;
        if (aborted(c)) /* its peers gave up on this call: the family's error */
            return DT_ERR_BACKEND;
        st = test_all(t);
        if (st != DT_IN_PROGRESS)
            return st;
    }
}

/* Post the sends, then the receives (a message already in the ring is then
 * taken at once), and wait for all of them. */
static dt_status run(tiny_call *t)
{
    dt_comm *c = t->comm;
    const uint32_t tag = dt__comm_next_tag(c);
    dt_status st = DT_OK;
    for (int i = 0; i < t->n && st == DT_OK; i++)
        if (!t->x[i].recv)
            st = c->ops->isend(c, t->x[i].buf, t->x[i].n, t->x[i].peer, tag, &t->x[i].req);
    for (int i = 0; i < t->n && st == DT_OK; i++)
        if (t->x[i].recv)
            st = c->ops->irecv(c, t->x[i].buf, t->x[i].n, t->x[i].peer, tag, &t->x[i].req);
    if (st == DT_OK)
        st = test_all(t);
    if (st == DT_IN_PROGRESS)
        st = wait_all(t);
    if (st == DT_OK && aborted(c))
        st = DT_ERR_BACKEND; /* an abort came in while it ran */
    return st == DT_OK ? DT_OK : fail(t, st);
}

static int mod(int a, int p)
{
    return a < 0 ? a + p : (a >= p ? a - p : a);
}

/* recv = the p contributions of @p count elements folded in rank order
 * (mine at @p own, rank i's at slot + i * bytes): the direct algorithms' end. */
static void fold_slots(void *recv, const void *own, const char *slot, size_t bytes, int r, int p,
                       size_t count, dt_dtype dtype, dt_reduce_op op)
{
    const void *first = r == 0 ? own : slot;
    if (first != recv)
        memcpy(recv, first, bytes);
    for (int i = 1; i < p; i++)
        dt__reduce(recv, i == r ? own : slot + (size_t)i * bytes, count, dtype, op);
}

dt_status dt__tiny_allreduce(dt_comm *comm, const void *send, void *recv, size_t count,
                             dt_dtype dtype, dt_reduce_op op)
{
    const int p = comm->size, r = comm->rank;
    const size_t bytes = count * dt_dtype_size(dtype);
    const dt_reduce_op rop = op == DT_REDUCE_OP_AVG ? DT_REDUCE_OP_SUM : op;
    _Alignas(64) char slot[DT_TINY_MAX_RANKS * DT_TINY_BYTES];
    tiny_call t;
    t.comm = comm, t.what = "dt_comm_allreduce", t.n = 0;
    for (int k = 1; k < p; k++) {
        add(&t, false, send, bytes, mod(r + k, p));
        add(&t, true, slot + (size_t)mod(r - k, p) * bytes, bytes, mod(r - k, p));
    }
    DT_CHECK(run(&t));
    if (p == 2) { /* recursive doubling's one exchange: mine, then the peer's */
        if (recv != send)
            memcpy(recv, send, bytes);
        dt__reduce(recv, slot + (size_t)(1 - r) * bytes, count, dtype, rop);
    } else { /* algo/allreduce_direct.c */
        const char *own = send;
        if (send == recv) { /* recv is written before our own term is read */
            memcpy(slot + (size_t)r * bytes, send, bytes);
            own = slot + (size_t)r * bytes;
        }
        fold_slots(recv, own, slot, bytes, r, p, count, dtype, rop);
    }
    if (op == DT_REDUCE_OP_AVG)
        dt__reduce_divide(recv, count, dtype, p);
    return DT_OK;
}

dt_status dt__tiny_allgather(dt_comm *comm, const void *send, void *recv, size_t count,
                             dt_dtype dtype)
{
    const int p = comm->size, r = comm->rank;
    const size_t bytes = count * dt_dtype_size(dtype);
    char *out = recv;
    if (out + (size_t)r * bytes != send) /* first, as algo/allgather_direct.c */
        memmove(out + (size_t)r * bytes, send, bytes);
    tiny_call t;
    t.comm = comm, t.what = "dt_comm_allgather", t.n = 0;
    for (int k = 1; k < p; k++) {
        add(&t, false, send, bytes, mod(r + k, p));
        add(&t, true, out + (size_t)mod(r - k, p) * bytes, bytes, mod(r - k, p));
    }
    return run(&t);
}

dt_status dt__tiny_reduce_scatter(dt_comm *comm, const void *send, void *recv, size_t count,
                                  dt_dtype dtype, dt_reduce_op op)
{
    const int p = comm->size, r = comm->rank;
    const size_t mine = count * dt_dtype_size(dtype);
    const dt_reduce_op rop = op == DT_REDUCE_OP_AVG ? DT_REDUCE_OP_SUM : op;
    const char *in = send, *own = in + (size_t)r * mine;
    const bool inplace = own == (const char *)recv;
    _Alignas(64) char slot[DT_TINY_MAX_RANKS * DT_TINY_BYTES];
    tiny_call t;
    t.comm = comm, t.what = "dt_comm_reduce_scatter", t.n = 0;
    for (int k = 1; k < p; k++) {
        int to = mod(r + k, p), from = mod(r - k, p);
        add(&t, false, in + (size_t)to * mine, mine, to);
        /* 2 ranks, the ring: the peer's partial lands in recv, ours is folded in */
        void *dst = p == 2 && !inplace ? recv : slot + (size_t)from * mine;
        add(&t, true, dst, mine, from);
    }
    DT_CHECK(run(&t));
    if (p == 2) /* op(received, ours), or in place op(ours, received) */
        dt__reduce(recv, inplace ? slot + (size_t)(1 - r) * mine : own, count, dtype, rop);
    else { /* algo/reduce_scatter_direct.c */
        if (inplace) {
            memcpy(slot + (size_t)r * mine, own, mine);
            own = slot + (size_t)r * mine;
        }
        fold_slots(recv, own, slot, mine, r, p, count, dtype, rop);
    }
    if (op == DT_REDUCE_OP_AVG)
        dt__reduce_divide(recv, count, dtype, p);
    return DT_OK;
}

dt_status dt__tiny_alltoall(dt_comm *comm, const void *send, void *recv, size_t count,
                            dt_dtype dtype)
{
    const int p = comm->size, r = comm->rank;
    const size_t bytes = count * dt_dtype_size(dtype);
    const char *in = send;
    char *out = recv;
    memcpy(out + (size_t)r * bytes, in + (size_t)r * bytes, bytes);
    tiny_call t;
    t.comm = comm, t.what = "dt_comm_alltoall", t.n = 0;
    for (int k = 1; k < p; k++) {
        int to = mod(r + k, p), from = mod(r - k, p);
        add(&t, false, in + (size_t)to * bytes, bytes, to);
        add(&t, true, out + (size_t)from * bytes, bytes, from);
    }
    return run(&t);
}

dt_status dt__tiny_broadcast(dt_comm *comm, void *buf, size_t count, dt_dtype dtype, int root)
{
    const int p = comm->size;
    const size_t bytes = count * dt_dtype_size(dtype);
    tiny_call t;
    t.comm = comm, t.what = "dt_comm_broadcast", t.n = 0;
    if (comm->rank != root)
        add(&t, true, buf, bytes, root);
    else
        for (int k = 1; k < p; k++)
            add(&t, false, buf, bytes, mod(root + k, p));
    return run(&t);
}
