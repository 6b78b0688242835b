/*
 * NCCL operations: point-to-point for the generic layer and the native
 * collectives (uneven all-gather / reduce-scatter as grouped broadcasts /
 * reduces, all-to-all as grouped send/recv). Each one stages host buffers
 * (nccl_op.c), enqueues on the comm's stream, and hands out a request or
 * work handle that completes with the stream.
 */
#include <stdlib.h>

#include "comm/nccl/nccl_impl.h"
#include "core/log.h"

/* ------------------------------------------------------------ types */

static dt_status nccl_type(const char *fn, dt_dtype dtype, ncclDataType_t *out)
{
    switch (dtype) {
    case DT_DTYPE_F32:
        *out = ncclFloat32;
        return DT_OK;
    case DT_DTYPE_F64:
        *out = ncclFloat64;
        return DT_OK;
    case DT_DTYPE_F16:
        *out = ncclFloat16;
        return DT_OK;
    case DT_DTYPE_BF16:
        *out = ncclBfloat16;
        return DT_OK;
    case DT_DTYPE_I32:
        *out = ncclInt32;
        return DT_OK;
    case DT_DTYPE_I64:
        *out = ncclInt64;
        return DT_OK;
    case DT_DTYPE_U8:
        *out = ncclUint8;
        return DT_OK;
    default:
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: NCCL cannot reduce dtype %s", fn,
                      dt_dtype_name(dtype));
    }
}

static dt_status nccl_op(const char *fn, dt_reduce_op op, ncclRedOp_t *out)
{
    switch (op) {
    case DT_REDUCE_OP_SUM:
        *out = ncclSum;
        return DT_OK;
    case DT_REDUCE_OP_AVG:
        *out = ncclAvg;
        return DT_OK;
    case DT_REDUCE_OP_MAX:
        *out = ncclMax;
        return DT_OK;
    case DT_REDUCE_OP_MIN:
        *out = ncclMin;
        return DT_OK;
    case DT_REDUCE_OP_PROD:
        *out = ncclProd;
        return DT_OK;
    default:
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: reduce op %d", fn, (int)op);
    }
}

/* Common prologue: usable comm on its device, point-to-point posted before
 * launched, ordered after the compute stream. */
static dt_status begin(dt_nccl_comm *c, const char *fn)
{
    DT_CHECK(dt__nccl_usable(c, fn));
    DT_CHECK(dt__nccl_flush(c, fn));
    return dt__nccl_order(c, fn);
}

/* The result of an enqueueing NCCL call (waited for in non-blocking mode);
 * on failure the stage is released and the comm aborted. */
static dt_status enqueued(dt_nccl_comm *c, ncclResult_t r, const char *fn, const char *what,
                          dt_nccl_stage *st)
{
    if (r == ncclInProgress)
        r = dt__nccl_wait_ready(c->nccl, c->base.timeout_s);
    if (r == ncclSuccess)
        return DT_OK;
    dt__nccl_stage_release(c, st);
    return dt__nccl_fail(c, dt__nccl_error(r, c, fn, what, __FILE__, __LINE__));
}

/* End a group opened with ncclGroupStart after @p r (the first failure inside it). */
static dt_status group_end(dt_nccl_comm *c, ncclResult_t r, const char *fn, const char *what,
                           dt_nccl_stage *st)
{
    ncclResult_t e = ncclGroupEnd();
    return enqueued(c, r != ncclSuccess ? r : e, fn, what, st);
}

static dt_status post_and_finish(dt_nccl_comm *c, const char *fn, dt_nccl_stage *st, dt_work **work)
{
    dt_nccl_op *op = NULL;
    DT_CHECK(dt__nccl_op_post(c, fn, st, &op));
    return dt__nccl_finish(c, fn, op, work);
}

/* Elements spanned by blocks (counts, displs; NULL displs = packed). */
static size_t blocks_extent(int n, const size_t *counts, const size_t *displs)
{
    size_t off = 0, end = 0;
    for (int r = 0; r < n; r++) {
        size_t at = displs != NULL ? displs[r] : off;
        off += counts[r];
        if (counts[r] > 0 && at + counts[r] > end)
            end = at + counts[r];
    }
    return end;
}

/* ------------------------------------------------------------ point-to-point */

dt_status dt__nccl_isend(dt_comm *comm, const void *buf, size_t bytes, int peer, uint32_t tag,
                         void **req)
{
    const char *fn = "dt_comm_send";
    dt_nccl_comm *c = dt__nccl(comm);
    DT_CHECK(dt__nccl_usable(c, fn));
    if (!c->group_open) /* the group's operations run after the compute stream's work */
        DT_CHECK(dt__nccl_order(c, fn));
    return dt__nccl_p2p_post(c, fn, true, (void *)buf, bytes, peer, tag, (dt_nccl_op **)req);
}

dt_status dt__nccl_irecv(dt_comm *comm, void *buf, size_t bytes, int peer, uint32_t tag, void **req)
{
    const char *fn = "dt_comm_recv";
    dt_nccl_comm *c = dt__nccl(comm);
    DT_CHECK(dt__nccl_usable(c, fn));
    if (!c->group_open)
        DT_CHECK(dt__nccl_order(c, fn));
    return dt__nccl_p2p_post(c, fn, false, buf, bytes, peer, tag, (dt_nccl_op **)req);
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
    size_t bytes = count * dt_dtype_size(dtype);
    dt_nccl_stage st;
    DT_CHECK(nccl_type(fn, dtype, &t));
    DT_CHECK(nccl_op(fn, op, &o));
    DT_CHECK(begin(c, fn));
    DT_CHECK(dt__nccl_stage_in(c, fn, send, bytes, recv, bytes, &st));
    DT_CHECK(enqueued(c, ncclAllReduce(st.send, st.recv, count, t, o, c->nccl, c->stream), fn,
                      "ncclAllReduce", &st));
    return post_and_finish(c, fn, &st, work);
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
    dt_nccl_stage st;
    DT_CHECK(begin(c, fn));
    DT_CHECK(dt__nccl_stage_in(c, fn, send, counts[comm->rank] * esz, recv,
                               blocks_extent(n, counts, displs) * esz, &st));
    if (uniform_blocks(n, counts, displs)) {
        DT_CHECK(enqueued(
            c, ncclAllGather(st.send, st.recv, counts[0] * esz, ncclUint8, c->nccl, c->stream), fn,
            "ncclAllGather", &st));
        return post_and_finish(c, fn, &st, work);
    }
    /* uneven: every rank broadcasts its block, in one group */
    ncclResult_t r = ncclGroupStart();
    size_t off = 0;
    for (int root = 0; r == ncclSuccess && root < n; root++) {
        size_t at = displs != NULL ? displs[root] : off;
        off += counts[root];
        if (counts[root] == 0)
            continue;
        char *dst = (char *)st.recv + at * esz;
        r = ncclBroadcast(root == comm->rank ? st.send : dst, dst, counts[root] * esz, ncclUint8,
                          root, c->nccl, c->stream);
    }
    DT_CHECK(group_end(c, r, fn, "grouped ncclBroadcast", &st));
    return post_and_finish(c, fn, &st, work);
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
    dt_nccl_stage st;
    DT_CHECK(nccl_type(fn, dtype, &t));
    DT_CHECK(nccl_op(fn, op, &o));
    DT_CHECK(begin(c, fn));
    DT_CHECK(dt__nccl_stage_in(c, fn, send, blocks_extent(n, counts, NULL) * esz, recv,
                               counts[comm->rank] * esz, &st));
    if (uniform_blocks(n, counts, NULL)) {
        DT_CHECK(enqueued(c,
                          ncclReduceScatter(st.send, st.recv, counts[0], t, o, c->nccl, c->stream),
                          fn, "ncclReduceScatter", &st));
        return post_and_finish(c, fn, &st, work);
    }
    /* uneven: block r is reduced onto rank r, all in one group */
    ncclResult_t r = ncclGroupStart();
    size_t off = 0;
    for (int root = 0; r == ncclSuccess && root < n; root++) {
        const char *src = (const char *)st.send + off * esz;
        off += counts[root];
        if (counts[root] == 0)
            continue;
        r = ncclReduce(src, st.recv, counts[root], t, o, root, c->nccl, c->stream);
    }
    DT_CHECK(group_end(c, r, fn, "grouped ncclReduce", &st));
    return post_and_finish(c, fn, &st, work);
}

dt_status dt__nccl_alltoallv(dt_comm *comm, const void *send, const size_t *send_counts,
                             const size_t *send_displs, void *recv, const size_t *recv_counts,
                             const size_t *recv_displs, dt_dtype dtype, dt_work **work)
{
    const char *fn = "dt_comm_alltoallv";
    dt_nccl_comm *c = dt__nccl(comm);
    size_t esz = dt_dtype_size(dtype);
    int n = comm->size, me = comm->rank;
    dt_nccl_stage st;
    DT_CHECK(begin(c, fn));
    DT_CHECK(dt__nccl_stage_in(c, fn, send, blocks_extent(n, send_counts, send_displs) * esz, recv,
                               blocks_extent(n, recv_counts, recv_displs) * esz, &st));
    size_t soff = 0, roff = 0, my_s = 0, my_r = 0;
    for (int p = 0; p < n; p++) { /* own block: a device copy, not a message */
        if (p == me) {
            my_s = send_displs != NULL ? send_displs[p] : soff;
            my_r = recv_displs != NULL ? recv_displs[p] : roff;
        }
        soff += send_counts[p];
        roff += recv_counts[p];
    }
    const char *own_src = (const char *)st.send + my_s * esz;
    char *own_dst = (char *)st.recv + my_r * esz;
    if (send_counts[me] > 0 && own_src != own_dst) {
        cudaError_t e = cudaMemcpyAsync(own_dst, own_src, send_counts[me] * esz,
                                        cudaMemcpyDeviceToDevice, c->stream);
        if (e != cudaSuccess) {
            dt__nccl_stage_release(c, &st);
            return DT_ERR(DT_ERR_BACKEND, "%s: copying the own block failed: %s", fn,
                          cudaGetErrorString(e));
        }
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
            r = ncclSend((const char *)st.send + s_at * esz, send_counts[p] * esz, ncclUint8, p,
                         c->nccl, c->stream);
        if (r == ncclSuccess && recv_counts[p] > 0)
            r = ncclRecv((char *)st.recv + r_at * esz, recv_counts[p] * esz, ncclUint8, p, c->nccl,
                         c->stream);
    }
    DT_CHECK(group_end(c, r, fn, "grouped ncclSend/ncclRecv", &st));
    return post_and_finish(c, fn, &st, work);
}

dt_status dt__nccl_broadcast(dt_comm *comm, void *buf, size_t count, dt_dtype dtype, int root,
                             dt_work **work)
{
    const char *fn = "dt_comm_broadcast";
    dt_nccl_comm *c = dt__nccl(comm);
    size_t bytes = count * dt_dtype_size(dtype);
    dt_nccl_stage st;
    DT_CHECK(begin(c, fn));
    DT_CHECK(dt__nccl_stage_in(c, fn, buf, bytes, buf, bytes, &st));
    DT_CHECK(enqueued(c,
                      ncclBroadcast(st.send, st.recv, bytes, ncclUint8, root, c->nccl, c->stream),
                      fn, "ncclBroadcast", &st));
    return post_and_finish(c, fn, &st, work);
}

dt_status dt__nccl_barrier(dt_comm *comm, dt_work **work)
{
    const char *fn = "dt_comm_barrier";
    dt_nccl_comm *c = dt__nccl(comm);
    dt_nccl_stage st;
    DT_CHECK(begin(c, fn));
    DT_CHECK(dt__nccl_stage_in(c, fn, NULL, 0, NULL, 0, &st));
    DT_CHECK(enqueued(
        c,
        ncclAllReduce(c->barrier_buf, c->barrier_buf, 1, ncclFloat32, ncclSum, c->nccl, c->stream),
        fn, "ncclAllReduce (barrier)", &st));
    return post_and_finish(c, fn, &st, work);
}
