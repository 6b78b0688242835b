/*
 * dt_comm_alltoallw: validating 2-D blocks (elements -> bytes at absolute
 * addresses) and choosing between same-host peer copies and packing.
 */
#include <stdlib.h>
#include <string.h>

#include "comm/comm_check.h"
#include "comm/comm_dispatch.h"
#include "comm/comm_staged.h"
#include "core/error.h"

/* @p b (elements) as bytes at its absolute address in @p base; checked. */
static dt_status to_block2d(const char *fn, const char *what, int q, const void *base,
                            const dt_comm_block *b, size_t esz, dt__block2d *out)
{
    if (b->rows > 1 && b->stride < b->row_count)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s block %d has stride %zu < row_count %zu", fn,
                      what, q, b->stride, b->row_count);
    if (b->rows > 0 && b->row_count > 0 &&
        (b->row_count > SIZE_MAX / 16 / esz || b->rows > SIZE_MAX / 16 / esz / b->row_count ||
         b->stride > SIZE_MAX / 16 / esz / b->rows || b->offset > SIZE_MAX / 16 / esz))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: %s block %d (%zu rows of %zu, stride %zu) is "
                      "too large",
                      fn, what, q, b->rows, b->row_count, b->stride);
    bool empty = b->rows == 0 || b->row_count == 0;
    if (!empty && base == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: %s is NULL but block %d holds %zu x %zu "
                      "elements",
                      fn, what, q, b->rows, b->row_count);
    *out = (dt__block2d){
        .addr = empty ? 0 : (uint64_t)(uintptr_t)((const char *)base + b->offset * esz),
        .rows = empty ? 0 : b->rows,
        .row_bytes = empty ? 0 : b->row_count * esz,
        .pitch = b->stride * esz};
    return DT_OK;
}

/* Rows streamed through shared memory when every member talks so (two
 * copies per byte, as the bare all-to-all), else same-host copies when the
 * backend reaches every member so, else packing; DT_ALGO=alltoallw:
 * stream|peer_copy|pack forces one. */
static dt_status alltoallw_sched(dt_comm *comm, const dt__block2d *send, const dt__block2d *recv,
                                 dt__sched *s)
{
    bool can_copy = dt__comm_can_peer_copy(comm);
    bool can_stream = comm->ops->isend2d != NULL && dt__comm_p2p_shm(comm);
    char name[32];
    const char *algo = dt__comm_forced_algo(comm, "alltoallw", name, sizeof(name));
    if (algo == NULL)
        algo = can_stream ? "stream" : can_copy ? "peer_copy" : "pack";
    if (strcmp(algo, "pack") == 0)
        return dt__algo_alltoallw_pack(comm, send, recv, s);
    if (strcmp(algo, "stream") == 0 && !can_stream)
        return DT_ERR(DT_ERR_UNSUPPORTED, "DT_ALGO: alltoallw:stream needs every rank of the "
                                          "comm on this host with shared memory (DT_SHM not 0)");
    if (strcmp(algo, "stream") == 0)
        return dt__algo_alltoallw_stream(comm, send, recv, s);
    if (strcmp(algo, "peer_copy") != 0)
        return dt__comm_unknown_algo("alltoallw", algo);
    if (!can_copy)
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "DT_ALGO: alltoallw:peer_copy needs every rank of "
                      "the comm on this host with cross-memory attach (DT_CMA not 0)");
    return dt__algo_alltoallw_peer_copy(comm, send, recv, s);
}

dt_status dt_comm_alltoallw(dt_comm *comm, const void *send, const dt_comm_block *send_blocks,
                            void *recv, const dt_comm_block *recv_blocks, dt_dtype dtype,
                            dt_work **work)
{
    static const char fn[] = "dt_comm_alltoallw";
    DT_CHECK(dt__comm_check_comm(fn, comm));
    DT_CHECK(dt__comm_check_dtype(fn, dtype));
    if (send_blocks == NULL || recv_blocks == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: send_blocks and recv_blocks must not be NULL", fn);
    if (dt__comm_staged_needed(comm, 2, (const void *const[]){send, recv}))
        return dt__staged_alltoallw(comm, send, send_blocks, recv, recv_blocks, dtype, work);
    if (!dt__comm_has_alltoallw(comm))
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "%s: the %s backend has no 2-D all-to-all (use "
                      "dt_comm_alltoallv on packed blocks)",
                      fn, comm->ops->name);
    size_t esz = dt_dtype_size(dtype), p = (size_t)comm->size;
    dt__block2d *blk = malloc(2 * p * sizeof(*blk));
    if (blk == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory for %zu block descriptors", fn, 2 * p);
    dt_status st = DT_OK;
    for (size_t q = 0; q < p && st == DT_OK; q++) {
        st = to_block2d(fn, "send", (int)q, send, &send_blocks[q], esz, &blk[q]);
        if (st == DT_OK)
            st = to_block2d(fn, "recv", (int)q, recv, &recv_blocks[q], esz, &blk[p + q]);
    }
    int me = comm->rank;
    if (st == DT_OK && blk[me].rows * blk[me].row_bytes != blk[p + me].rows * blk[p + me].row_bytes)
        st = DT_ERR(DT_ERR_INVALID_ARG,
                    "%s: rank %d sends itself %zu x %zu elements but "
                    "expects %zu x %zu",
                    fn, me, send_blocks[me].rows, send_blocks[me].row_count, recv_blocks[me].rows,
                    recv_blocks[me].row_count);
    if (st == DT_OK) /* block sizes differ by rank: the transfers check them */
        st = dt__comm_begin(comm, &(dt__coll_desc){fn, dtype, -1, -1, 0, 0, 0}, sizeof(fn) - 1);
    dt__sched s;
    dt__comm_sched_for(&s, comm, dtype, DT_REDUCE_OP_SUM);
    if (st == DT_OK)
        st = alltoallw_sched(comm, blk, blk + p, &s);
    free(blk);
    if (st != DT_OK) {
        dt__sched_free(&s);
        return st;
    }
    return dt__comm_run(comm, fn, &s, work);
}
