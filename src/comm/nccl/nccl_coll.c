/*
 * NCCL operations: point-to-point for the generic layer, the native
 * collectives (uneven all-gather / reduce-scatter as grouped broadcasts /
 * reduces, all-to-all as grouped send/recv), and their completion: each
 * operation records a CUDA event on the comm's stream after it, and a
 * request or work handle is done when that event is.
 */
#include <stdlib.h>

#include "comm/nccl/nccl_impl.h"
#include "core/log.h"

/* ------------------------------------------------------------ requests */

dt_status dt__nccl_op_post(dt_nccl_comm *c, const char *fn, dt_nccl_op **out)
{
    dt_nccl_op *op = calloc(1, sizeof(*op));
    if (op == NULL)
        return dt__nccl_fail(c, DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory for a request", fn));
    op->comm = c;
    cudaError_t e = cudaEventCreateWithFlags(&op->done, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaEventRecord(op->done, c->stream);
    if (e != cudaSuccess) {
        if (op->done != NULL)
            cudaEventDestroy(op->done);
        free(op);
        /* the operation is queued but cannot be tracked: the comm is unusable */
        return dt__nccl_fail(c, DT_ERR(DT_ERR_BACKEND, "%s: recording its completion event "
                                       "failed: %s", fn, cudaGetErrorString(e)));
    }
    *out = op;
    return DT_OK;
}

static void op_release(dt_nccl_op *op)
{
    cudaEventDestroy(op->done);
    free(op);
}

dt_status dt__nccl_op_test(dt_nccl_op *op, const char *fn)
{
    dt_nccl_comm *c = op->comm;
    dt_status st = DT_OK;
    if (c->broken != DT_OK) {
        st = dt__nccl_usable(c, fn);
        op_release(op);
        return st;
    }
    (void)cudaSetDevice(c->device);
    cudaError_t e = cudaEventQuery(op->done);
    if (e == cudaSuccess) {
        op_release(op);
        return DT_OK;
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
    if (c->broken == DT_OK && cudaEventQuery(op->done) != cudaSuccess) {
        /* abandoned (timeout or error elsewhere): its kernel may wait forever */
        DT_LOG_WARN("comm", "nccl: abandoning an unfinished operation (rank %d of %d)",
                    c->base.rank, c->base.size);
        dt__nccl_fail(c, DT_ERR_TIMEOUT);
    }
    op_release(op);
}

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
        op_release(op);
        return st;
    }
    if (work != NULL) {
        *work = w;
        return DT_OK;
    }
    st = dt__work_finish(w, -1);
    dt_work_release(w);
    return st;
}

/* ------------------------------------------------------------ types */

static dt_status nccl_type(const char *fn, dt_dtype dtype, ncclDataType_t *out)
{
    switch (dtype) {
    case DT_DTYPE_F32: *out = ncclFloat32; return DT_OK;
    case DT_DTYPE_F64: *out = ncclFloat64; return DT_OK;
    case DT_DTYPE_F16: *out = ncclFloat16; return DT_OK;
    case DT_DTYPE_BF16: *out = ncclBfloat16; return DT_OK;
    case DT_DTYPE_I32: *out = ncclInt32; return DT_OK;
    case DT_DTYPE_I64: *out = ncclInt64; return DT_OK;
    case DT_DTYPE_U8: *out = ncclUint8; return DT_OK;
    default:
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: NCCL cannot reduce dtype %s", fn,
                      dt_dtype_name(dtype));
    }
}

static dt_status nccl_op(const char *fn, dt_reduce_op op, ncclRedOp_t *out)
{
    switch (op) {
    case DT_REDUCE_OP_SUM: *out = ncclSum; return DT_OK;
    case DT_REDUCE_OP_AVG: *out = ncclAvg; return DT_OK;
    case DT_REDUCE_OP_MAX: *out = ncclMax; return DT_OK;
    case DT_REDUCE_OP_MIN: *out = ncclMin; return DT_OK;
    case DT_REDUCE_OP_PROD: *out = ncclProd; return DT_OK;
    default:
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: reduce op %d", fn, (int)op);
    }
}

/* Common prologue: usable comm on its device, ordered after the compute stream. */
static dt_status begin(dt_nccl_comm *c, const char *fn)
{
    DT_CHECK(dt__nccl_usable(c, fn));
    return dt__nccl_order(c, fn);
}

/* End a group opened with ncclGroupStart after @p r (the first failure inside it). */
static dt_status group_end(dt_nccl_comm *c, ncclResult_t r, const char *fn, const char *what)
{
    ncclResult_t e = ncclGroupEnd();
    if (r == ncclSuccess)
        r = e;
    if (r == ncclInProgress)
        r = dt__nccl_wait_ready(c->nccl, c->base.timeout_s);
    if (r != ncclSuccess)
        return dt__nccl_fail(c, dt__nccl_error(r, c, fn, what, __FILE__, __LINE__));
    return DT_OK;
}

static dt_status post_and_finish(dt_nccl_comm *c, const char *fn, dt_work **work)
{
    dt_nccl_op *op = NULL;
    DT_CHECK(dt__nccl_op_post(c, fn, &op));
    return dt__nccl_finish(c, fn, op, work);
}

/* ------------------------------------------------------------ point-to-point */

dt_status dt__nccl_isend(dt_comm *comm, const void *buf, size_t bytes, int peer, uint32_t tag,
                         void **req)
{
    const char *fn = "dt_comm_send";
    dt_nccl_comm *c = dt__nccl(comm);
    DT_CHECK(begin(c, fn));
    DT_NCCL_CHECK(c, ncclSend(buf, bytes, ncclUint8, peer, c->nccl, c->stream), fn);
    return dt__nccl_op_post(c, fn, (dt_nccl_op **)req);
}

dt_status dt__nccl_irecv(dt_comm *comm, void *buf, size_t bytes, int peer, uint32_t tag,
                         void **req)
{
    const char *fn = "dt_comm_recv";
    dt_nccl_comm *c = dt__nccl(comm);
    DT_CHECK(begin(c, fn));
    DT_NCCL_CHECK(c, ncclRecv(buf, bytes, ncclUint8, peer, c->nccl, c->stream), fn);
    return dt__nccl_op_post(c, fn, (dt_nccl_op **)req);
}

dt_status dt__nccl_req_test(dt_comm *comm, void *req)
{
    return dt__nccl_op_test(req, "dt_comm_p2p");
}

void dt__nccl_req_cancel(dt_comm *comm, void *req)
{
    dt__nccl_op_free(req);
}

/* ------------------------------------------------------------ collectives */

dt_status dt__nccl_allreduce(dt_comm *comm, const void *send, void *recv, size_t count,
                             dt_dtype dtype, dt_reduce_op op, dt_work **work)
{
    const char *fn = "dt_comm_allreduce";
    dt_nccl_comm *c = dt__nccl(comm);
    ncclDataType_t t = ncclFloat32;
    ncclRedOp_t o = ncclSum;
    DT_CHECK(nccl_type(fn, dtype, &t));
    DT_CHECK(nccl_op(fn, op, &o));
    DT_CHECK(begin(c, fn));
    DT_NCCL_CHECK(c, ncclAllReduce(send, recv, count, t, o, c->nccl, c->stream), fn);
    return post_and_finish(c, fn, work);
}

/* Counts all equal and blocks packed (displs NULL or r * count). */
static bool uniform_blocks(int n, const size_t *counts, const size_t *displs)
{
    for (int r = 0; r < n; r++)
        if (counts[r] != counts[0] || (displs != NULL && displs[r] != (size_t)r * counts[0]))
            return false;
    return true;
}

dt_status dt__nccl_allgatherv(dt_comm *comm, const void *send, void *recv, const size_t *counts,
                              const size_t *displs, dt_dtype dtype, dt_work **work)
{
    const char *fn = "dt_comm_allgatherv";
    dt_nccl_comm *c = dt__nccl(comm);
    size_t esz = dt_dtype_size(dtype);
    int n = comm->size;
    DT_CHECK(begin(c, fn));
    if (uniform_blocks(n, counts, displs)) {
        DT_NCCL_CHECK(c, ncclAllGather(send, recv, counts[0] * esz, ncclUint8, c->nccl, c->stream),
                      fn);
        return post_and_finish(c, fn, work);
    }
    /* uneven: every rank broadcasts its block, in one group */
    ncclResult_t r = ncclGroupStart();
    size_t off = 0;
    for (int root = 0; r == ncclSuccess && root < n; root++) {
        size_t at = displs != NULL ? displs[root] : off;
        off += counts[root];
        if (counts[root] == 0)
            continue;
        char *dst = (char *)recv + at * esz;
        r = ncclBroadcast(root == comm->rank ? send : dst, dst, counts[root] * esz, ncclUint8,
                          root, c->nccl, c->stream);
    }
    DT_CHECK(group_end(c, r, fn, "grouped ncclBroadcast"));
    return post_and_finish(c, fn, work);
}

dt_status dt__nccl_reduce_scatterv(dt_comm *comm, const void *send, void *recv,
                                   const size_t *counts, dt_dtype dtype, dt_reduce_op op,
                                   dt_work **work)
{
    const char *fn = "dt_comm_reduce_scatterv";
    dt_nccl_comm *c = dt__nccl(comm);
    ncclDataType_t t = ncclFloat32;
    ncclRedOp_t o = ncclSum;
    size_t esz = dt_dtype_size(dtype);
    int n = comm->size;
    DT_CHECK(nccl_type(fn, dtype, &t));
    DT_CHECK(nccl_op(fn, op, &o));
    DT_CHECK(begin(c, fn));
    if (uniform_blocks(n, counts, NULL)) {
        DT_NCCL_CHECK(c, ncclReduceScatter(send, recv, counts[0], t, o, c->nccl, c->stream), fn);
        return post_and_finish(c, fn, work);
    }
    /* uneven: block r is reduced onto rank r, all in one group */
    ncclResult_t r = ncclGroupStart();
    size_t off = 0;
    for (int root = 0; r == ncclSuccess && root < n; root++) {
        const char *src = (const char *)send + off * esz;
        off += counts[root];
        if (counts[root] == 0)
            continue;
        r = ncclReduce(src, recv, counts[root], t, o, root, c->nccl, c->stream);
    }
    DT_CHECK(group_end(c, r, fn, "grouped ncclReduce"));
    return post_and_finish(c, fn, work);
}

dt_status dt__nccl_alltoallv(dt_comm *comm, const void *send, const size_t *send_counts,
                             const size_t *send_displs, void *recv, const size_t *recv_counts,
                             const size_t *recv_displs, dt_dtype dtype, dt_work **work)
{
    const char *fn = "dt_comm_alltoallv";
    dt_nccl_comm *c = dt__nccl(comm);
    size_t esz = dt_dtype_size(dtype);
    int n = comm->size, me = comm->rank;
    DT_CHECK(begin(c, fn));
    size_t soff = 0, roff = 0, my_s = 0, my_r = 0;
    for (int p = 0; p < n; p++) { /* own block: a device copy, not a message */
        size_t s_at = send_displs != NULL ? send_displs[p] : soff;
        size_t r_at = recv_displs != NULL ? recv_displs[p] : roff;
        soff += send_counts[p];
        roff += recv_counts[p];
        if (p == me) {
            my_s = s_at;
            my_r = r_at;
        }
    }
    if (send_counts[me] > 0 && (const char *)send + my_s * esz != (char *)recv + my_r * esz) {
        cudaError_t e = cudaMemcpyAsync((char *)recv + my_r * esz, (const char *)send + my_s * esz,
                                        send_counts[me] * esz, cudaMemcpyDeviceToDevice,
                                        c->stream);
        if (e != cudaSuccess)
            return DT_ERR(DT_ERR_BACKEND, "%s: copying the own block failed: %s", fn,
                          cudaGetErrorString(e));
    }
    ncclResult_t r = ncclGroupStart();
    soff = roff = 0;
    for (int p = 0; r == ncclSuccess && p < n; p++) {
        size_t s_at = send_displs != NULL ? send_displs[p] : soff;
        size_t r_at = recv_displs != NULL ? recv_displs[p] : roff;
        soff += send_counts[p];
        roff += recv_counts[p];
        if (p == me)
            continue;
        if (send_counts[p] > 0)
            r = ncclSend((const char *)send + s_at * esz, send_counts[p] * esz, ncclUint8, p,
                         c->nccl, c->stream);
        if (r == ncclSuccess && recv_counts[p] > 0)
            r = ncclRecv((char *)recv + r_at * esz, recv_counts[p] * esz, ncclUint8, p, c->nccl,
                         c->stream);
    }
    DT_CHECK(group_end(c, r, fn, "grouped ncclSend/ncclRecv"));
    return post_and_finish(c, fn, work);
}

dt_status dt__nccl_broadcast(dt_comm *comm, void *buf, size_t count, dt_dtype dtype, int root,
                             dt_work **work)
{
    const char *fn = "dt_comm_broadcast";
    dt_nccl_comm *c = dt__nccl(comm);
    DT_CHECK(begin(c, fn));
    DT_NCCL_CHECK(c, ncclBroadcast(buf, buf, count * dt_dtype_size(dtype), ncclUint8, root,
                                   c->nccl, c->stream),
                  fn);
    return post_and_finish(c, fn, work);
}

dt_status dt__nccl_barrier(dt_comm *comm, dt_work **work)
{
    const char *fn = "dt_comm_barrier";
    dt_nccl_comm *c = dt__nccl(comm);
    DT_CHECK(begin(c, fn));
    DT_NCCL_CHECK(c, ncclAllReduce(c->barrier_buf, c->barrier_buf, 1, ncclFloat32, ncclSum,
                                   c->nccl, c->stream),
                  fn);
    return post_and_finish(c, fn, work);
}
