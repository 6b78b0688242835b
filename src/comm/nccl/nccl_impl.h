/* Private state of the NCCL backend, shared by its files. */
#ifndef DT_COMM_NCCL_IMPL_H
#define DT_COMM_NCCL_IMPL_H

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "comm/nccl/nccl_comm.h"
#include "core/error.h"

typedef struct dt_nccl_comm {
    dt_comm base;    /* base.impl points back here */
    ncclComm_t nccl; /* NULL once aborted */
    int device;
    cudaStream_t stream; /* every operation of this comm */
    cudaEvent_t ordered; /* recorded on the compute stream before each operation */
    float *barrier_buf;  /* one device float for the barrier's all-reduce */
    dt_status broken;    /* DT_OK, else the error that aborted the comm */
    /* Point-to-point posted since the last flush, all inside one open
     * ncclGroupStart (nccl_p2p.c): their events are recorded when it ends. */
    bool group_open;
    struct dt_nccl_op *unflushed;
    /* [2][size]: the user tag of the sends (0) / receives (1) outstanding with
     * each peer, and how many: NCCL matches by order only, so another tag
     * while one is outstanding is refused rather than silently mismatched */
    uint32_t *p2p_tag[2];
    int *p2p_count[2];
} dt_nccl_comm;

/* Device views of an operation's buffers; host buffers get device scratch. */
typedef struct dt_nccl_stage {
    const void *send; /* what NCCL reads: the caller's buffer or dev_send/dev_recv */
    void *recv;       /* what NCCL writes */
    void *dev_send;   /* scratch owned by the stage (NULL: none) */
    void *dev_recv;
    void *host_recv; /* copy recv_bytes back here on completion (NULL: none) */
    size_t recv_bytes;
} dt_nccl_stage;

/* One posted operation: done when the stream passes its event. */
typedef struct dt_nccl_op {
    dt_nccl_comm *comm;
    cudaEvent_t done; /* NULL while its group is open (not flushed) */
    dt_nccl_stage stage;
    struct dt_nccl_op *next; /* in comm->unflushed */
    int p2p_dir, p2p_peer;   /* a counted user send (0) / receive (1); -1 when not */
} dt_nccl_op;

extern const dt_comm_ops dt__nccl_ops;

static inline dt_nccl_comm *dt__nccl(dt_comm *c)
{
    return (dt_nccl_comm *)c->impl;
}

/* DT_ERR for an NCCL result, with NCCL's last error text when it has one. */
dt_status dt__nccl_error(ncclResult_t r, dt_nccl_comm *c, const char *fn, const char *what,
                         const char *file, int line);

/* Poll ncclCommGetAsyncError until the comm leaves ncclInProgress (or timeout:
 * returns ncclInProgress). */
ncclResult_t dt__nccl_wait_ready(ncclComm_t comm, double timeout_s);
/* Abort the comm after an error (once) and remember @p st; returns @p st. */
dt_status dt__nccl_fail(dt_nccl_comm *c, dt_status st);
/* DT_OK, or the error recorded when the comm broke (message re-recorded). */
dt_status dt__nccl_usable(dt_nccl_comm *c, const char *fn);
/* Make c->stream wait for the work already on the compute stream. */
dt_status dt__nccl_order(dt_nccl_comm *c, const char *fn);
/* An asynchronous NCCL failure of the comm (peer lost, ...) as a dt_status, or DT_OK. */
dt_status dt__nccl_async_status(dt_nccl_comm *c, const char *fn);

/*
 * Point the operation at device memory: @p send (send_bytes) and @p recv
 * (recv_bytes) that are host memory are staged through scratch on the comm
 * stream (send == recv is in place). Zero bytes = unused. Use st->send and
 * st->recv in the NCCL call; hand @p st to dt__nccl_op_post, or release it.
 */
dt_status dt__nccl_stage_in(dt_nccl_comm *c, const char *fn, const void *send, size_t send_bytes,
                            void *recv, size_t recv_bytes, dt_nccl_stage *st);
void dt__nccl_stage_release(dt_nccl_comm *c, dt_nccl_stage *st);

/* Record the end of the operation just enqueued and hand out a request that
 * owns @p stage (may be NULL; released on failure). */
dt_status dt__nccl_op_post(dt_nccl_comm *c, const char *fn, dt_nccl_stage *stage, dt_nccl_op **out);
/* DT_OK when done (op freed), DT_IN_PROGRESS, or an error (op freed, comm aborted). */
dt_status dt__nccl_op_test(dt_nccl_op *op, const char *fn);
/* Free an op; an unfinished one aborts its comm (its kernels could never end). */
void dt__nccl_op_free(dt_nccl_op *op);

/*
 * nccl_p2p.c: point-to-point. dt__nccl_p2p_post enqueues ncclSend/ncclRecv
 * inside the comm's open group (opening it), so a receive and the sends that
 * match it on other ranks can all be in flight: a ring of receive-then-send
 * cannot deadlock. dt__nccl_flush ends the group (before any collective, any
 * test of an operation, and in progress) and records the ops' events.
 */
dt_status dt__nccl_p2p_post(dt_nccl_comm *c, const char *fn, bool is_send, void *buf, size_t bytes,
                            int peer, uint32_t tag, dt_nccl_op **out);
dt_status dt__nccl_flush(dt_nccl_comm *c, const char *fn);
/* The op no longer counts as outstanding with its peer (on release). */
void dt__nccl_p2p_done(dt_nccl_op *op);
/* Free the tag tables (destroy). */
void dt__nccl_p2p_free(dt_nccl_comm *c);

/* Hand a posted op to the caller: a native work when @p work, else wait for it. */
dt_status dt__nccl_finish(dt_nccl_comm *c, const char *what, dt_nccl_op *op, dt_work **work);

#endif
