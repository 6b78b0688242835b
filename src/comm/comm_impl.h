/*
 * The private side of dt_comm: the comm and its family, the backend vtable,
 * failures. The generic collective schedules built on a backend's
 * point-to-point are in comm/sched.h, work handles in comm/work_impl.h,
 * 2-D block copies in comm/block2d.h.
 *
 * A backend (src/comm/ucx/, src/comm/nccl/, the size-1 "self" backend) fills
 * one `dt_comm_ops` with designated initializers and creates comms whose
 * `ops` point at it. The public functions in comm.c validate arguments,
 * short-cut size 1, then either call the backend's native collective (an
 * entry marked "(optional)" below that is non-NULL) or build a generic
 * schedule (src/comm/algo/) that runs on the backend's isend/irecv.
 *
 * Adding a backend (e.g. NCCL for device memory):
 *   1. fill a `static const dt_comm_ops` with the REQUIRED entries: isend /
 *      irecv / req_test / req_cancel / progress / destroy (NCCL: ncclSend /
 *      ncclRecv on the comm's stream, a CUDA event per request, progress =
 *      cudaEventQuery + a short sleep), and either `split` (ncclCommSplit) or
 *      `subgroup` + `comm_id` + `next_comm_id`;
 *   2. set any optional native collective you have (ncclAllReduce, ...). A
 *      native entry receives validated arguments (size > 1) and `work`:
 *      NULL = complete before returning; otherwise return a handle from
 *      dt__work_native(comm, name, test, free, your_state, out). `test` must
 *      not block: DT_OK when done, DT_IN_PROGRESS, or an error recorded with
 *      DT_ERR; between calls to it a waiting rank calls ops->progress(comm,
 *      time_left), so progress is where your backend may sleep briefly;
 *   3. create comms with calloc'ed `dt_comm` { .ops, .impl, .rank, .size,
 *      .timeout_s } and return them from a constructor like
 *      dt__comm_ucx_create_world; destroy frees both.
 *   Collectives without a native entry then run the generic algorithms of
 *   src/comm/algo/ over your isend/irecv, so a backend with only the required
 *   entries is already complete.
 *
 * Conventions every entry follows:
 *   - peers are ranks in THIS comm (0 .. size-1); the backend maps them to
 *     its transport addresses;
 *   - counts are elements of `dtype` unless named `bytes`;
 *   - errors are recorded with DT_ERR by the backend (first detector rule):
 *     DT_ERR_PEER_LOST when a peer died, DT_ERR_BACKEND for transport errors.
 */
#ifndef DT_COMM_IMPL_H
#define DT_COMM_IMPL_H

#include "dtensor/comm.h"

#include "comm/block2d.h"
#include "core/clock.h"

#include <stdint.h>

typedef struct dt_comm_ops dt_comm_ops;

/*
 * Logical tag passed to isend/irecv: DT__TAG_BITS bits. User point-to-point
 * uses DT__TAG_P2P | user tag. Collective traffic uses DT__TAG_COLL |
 * (sequence number of the collective on this comm) << DT__TAG_CHECK_BITS |
 * check, where check is a hash of the call's arguments (comm_check.c). The
 * backend adds the comm id and the source rank, so two comms never match
 * each other's messages. Messages with the same (peer, tag) match in posting
 * order, where a collective's check bits take no part in matching: a
 * receive that matches a message whose check differs fails with
 * dt__comm_check_mismatch (the ranks called different collectives).
 */
#define DT__TAG_BITS       28
#define DT__TAG_P2P        (1u << 27)
#define DT__TAG_COLL       0u
#define DT__TAG_VALUE_MASK ((1u << 23) - 1u) /* user tags */
#define DT__TAG_CHECK_BITS 12
#define DT__TAG_CHECK_MASK ((1u << DT__TAG_CHECK_BITS) - 1u)
#define DT__TAG_SEQ_MASK   ((1u << (27 - DT__TAG_CHECK_BITS)) - 1u)

/* The bits of logical @p tag a receive matches on (a collective's check is not). */
static inline uint32_t dt__tag_match_mask(uint32_t tag)
{
    return (tag & DT__TAG_P2P) ? ~0u : ~DT__TAG_CHECK_MASK;
}

/*
 * A comm family: a world comm and every comm split from it. A failure seen by
 * any of its comms on one rank aborts the family on every rank (comm_abort.c):
 * the backend tells the other members (notify_abort), and from then on every
 * operation on any comm of the family fails at once with the first error,
 * naming the world rank that saw it.
 */
#define DT__ABORT_MSG 768
typedef struct dt__comm_family {
    int refs;
    uint32_t id;      /* agreed by the members: the id of the comm it started with */
    dt_status status; /* DT_OK until aborted */
    int origin;       /* world rank that failed first */
    int nmembers;     /* world ranks told of an abort; 0: the whole world */
    int *members;
    char msg[DT__ABORT_MSG]; /* the origin's message */
} dt__comm_family;

/* What an abort notice carries between ranks (msg: len bytes, no NUL). */
typedef struct dt__abort_notice {
    uint32_t family;
    int32_t status, origin;
    uint32_t len;
    char msg[DT__ABORT_MSG];
} dt__abort_notice;
#define DT__ABORT_NOTICE_HDR (4 * sizeof(uint32_t))

/* What a collective call agreed on by every rank is: hashed into the tag's
 * check bits, printed when they differ, exchanged with DT_DEBUG=detail. */
typedef struct dt__coll_desc {
    const char *what; /* "dt_comm_allreduce" */
    int32_t dtype, op, root;
    uint64_t count;  /* elements (v-collectives: in total) */
    uint64_t counts; /* v-collectives: a hash of the counts array */
    uint32_t ctx;    /* the caller's context (dt__comm_context_push) */
} dt__coll_desc;

struct dt_comm {
    const dt_comm_ops *ops;
    void *impl; /* backend state */
    int rank, size;
    uint32_t coll_seq;       /* collectives issued on this comm (tags) */
    double timeout_s;        /* default deadline of an operation */
    dt_work *spare_work;     /* a finished work block kept for reuse (work.c) */
    char *algo;              /* forced algorithms: DT_ALGO or dt_comm_set_algo (owned) */
    bool algo_loaded;        /* algo holds DT_ALGO's value (read at the first collective) */
    dt__comm_family *family; /* shared with the comms split from it (NULL: made on first use) */
    dt__coll_desc desc;      /* the collective being started (comm_check.c) */
    uint32_t check;          /* its hash: the tag's check bits */
    bool checking;           /* inside the DT_DEBUG=detail exchange */
};

/*
 * The backend vtable. REQUIRED entries must be non-NULL; "(optional)" entries
 * may be NULL and the core then uses its generic algorithm.
 *
 * A request (`void *req`) is backend-owned. isend/irecv write NULL to *req
 * when the operation completed immediately. req_test/req_cancel consume the
 * request once they report it finished (DT_OK or an error) or cancel it.
 */
struct dt_comm_ops {
    const char *name; /* "ucx", "nccl", "self" */
    /* The transport reads and writes device memory itself (NCCL). Otherwise
     * device buffers are staged through host copies (comm_staged.h). */
    bool device_memory;

    /* REQUIRED: start sending @p bytes of @p buf to @p peer with logical @p tag. */
    dt_status (*isend)(dt_comm *comm, const void *buf, size_t bytes, int peer, uint32_t tag,
                       void **req);
    /* REQUIRED: start receiving exactly @p bytes from @p peer with logical @p tag. */
    dt_status (*irecv)(dt_comm *comm, void *buf, size_t bytes, int peer, uint32_t tag, void **req);
    /*
     * (optional) isend of the rows of 2-D block @p src (its byte stream), the
     * sender gathering them as the message leaves: no packed copy. Only for
     * blocks of more than DT__SEND2D_MIN_BYTES to a peer reached through
     * shared memory (p2p_shm); the descriptor outlives the request. @p ride:
     * NULL, or a local copy {dst, src} the sender makes alongside, in step
     * with the bytes sent (the own stripe of S(0) -> S(1) shares its rows
     * with the sent one: each row is read from memory once); it is done when
     * the request is.
     */
    dt_status (*isend2d)(dt_comm *comm, const dt__block2d *src, const dt__block2d *ride, int peer,
                         uint32_t tag, void **req);
    /*
     * (optional) irecv, then buf = op(received, fold) element-wise: the values
     * of dt__reduce(buf, fold) after the receive, but folded as the message
     * lands (out of a shared-memory window instead of copying it out first:
     * one pass over the bytes fewer). @p fold does not overlap @p buf.
     * NULL: the core reduces once the receive is done.
     */
    dt_status (*irecv_reduce)(dt_comm *comm, void *buf, size_t bytes, int peer, uint32_t tag,
                              const void *fold, dt_dtype dtype, dt_reduce_op op, void **req);
    /*
     * REQUIRED: DT_OK when @p req finished (it is freed), DT_IN_PROGRESS when
     * not yet, an error (recorded, req freed) when it failed - including a
     * receive whose peer is known to be dead (DT_ERR_PEER_LOST).
     * Does not progress the transport; progress() does.
     */
    dt_status (*req_test)(dt_comm *comm, void *req);
    /* REQUIRED: abandon @p req (on errors/timeouts); frees it. */
    void (*req_cancel)(dt_comm *comm, void *req);
    /*
     * (optional) Free host-allocator block @p p (of @p block bytes) once no
     * abandoned request can write into it any more: when the transport is torn
     * down. A collective that failed with requests in flight hands its scratch
     * here (a rendezvous read still landing in a freed, reused buffer
     * corrupted memory). NULL: the transport's cancel is final; freed at once.
     */
    void (*defer_free)(dt_comm *comm, void *p, size_t block);
    /*
     * REQUIRED: progress the transport. With @p wait_s > 0 it may block up to
     * that long when nothing happens (spin DT_SPIN_US, then sleep on an event
     * fd): it returns early as soon as any event arrives. Returns an error
     * only when the transport itself failed.
     */
    dt_status (*progress)(dt_comm *comm, double wait_s);

    /*
     * (optional) Native split with dt_comm_split's semantics. When NULL the
     * core exchanges (color, key) with an all-gather over @p comm and calls
     * subgroup() below.
     */
    dt_status (*split)(dt_comm *comm, int color, int key, dt_comm **out);
    /*
     * Required when split is NULL: create a comm of @p n members over the same
     * transport; members[i] is the rank IN @p parent of new rank i; @p my_rank
     * is this process's new rank; @p comm_id is agreed by all members and is
     * distinct from every live comm sharing a process with this one.
     */
    dt_status (*subgroup)(dt_comm *parent, int n, const int *members, int my_rank, uint32_t comm_id,
                          dt_comm **out);
    /* The comm id used in tags (see subgroup); next_comm_id: the lowest id this
     * process has not used yet. Required when split is NULL. */
    uint32_t (*comm_id)(const dt_comm *comm);
    uint32_t (*next_comm_id)(const dt_comm *comm);

    /*
     * (optional) Copy between this process's memory and @p peer's, both on
     * this host, without the peer taking part: @p to_peer copies bytes
     * [offset, offset + bytes) of the local block's stream into the same
     * bytes of the remote one's, else the other way. Used by dt_comm_alltoallw when peer_copy_ok
     * says every member of the comm can be reached this way (the same answer on all).
     */
    dt_status (*peer_copy)(dt_comm *comm, int peer, bool to_peer, const dt__block2d *local,
                           const dt__block2d *remote, uint64_t offset, uint64_t bytes);
    bool (*peer_copy_ok)(const dt_comm *comm);
    /*
     * (optional) Whether point-to-point between any two members goes through
     * shared memory at memcpy speed (the same answer on all members). The
     * collectives then prefer send/recv algorithms to peer_copy: two memcpys
     * beat one cross-memory-attach copy (ucx_shm_bulk.c).
     */
    bool (*p2p_shm)(const dt_comm *comm);

    /* (optional) World rank of comm rank @p rank (messages name world ranks);
     * NULL: the same number. */
    int (*world_rank)(const dt_comm *comm, int rank);
    /* (optional) Which host comm rank @p rank runs on: equal ids mean the
     * same host, the same answer on every member (hierarchical collectives,
     * algo/hier_topo.h). NULL: all on one host. */
    int (*host_of)(const dt_comm *comm, int rank);
    /* (optional) A world rank whose process is seen stopped (SIGSTOP, a
     * debugger; same-host peers only), @p first checked first, and its pid;
     * -1 when none is. Timeouts name it: the others only wait for it. */
    int (*stopped_peer)(const dt_comm *comm, int first, int *pid);
    /* (optional) The family @p id of this transport, a new reference (created
     * when unknown: an abort notice may come first). NULL: the core makes one
     * that no notice reaches. */
    dt__comm_family *(*family_open)(dt_comm *comm, uint32_t id);
    /* (optional) Tell the other members of @p f (aborted) without waiting for
     * them; what arrives goes to dt__comm_family_notice. */
    void (*notify_abort)(dt_comm *comm, const dt__comm_family *f);

    /* REQUIRED: free the backend state and the dt_comm itself. Not collective. */
    void (*destroy)(dt_comm *comm);

    /*
     * (optional) Native collectives with the public semantics of the same
     * name in dtensor/comm.h (arguments already validated, size > 1, `work`
     * may be NULL = blocking). A backend that runs collectives on its own
     * stream (NCCL) returns work handles built with dt__work_native().
     */
    dt_status (*allreduce)(dt_comm *comm, const void *send, void *recv, size_t count,
                           dt_dtype dtype, dt_reduce_op op, dt_work **work);
    dt_status (*allgatherv)(dt_comm *comm, const void *send, void *recv, const size_t *counts,
                            const size_t *displs, dt_dtype dtype, dt_work **work);
    dt_status (*reduce_scatterv)(dt_comm *comm, const void *send, void *recv, const size_t *counts,
                                 dt_dtype dtype, dt_reduce_op op, dt_work **work);
    dt_status (*alltoallv)(dt_comm *comm, const void *send, const size_t *send_counts,
                           const size_t *send_displs, void *recv, const size_t *recv_counts,
                           const size_t *recv_displs, dt_dtype dtype, dt_work **work);
    dt_status (*broadcast)(dt_comm *comm, void *buf, size_t count, dt_dtype dtype, int root,
                           dt_work **work);
    dt_status (*barrier)(dt_comm *comm, dt_work **work);
};

/* The smallest block isend2d takes (a backend's shared-memory ring carries
 * smaller messages, copied whole at once). */
#define DT__SEND2D_MIN_BYTES (64u * 1024)

/* Whether dt_comm_alltoallw runs on @p comm: NCCL has a native all-to-all of
 * packed blocks and no 2-D one. */
static inline bool dt__comm_has_alltoallw(const dt_comm *comm)
{
    return comm->ops->alltoallv == NULL || comm->ops->peer_copy != NULL;
}

/* The tag of the next collective on @p comm: its sequence number and the
 * call's check bits (the work engine and the tiny path take them alike). */
static inline uint32_t dt__comm_next_tag(dt_comm *comm)
{
    return DT__TAG_COLL | ((comm->coll_seq++ & DT__TAG_SEQ_MASK) << DT__TAG_CHECK_BITS) |
           comm->check;
}

/* ------------------------------------------------------------ failures (comm_abort.c) */

dt__comm_family *dt__comm_family_new(uint32_t id);
void dt__comm_family_release(dt__comm_family *f);
/* @p c's family (made on first use). */
dt__comm_family *dt__comm_family_of(dt_comm *c);
/* The error of @p c's aborted family, recorded for @p fn. */
dt_status dt__comm_aborted(const char *fn, const dt_comm *c);
/* DT_OK, or the error every operation on an aborted family fails with. */
static inline dt_status dt__comm_alive(const char *fn, const dt_comm *c)
{
    if (c->family == NULL || c->family->status == DT_OK)
        return DT_OK;
    return dt__comm_aborted(fn, c);
}
/* Operation @p what on @p c failed with @p st (its message recorded): abort
 * the family on every rank. Returns the family's error: this one when it is
 * the first, else the first (status and message of the same event). */
dt_status dt__comm_fail(dt_comm *c, const char *what, dt_status st);
/* Give @p c a family of its own (every member calls it, before any traffic
 * on @p c): its failures then leave the parent's family alone. For tests
 * that break a comm on purpose and go on with the world. */
void dt__comm_isolate(dt_comm *c);
/* An abort notice from world rank @p from arrived for family @p f. */
void dt__comm_family_notice(dt__comm_family *f, const dt__abort_notice *n, size_t len, int from);
/* World rank of @p c's rank @p rank. */
static inline int dt__comm_world_rank(const dt_comm *c, int rank)
{
    return c->ops->world_rank != NULL ? c->ops->world_rank(c, rank) : rank;
}
/* A received message's check bits @p theirs differ from the receive's @p
 * mine: DT_ERR_INVALID_ARG naming world rank @p from (comm_check.c).
 * Backends call it; the work engine then names the call (dt__check_explain). */
dt_status dt__comm_check_mismatch(int from, uint32_t mine, uint32_t theirs);
/* Failure @p st of @p w: when it was a check mismatch, the message names
 * this rank's call; returns @p st. */
dt_status dt__check_explain(const dt_work *w, dt_status st);
/* The same for call @p d named @p what (the tiny path has no work). */
dt_status dt__check_explain_call(const char *what, const dt__coll_desc *d, dt_status st);

/* ------------------------------------------------------------ backends */

/* The size-1 backend (no transport). */
dt_status dt__comm_self_create(dt_comm **out);

struct dt_store;
/* The UCX world comm of @p size ranks, bootstrapped through @p store. Collective. */
dt_status dt__comm_ucx_create_world(struct dt_store *store, int rank, int size, double timeout_s,
                                    dt_comm **out);

#endif
