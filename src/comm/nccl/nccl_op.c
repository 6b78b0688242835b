/*
 * Completion and staging of NCCL operations. Each operation records a CUDA
 * event on the comm's stream after it; its request or work handle is done
 * when the event is. Buffers in host memory (a host-side exchange through a
 * comm that is NCCL) are staged through stream-ordered device scratch: copied
 * in before the operation, copied back when it completes.
 */
#include <stdlib.h>
#include <string.h>

#include "comm/nccl/nccl_impl.h"
#include "comm/work_impl.h"
#include "core/log.h"

/* ------------------------------------------------------------ staging */

/* Memory NCCL cannot be given: pageable or pinned host memory. */
static bool is_host(const void *p)
{
    if (p == NULL)
        return false;
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return true;
    }
    return a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged;
}

static dt_status stage_copy_in(dt_nccl_comm *c, const char *fn, const void *host, size_t bytes,
                               void **dev)
{
    cudaError_t e = cudaMallocAsync(dev, bytes > 0 ? bytes : 1, c->stream);
    if (e == cudaSuccess && bytes > 0)
        e = cudaMemcpyAsync(*dev, host, bytes, cudaMemcpyHostToDevice, c->stream);
    if (e != cudaSuccess)
        return DT_ERR(e == cudaErrorMemoryAllocation ? DT_ERR_NO_MEMORY : DT_ERR_BACKEND,
                      "%s: staging %zu bytes of host memory for NCCL failed: %s", fn, bytes,
                      cudaGetErrorString(e));
    return DT_OK;
}

void dt__nccl_stage_release(dt_nccl_comm *c, dt_nccl_stage *st)
{
    if (st->dev_send != NULL)
        (void)cudaFreeAsync(st->dev_send, c->stream);
    if (st->dev_recv != NULL)
        (void)cudaFreeAsync(st->dev_recv, c->stream);
    memset(st, 0, sizeof(*st));
}

dt_status dt__nccl_stage_in(dt_nccl_comm *c, const char *fn, const void *send, size_t send_bytes,
                            void *recv, size_t recv_bytes, dt_nccl_stage *st)
{
    memset(st, 0, sizeof(*st));
    st->send = send;
    st->recv = recv;
    bool hs = send_bytes > 0 && is_host(send), hr = recv_bytes > 0 && is_host(recv);
    dt_status s = DT_OK;
    if (hr) { /* copied in too: parts the operation does not write must come back intact */
        DT_CHECK_GOTO(stage_copy_in(c, fn, recv, recv_bytes, &st->dev_recv), s, err_release);
        st->recv = st->dev_recv;
        st->host_recv = recv;
        st->recv_bytes = recv_bytes;
    }
    if (hs && hr && send == recv) { /* in place */
        st->send = st->dev_recv;
    } else if (hs) {
        void *d = NULL;
        DT_CHECK_GOTO(stage_copy_in(c, fn, send, send_bytes, &d), s, err_release);
        st->dev_send = d;
        st->send = d;
    }
    if (hs || hr)
        DT_LOG_DEBUG("comm", "%s: staging host buffers through device memory", fn);
    return DT_OK;
err_release:
    dt__nccl_stage_release(c, st);
    return s;
}

/* After the operation completed: results back to the host, scratch freed. */
static dt_status stage_out(dt_nccl_comm *c, const char *fn, dt_nccl_stage *st)
{
    dt_status s = DT_OK;
    if (st->host_recv != NULL) {
        /* the event is done, so the data is there; the copy uses the compute
         * stream, never the comm stream where later operations may wait */
        cudaError_t e =
            cudaMemcpy(st->host_recv, st->dev_recv, st->recv_bytes, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess)
            s = DT_ERR(DT_ERR_BACKEND, "%s: copying %zu staged bytes back failed: %s", fn,
                       st->recv_bytes, cudaGetErrorString(e));
    }
    dt__nccl_stage_release(c, st);
    return s;
}

/* ------------------------------------------------------------ requests */

dt_status dt__nccl_op_post(dt_nccl_comm *c, const char *fn, dt_nccl_stage *stage, dt_nccl_op **out)
{
    dt_nccl_op *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        if (stage != NULL)
            dt__nccl_stage_release(c, stage);
        return dt__nccl_fail(c, DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory for a request", fn));
    }
    op->comm = c;
    op->p2p_dir = -1; /* a collective: not a counted point-to-point */
    if (stage != NULL)
        op->stage = *stage;
    cudaError_t e = cudaEventCreateWithFlags(&op->done, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaEventRecord(op->done, c->stream);
    if (e != cudaSuccess) {
        dt__nccl_stage_release(c, &op->stage);
        if (op->done != NULL)
            cudaEventDestroy(op->done);
        free(op);
        /* the operation is queued but cannot be tracked: the comm is unusable */
        return dt__nccl_fail(c, DT_ERR(DT_ERR_BACKEND,
                                       "%s: recording its completion event "
                                       "failed: %s",
                                       fn, cudaGetErrorString(e)));
    }
    *out = op;
    return DT_OK;
}

static void op_release(dt_nccl_op *op)
{
    dt__nccl_p2p_done(op);
    dt__nccl_stage_release(op->comm, &op->stage);
    if (op->done != NULL)
        cudaEventDestroy(op->done);
    free(op);
}

dt_status dt__nccl_op_test(dt_nccl_op *op, const char *fn)
{
    dt_nccl_comm *c = op->comm;
    dt_status st = DT_OK;
    if (c->broken == DT_OK && op->done == NULL) /* its point-to-point group is still open */
        (void)dt__nccl_flush(c, fn);
    if (c->broken != DT_OK) {
        st = dt__nccl_usable(c, fn);
        op_release(op);
        return st;
    }
    (void)cudaSetDevice(c->device);
    cudaError_t e = cudaEventQuery(op->done);
    if (e == cudaSuccess) {
        st = stage_out(c, fn, &op->stage);
        op_release(op);
        return st;
    }
    if (e == cudaErrorNotReady) {
        st = dt__nccl_async_status(c, fn);
        if (st == DT_OK)
            return DT_IN_PROGRESS;
    } else {
        st = dt__nccl_fail(c, DT_ERR(DT_ERR_BACKEND, "%s: the operation failed on the device: %s",
                                     fn, cudaGetErrorString(e)));
    }
    op_release(op);
    return st;
}

void dt__nccl_op_free(dt_nccl_op *op)
{
    if (op == NULL)
        return;
    dt_nccl_comm *c = op->comm;
    (void)cudaSetDevice(c->device);
    if (c->broken == DT_OK && op->done == NULL)
        (void)dt__nccl_flush(c, "dt_work_release");
    if (c->broken == DT_OK && cudaEventQuery(op->done) != cudaSuccess) {
        /* abandoned (timeout or error elsewhere): its kernel may wait forever */
        DT_LOG_WARN("comm", "nccl: abandoning an unfinished operation (rank %d of %d)",
                    c->base.rank, c->base.size);
        dt__nccl_fail(c, DT_ERR_TIMEOUT);
    }
    op_release(op);
}

/* ------------------------------------------------------------ work handles */

static dt_status native_test(dt_work *w)
{
    dt_status st = dt__nccl_op_test(w->native, w->what);
    if (st != DT_IN_PROGRESS)
        w->native = NULL; /* op_test freed it */
    return st;
}

static void native_free(dt_work *w)
{
    dt__nccl_op_free(w->native);
    w->native = NULL;
}

dt_status dt__nccl_finish(dt_nccl_comm *c, const char *what, dt_nccl_op *op, dt_work **work)
{
    dt_work *w = NULL;
    dt_status st = dt__work_native(&c->base, what, native_test, native_free, op, &w);
    if (st != DT_OK) {
        (void)cudaEventSynchronize(op->done); /* cannot hand it out: finish it here */
        dt_status out = stage_out(c, what, &op->stage);
        op_release(op);
        return out != DT_OK ? out : st;
    }
    if (work != NULL) {
        *work = w;
        return DT_OK;
    }
    st = dt__work_finish(w, -1);
    dt_work_release(w);
    return st;
}
