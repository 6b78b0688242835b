/*
 * dtensor/comm.h - process groups and collectives.
 *
 * A dt_comm is a group of ranks with a backend (UCX for host memory, NCCL for
 * CUDA memory). Buffers are raw pointers on the comm's device; counts are in
 * elements of `dtype`. Every collective is collective over the group: all
 * members call it in the same order with matching arguments.
 *
 * Blocking and non-blocking: each collective takes `dt_work **work`. With
 * work == NULL the call blocks until done. Otherwise it returns as soon as
 * the operation is posted and writes a handle the caller completes with
 * dt_work_wait() (or polls with dt_work_test()) and frees with
 * dt_work_release(); the buffers must stay valid until then.
 *
 * Failures: a peer that died gives DT_ERR_PEER_LOST, an operation that does
 * not finish within DT_TIMEOUT_S gives DT_ERR_TIMEOUT naming the peer waited
 * for. The comm can still be destroyed afterwards.
 *
 * Thread safety: one thread at a time per comm.
 */
#ifndef DTENSOR_COMM_H
#define DTENSOR_COMM_H

#include "dtensor/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_comm dt_comm;
typedef struct dt_work dt_work;

/** Split color of a rank that joins no group: its out comm is NULL. */
#define DT_COMM_SPLIT_NOCOLOR (-1)

DT_API int dt_comm_rank(const dt_comm *comm);
DT_API int dt_comm_size(const dt_comm *comm);
/** Backend name: "ucx", "nccl", "self". Borrowed, static. */
DT_API const char *dt_comm_backend(const dt_comm *comm);

/**
 * Collective: partition the group by @p color; within a color, ranks are
 * ordered by (@p key, old rank). A rank with DT_COMM_SPLIT_NOCOLOR gets NULL.
 * The new comm is destroyed with dt_comm_destroy() (before its parent).
 */
DT_API dt_status dt_comm_split(dt_comm *comm, int color, int key, dt_comm **out);
/** Free a comm (NULL-safe). Not collective. */
DT_API void dt_comm_destroy(dt_comm *comm);

/** recv = reduce(send) over all ranks; send == recv is in-place. */
DT_API dt_status dt_comm_allreduce(dt_comm *comm, const void *send, void *recv, size_t count,
                                   dt_dtype dtype, dt_reduce_op op, dt_work **work);
/** recv[r*count ...] = rank r's send[0 .. count). */
DT_API dt_status dt_comm_allgather(dt_comm *comm, const void *send, void *recv, size_t count,
                                   dt_dtype dtype, dt_work **work);
/** Rank r contributes recv_counts[r] elements; they land at recv + displs[r] (NULL = packed). */
DT_API dt_status dt_comm_allgatherv(dt_comm *comm, const void *send, void *recv,
                                    const size_t *recv_counts, const size_t *displs,
                                    dt_dtype dtype, dt_work **work);
/** recv = the reduction of block r (count elements at send + r*count) for rank r. */
DT_API dt_status dt_comm_reduce_scatter(dt_comm *comm, const void *send, void *recv,
                                        size_t count, dt_dtype dtype, dt_reduce_op op,
                                        dt_work **work);
/** Block r has recv_counts[r] elements, blocks packed in send. */
DT_API dt_status dt_comm_reduce_scatterv(dt_comm *comm, const void *send, void *recv,
                                         const size_t *recv_counts, dt_dtype dtype,
                                         dt_reduce_op op, dt_work **work);
/** Block p (count elements) of send goes to rank p, landing at recv + me*count... */
DT_API dt_status dt_comm_alltoall(dt_comm *comm, const void *send, void *recv, size_t count,
                                  dt_dtype dtype, dt_work **work);
DT_API dt_status dt_comm_alltoallv(dt_comm *comm, const void *send, const size_t *send_counts,
                                   const size_t *send_displs, void *recv,
                                   const size_t *recv_counts, const size_t *recv_displs,
                                   dt_dtype dtype, dt_work **work);
DT_API dt_status dt_comm_broadcast(dt_comm *comm, void *buf, size_t count, dt_dtype dtype,
                                   int root, dt_work **work);
/** Point-to-point; a (peer, tag) pair matches in order. */
DT_API dt_status dt_comm_send(dt_comm *comm, const void *buf, size_t count, dt_dtype dtype,
                              int peer, int tag, dt_work **work);
DT_API dt_status dt_comm_recv(dt_comm *comm, void *buf, size_t count, dt_dtype dtype, int peer,
                              int tag, dt_work **work);
DT_API dt_status dt_comm_barrier(dt_comm *comm, dt_work **work);

/** Progress @p work; *done = true when complete. Returns its error if it failed. */
DT_API dt_status dt_work_test(dt_work *work, bool *done);
/** Wait for @p work; @p timeout_s < 0 uses DT_TIMEOUT_S. Sleeps rather than spins when idle. */
DT_API dt_status dt_work_wait(dt_work *work, double timeout_s);
/** Free a work handle (waits for it first if still running). NULL-safe. */
DT_API void dt_work_release(dt_work *work);

#ifdef __cplusplus
}
#endif
#endif /* DTENSOR_COMM_H */
