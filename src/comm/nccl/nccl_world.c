/*
 * NCCL communicators: the world comm (unique id swapped through the store),
 * ncclCommSplit, destroy, and the error side: every communicator runs in
 * NCCL's non-blocking mode so that joining, splitting and finalising can be
 * bounded by the comm's timeout, and a failed or timed-out comm is aborted
 * (ncclCommAbort) instead of hanging the process.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/nccl/nccl_impl.h"
#include "core/log.h"
#include "dtensor/store.h"

static atomic_uint world_seq; /* worlds created by this process: store key namespace */

dt_status dt__nccl_error(ncclResult_t r, dt_nccl_comm *c, const char *fn, const char *what,
                         const char *file, int line)
{
    dt_status s = DT_ERR_BACKEND;
    if (r == ncclRemoteError || r == ncclSystemError)
        s = DT_ERR_PEER_LOST; /* a peer process or the network went away */
    else if (r == ncclInProgress)
        s = DT_ERR_TIMEOUT;
    else if (r == ncclInvalidArgument)
        s = DT_ERR_INVALID_ARG;
    const char *detail = ncclGetLastError(c != NULL ? c->nccl : NULL);
    int rank = c != NULL ? c->base.rank : -1, size = c != NULL ? c->base.size : -1;
    if (r == ncclInProgress)
        return dt__error(s, file, line, "%s: %s did not finish within %.3g s (comm rank %d of %d)",
                         fn, what, c != NULL ? c->base.timeout_s : 0.0, rank, size);
    return dt__error(s, file, line, "%s: %s failed: %s%s%s (comm rank %d of %d)", fn, what,
                     ncclGetErrorString(r), (detail != NULL && detail[0]) ? ": " : "",
                     detail != NULL ? detail : "", rank, size);
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

ncclResult_t dt__nccl_wait_ready(ncclComm_t comm, double timeout_s)
{
    double deadline = dt__clock_now() + timeout_s, nap = 10e-6;
    for (;;) {
        ncclResult_t st = ncclInProgress;
        ncclResult_t r = ncclCommGetAsyncError(comm, &st);
        if (r != ncclSuccess)
            return r;
        if (st != ncclInProgress)
            return st;
        if (dt__clock_now() >= deadline)
            return ncclInProgress;
        sleep_s(nap);
        nap = nap < 1e-3 ? nap * 2 : 1e-3;
    }
}

dt_status dt__nccl_fail(dt_nccl_comm *c, dt_status st)
{
    if (c->broken == DT_OK)
        c->broken = st;
    if (c->nccl != NULL) {
        ncclComm_t n = c->nccl;
        c->nccl = NULL;
        (void)cudaSetDevice(c->device);
        ncclResult_t r = ncclCommAbort(n);
        if (r != ncclSuccess && r != ncclInProgress)
            DT_LOG_WARN("comm", "ncclCommAbort on rank %d of %d: %s", c->base.rank, c->base.size,
                        ncclGetErrorString(r));
        DT_LOG_WARN("comm", "nccl comm (rank %d of %d) aborted after %s", c->base.rank,
                    c->base.size, dt_status_str(st));
    }
    return st;
}

dt_status dt__nccl_usable(dt_nccl_comm *c, const char *fn)
{
    if (c->broken != DT_OK || c->nccl == NULL)
        return DT_ERR(c->broken != DT_OK ? c->broken : DT_ERR_INTERNAL,
                      "%s: the NCCL communicator (rank %d of %d) was aborted after an earlier %s",
                      fn, c->base.rank, c->base.size, dt_status_str(c->broken));
    cudaError_t e = cudaSetDevice(c->device);
    if (e != cudaSuccess)
        return DT_ERR(DT_ERR_BACKEND, "%s: cudaSetDevice(%d) failed: %s", fn, c->device,
                      cudaGetErrorString(e));
    return DT_OK;
}

dt_status dt__nccl_order(dt_nccl_comm *c, const char *fn)
{
    cudaError_t e = cudaEventRecord(c->ordered, 0);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent(c->stream, c->ordered, 0);
    if (e != cudaSuccess)
        return DT_ERR(DT_ERR_BACKEND, "%s: ordering after the compute stream failed: %s", fn,
                      cudaGetErrorString(e));
    return DT_OK;
}

dt_status dt__nccl_async_status(dt_nccl_comm *c, const char *fn)
{
    if (c->broken != DT_OK || c->nccl == NULL)
        return dt__nccl_usable(c, fn);
    ncclResult_t st = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(c->nccl, &st);
    if (r != ncclSuccess)
        st = r;
    if (st == ncclSuccess || st == ncclInProgress)
        return DT_OK;
    return dt__nccl_fail(c, dt__nccl_error(st, c, fn, "the communicator", __FILE__, __LINE__));
}

/* Wrap a ready NCCL comm: its stream, ordering event and barrier buffer. */
static dt_status comm_wrap(ncclComm_t nc, int device, double timeout_s, dt_comm **out)
{
    const char *fn = "dt_comm_nccl";
    dt_status s = DT_OK;
    dt_nccl_comm *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        ncclCommAbort(nc);
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory for a comm", fn);
    }
    c->nccl = nc;
    c->device = device;
    c->base.ops = &dt__nccl_ops;
    c->base.impl = c;
    c->base.timeout_s = timeout_s;
    cudaError_t e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&c->ordered, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&c->barrier_buf, sizeof(float));
    if (e == cudaSuccess)
        e = cudaMemset(c->barrier_buf, 0, sizeof(float));
    if (e != cudaSuccess) {
        s = DT_ERR(e == cudaErrorMemoryAllocation ? DT_ERR_NO_MEMORY : DT_ERR_BACKEND,
                   "%s: creating the comm's stream/event/buffer failed: %s", fn,
                   cudaGetErrorString(e));
        goto err_destroy;
    }
    ncclResult_t r = ncclCommUserRank(nc, &c->base.rank);
    if (r == ncclSuccess)
        r = ncclCommCount(nc, &c->base.size);
    if (r != ncclSuccess) {
        s = dt__nccl_error(r, c, fn, "ncclCommUserRank/ncclCommCount", __FILE__, __LINE__);
        goto err_destroy;
    }
    *out = &c->base;
    return DT_OK;
err_destroy:
    dt__nccl_fail(c, s);
    c->base.ops->destroy(&c->base);
    return s;
}

dt_status dt__comm_nccl_create_world(struct dt_store *store, int rank, int size, int device,
                                     double timeout_s, dt_comm **out)
{
    const char *fn = "dt__comm_nccl_create_world";
    DT_ARG_NOT_NULL(store);
    DT_ARG_NOT_NULL(out);
    if (size < 1 || rank < 0 || rank >= size)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: rank %d of size %d", fn, rank, size);
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess)
        return DT_ERR(DT_ERR_BACKEND, "%s: cudaSetDevice(%d) on rank %d failed: %s", fn, device,
                      rank, cudaGetErrorString(e));
    char key[64];
    snprintf(key, sizeof(key), "dt/nccl/world/%u/id", atomic_fetch_add(&world_seq, 1u));
    ncclUniqueId id;
    if (rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess)
            return dt__nccl_error(r, NULL, fn, "ncclGetUniqueId", __FILE__, __LINE__);
        DT_CHECK(dt_store_set(store, key, &id, sizeof(id)));
    } else {
        void *v = NULL;
        size_t len = 0;
        DT_CHECK(dt_store_get(store, key, &v, &len));
        if (len != sizeof(id)) {
            free(v);
            return DT_ERR(DT_ERR_FORMAT, "%s: store key %s holds %zu bytes, not an NCCL id (%zu)",
                          fn, key, len, sizeof(id));
        }
        memcpy(&id, v, sizeof(id));
        free(v);
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t nc = NULL;
    ncclResult_t r = ncclCommInitRankConfig(&nc, size, id, rank, &cfg);
    if (r == ncclInProgress || (r == ncclSuccess && nc != NULL))
        r = dt__nccl_wait_ready(nc, timeout_s);
    if (r != ncclSuccess) {
        dt_status s =
            r == ncclInProgress
                ? DT_ERR(DT_ERR_TIMEOUT,
                         "%s: rank %d waited %.3g s for all %d ranks to join the NCCL "
                         "world",
                         fn, rank, timeout_s, size)
                : dt__nccl_error(r, NULL, fn, "ncclCommInitRankConfig", __FILE__, __LINE__);
        if (nc != NULL)
            ncclCommAbort(nc);
        return s;
    }
    DT_LOG_DEBUG("comm", "nccl world: rank %d of %d on cuda:%d", rank, size, device);
    return comm_wrap(nc, device, timeout_s, out);
}

static dt_status nccl_split(dt_comm *comm, int color, int key, dt_comm **out)
{
    const char *fn = "dt_comm_split";
    dt_nccl_comm *c = dt__nccl(comm);
    DT_CHECK(dt__nccl_usable(c, fn));
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t nc = NULL;
    int ncolor = color == DT_COMM_SPLIT_NOCOLOR ? NCCL_SPLIT_NOCOLOR : color;
    ncclResult_t r = ncclCommSplit(c->nccl, ncolor, key, &nc, &cfg);
    if (r == ncclInProgress || r == ncclSuccess)
        r = dt__nccl_wait_ready(c->nccl, comm->timeout_s);
    if (r == ncclSuccess && nc != NULL)
        r = dt__nccl_wait_ready(nc, comm->timeout_s);
    if (r != ncclSuccess) {
        if (nc != NULL)
            ncclCommAbort(nc);
        return dt__nccl_fail(c, dt__nccl_error(r, c, fn, "ncclCommSplit", __FILE__, __LINE__));
    }
    if (nc == NULL) { /* DT_COMM_SPLIT_NOCOLOR */
        *out = NULL;
        return DT_OK;
    }
    return comm_wrap(nc, c->device, comm->timeout_s, out);
}

static void nccl_destroy(dt_comm *comm)
{
    if (comm == NULL)
        return;
    dt_nccl_comm *c = dt__nccl(comm);
    (void)cudaSetDevice(c->device);
    if (c->nccl != NULL && c->broken == DT_OK)
        (void)dt__nccl_flush(c, "dt_comm_destroy"); /* an open point-to-point group */
    if (c->nccl != NULL) {
        /* finalize flushes what is still queued; a comm that cannot is aborted */
        ncclResult_t r = ncclCommFinalize(c->nccl);
        if (r == ncclInProgress || r == ncclSuccess)
            r = dt__nccl_wait_ready(c->nccl, comm->timeout_s);
        if (r == ncclSuccess) {
            r = ncclCommDestroy(c->nccl);
            if (r != ncclSuccess)
                DT_LOG_WARN("comm", "ncclCommDestroy (rank %d of %d): %s", comm->rank, comm->size,
                            ncclGetErrorString(r));
            c->nccl = NULL;
        } else {
            DT_LOG_WARN("comm", "nccl comm (rank %d of %d) did not finalize (%s): aborting",
                        comm->rank, comm->size, ncclGetErrorString(r));
            dt__nccl_fail(c, DT_ERR_TIMEOUT);
        }
    }
    if (c->barrier_buf != NULL)
        cudaFree(c->barrier_buf);
    if (c->ordered != NULL)
        cudaEventDestroy(c->ordered);
    if (c->stream != NULL)
        cudaStreamDestroy(c->stream);
    dt__nccl_p2p_free(c);
    free(c);
}

/*
 * NCCL progresses on its own threads: waiting means sleeping a little, and
 * noticing an asynchronous failure (a peer that died) as early as possible.
 */
static dt_status nccl_progress(dt_comm *comm, double wait_s)
{
    dt_nccl_comm *c = dt__nccl(comm);
    DT_CHECK(dt__nccl_async_status(c, "dt_comm_progress"));
    DT_CHECK(dt__nccl_flush(c, "dt_comm_progress")); /* posted point-to-point must run */
    if (wait_s > 0)
        sleep_s(wait_s < 50e-6 ? wait_s : 50e-6);
    return DT_OK;
}

/* The table's entries implemented in nccl_coll.c */
dt_status dt__nccl_isend(dt_comm *comm, const void *buf, size_t bytes, int peer, uint32_t tag,
                         void **req);
dt_status dt__nccl_irecv(dt_comm *comm, void *buf, size_t bytes, int peer, uint32_t tag,
                         void **req);
dt_status dt__nccl_req_test(dt_comm *comm, void *req);
void dt__nccl_req_cancel(dt_comm *comm, void *req);
dt_status dt__nccl_allreduce(dt_comm *comm, const void *send, void *recv, size_t count,
                             dt_dtype dtype, dt_reduce_op op, dt_work **work);
dt_status dt__nccl_allgatherv(dt_comm *comm, const void *send, void *recv, const size_t *counts,
                              const size_t *displs, dt_dtype dtype, dt_work **work);
dt_status dt__nccl_reduce_scatterv(dt_comm *comm, const void *send, void *recv,
                                   const size_t *counts, dt_dtype dtype, dt_reduce_op op,
                                   dt_work **work);
dt_status dt__nccl_alltoallv(dt_comm *comm, const void *send, const size_t *send_counts,
                             const size_t *send_displs, void *recv, const size_t *recv_counts,
                             const size_t *recv_displs, dt_dtype dtype, dt_work **work);
dt_status dt__nccl_broadcast(dt_comm *comm, void *buf, size_t count, dt_dtype dtype, int root,
                             dt_work **work);
dt_status dt__nccl_barrier(dt_comm *comm, dt_work **work);

const dt_comm_ops dt__nccl_ops = {
    .name = "nccl",
    .device_memory = true,
    .isend = dt__nccl_isend,
    .irecv = dt__nccl_irecv,
    .req_test = dt__nccl_req_test,
    .req_cancel = dt__nccl_req_cancel,
    .progress = nccl_progress,
    .split = nccl_split,
    .destroy = nccl_destroy,
    .allreduce = dt__nccl_allreduce,
    .allgatherv = dt__nccl_allgatherv,
    .reduce_scatterv = dt__nccl_reduce_scatterv,
    .alltoallv = dt__nccl_alltoallv,
    .broadcast = dt__nccl_broadcast,
    .barrier = dt__nccl_barrier,
};
