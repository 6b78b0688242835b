/* Private state of the NCCL backend, shared by its files. */
#ifndef DT_COMM_NCCL_IMPL_H
#define DT_COMM_NCCL_IMPL_H

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "comm/nccl/nccl_comm.h"
#include "core/error.h"

typedef struct dt_nccl_comm {
    dt_comm base;          /* base.impl points back here */
    ncclComm_t nccl;       /* NULL once aborted */
    int device;
    cudaStream_t stream;   /* every operation of this comm */
    cudaEvent_t ordered;   /* recorded on the compute stream before each operation */
    float *barrier_buf;    /* one device float for the barrier's all-reduce */
    dt_status broken;      /* DT_OK, else the error that aborted the comm */
} dt_nccl_comm;

/* Device views of an operation's buffers; host buffers get device scratch. */
typedef struct dt_nccl_stage {
    const void *send;   /* what NCCL reads: the caller's buffer or dev_send/dev_recv */
    void *recv;         /* what NCCL writes */
    void *dev_send;     /* scratch owned by the stage (NULL: none) */
    void *dev_recv;
    void *host_recv;    /* copy recv_bytes back here on completion (NULL: none) */
    size_t recv_bytes;
} dt_nccl_stage;

/* One posted operation: done when the stream passes its event. */
typedef struct dt_nccl_op {
    dt_nccl_comm *comm;
    cudaEvent_t done;
    dt_nccl_stage stage;
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
dt_status dt__nccl_stage_in(dt_nccl_comm *c, const char *fn, const void *send,
                            size_t send_bytes, void *recv, size_t recv_bytes, dt_nccl_stage *st);
void dt__nccl_stage_release(dt_nccl_comm *c, dt_nccl_stage *st);

/* Record the end of the operation just enqueued and hand out a request that
 * owns @p stage (may be NULL; released on failure). */
dt_status dt__nccl_op_post(dt_nccl_comm *c, const char *fn, dt_nccl_stage *stage,
                           dt_nccl_op **out);
/* DT_OK when done (op freed), DT_IN_PROGRESS, or an error (op freed, comm aborted). */
dt_status dt__nccl_op_test(dt_nccl_op *op, const char *fn);
/* Free an op; an unfinished one aborts its comm (its kernels could never end). */
void dt__nccl_op_free(dt_nccl_op *op);

/* Hand a posted op to the caller: a native work when @p work, else wait for it. */
dt_status dt__nccl_finish(dt_nccl_comm *c, const char *what, dt_nccl_op *op, dt_work **work);

#endif
