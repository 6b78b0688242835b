/*
 * Tiny collectives (comm_tiny.c): a blocking collective whose every message
 * fits DT_TINY_BYTES, on a comm of 2..DT_TINY_MAX_RANKS ranks that all talk
 * through shared memory, runs without the schedule engine. The hook in each
 * public collective (comm.c) is one line after DT__COMM_BEGIN:
 *
 *     if (dt__comm_tiny(comm, msg_bytes, work))
 *         return dt__tiny_allreduce(comm, ...);
 *
 * It sends the same messages with the same tag as the algorithm the normal
 * path picks at these sizes (see comm_tiny.c), so ranks may mix both.
 */
#ifndef DT_COMM_TINY_H
#define DT_COMM_TINY_H

#include "comm/comm_impl.h"

/* Largest message of a tiny collective (half a ring slot). */
#define DT_TINY_BYTES 256
/* Largest comm: the direct algorithms' range (comm_choose.c). */
#define DT_TINY_MAX_RANKS 8

/* Whether @p comm takes the tiny path at all: no forced algorithm, no
 * DT_DEBUG=detail exchange, no native collectives, shared memory to every
 * member (the same answer on every member). */
bool dt__comm_tiny_ready(dt_comm *comm);

/* Whether a collective of @p ranks ranks whose largest message is @p bytes
 * is small enough for the tiny path (what tools/commsim asks too). */
static inline bool dt__tiny_fits(int ranks, size_t bytes)
{
    return bytes - 1 < DT_TINY_BYTES && ranks >= 2 && ranks <= DT_TINY_MAX_RANKS;
}

/* Whether a collective whose largest message is @p bytes (> 0) takes the
 * tiny path: blocking (@p work NULL), small, on a comm that is ready. */
static inline bool dt__comm_tiny(dt_comm *comm, size_t bytes, dt_work **work)
{
    return work == NULL && dt__tiny_fits(comm->size, bytes) && dt__comm_tiny_ready(comm);
}

/* The public collectives' semantics, arguments validated, DT__COMM_BEGIN done. */
dt_status dt__tiny_allreduce(dt_comm *comm, const void *send, void *recv, size_t count,
                             dt_dtype dtype, dt_reduce_op op);
dt_status dt__tiny_allgather(dt_comm *comm, const void *send, void *recv, size_t count,
                             dt_dtype dtype);
dt_status dt__tiny_reduce_scatter(dt_comm *comm, const void *send, void *recv, size_t count,
                                  dt_dtype dtype, dt_reduce_op op);
dt_status dt__tiny_alltoall(dt_comm *comm, const void *send, void *recv, size_t count,
                            dt_dtype dtype);
dt_status dt__tiny_broadcast(dt_comm *comm, void *buf, size_t count, dt_dtype dtype, int root);

#endif
