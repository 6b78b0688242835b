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

/* One posted operation: done when the stream passes its event. */
typedef struct dt_nccl_op {
    dt_nccl_comm *comm;
    cudaEvent_t done;
} dt_nccl_op;

extern const dt_comm_ops dt__nccl_ops;

static inline dt_nccl_comm *dt__nccl(dt_comm *c)
{
    return (dt_nccl_comm *)c->impl;
}

/* DT_ERR for an NCCL result, with NCCL's last error text when it has one. */
dt_status dt__nccl_error(ncclResult_t r, dt_nccl_comm *c, const char *fn, const char *what,
                         const char *file, int line);

/* Run an NCCL call; in non-blocking mode ncclInProgress means "wait for it". */
#define DT_NCCL_CHECK(c, call, fn)                                                   \
    do {                                                                             \
        ncclResult_t dt_nc_r_ = (call);                                              \
        if (dt_nc_r_ == ncclInProgress)                                              \
            dt_nc_r_ = dt__nccl_wait_ready((c)->nccl, (c)->base.timeout_s);          \
        if (dt_nc_r_ != ncclSuccess)                                                 \
            return dt__nccl_fail((c), dt__nccl_error(dt_nc_r_, (c), (fn), #call,     \
                                                     __FILE__, __LINE__));           \
    } while (0)

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

/* Record the end of the operation just enqueued and hand out a request. */
dt_status dt__nccl_op_post(dt_nccl_comm *c, const char *fn, dt_nccl_op **out);
/* DT_OK when done (op freed), DT_IN_PROGRESS, or an error (op freed, comm aborted). */
dt_status dt__nccl_op_test(dt_nccl_op *op, const char *fn);
/* Free an op; an unfinished one aborts its comm (its kernels could never end). */
void dt__nccl_op_free(dt_nccl_op *op);

/* Hand a posted op to the caller: a native work when @p work, else wait for it. */
dt_status dt__nccl_finish(dt_nccl_comm *c, const char *what, dt_nccl_op *op, dt_work **work);

#endif
