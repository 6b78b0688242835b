/*
 * Device buffers on a transport that reads host memory only (UCX, self):
 * each public collective first asks dt__comm_staged_needed; when a buffer is
 * device memory (kernels' `owns`, e.g. the sim device or CUDA without NCCL),
 * the collective runs on host copies instead, as gloo does for CUDA tensors:
 * the device ranges are copied to host buffers (a range that is only written
 * too, so bytes the collective does not write survive), the same collective
 * runs on the host buffers, and the written ranges are copied back when it
 * completes (at once when blocking, at the work's completion otherwise).
 */
#ifndef DT_COMM_STAGED_H
#define DT_COMM_STAGED_H

#include "comm/comm_impl.h"

/* Whether one of @p bufs[0..n) is device memory that @p comm's transport cannot read. */
bool dt__comm_staged_needed(const dt_comm *comm, int n, const void *const *bufs);

dt_status dt__staged_allreduce(dt_comm *comm, const void *send, void *recv, size_t count,
                               dt_dtype dtype, dt_reduce_op op, dt_work **work);
dt_status dt__staged_allgather(dt_comm *comm, const void *send, void *recv, size_t count,
                               dt_dtype dtype, dt_work **work);
dt_status dt__staged_reduce_scatter(dt_comm *comm, const void *send, void *recv, size_t count,
                                    dt_dtype dtype, dt_reduce_op op, dt_work **work);
dt_status dt__staged_alltoall(dt_comm *comm, const void *send, void *recv, size_t count,
                              dt_dtype dtype, dt_work **work);
dt_status dt__staged_allgatherv(dt_comm *comm, const void *send, void *recv, const size_t *counts,
                                const size_t *displs, dt_dtype dtype, dt_work **work);
dt_status dt__staged_reduce_scatterv(dt_comm *comm, const void *send, void *recv,
                                     const size_t *counts, dt_dtype dtype, dt_reduce_op op,
                                     dt_work **work);
dt_status dt__staged_alltoallv(dt_comm *comm, const void *send, const size_t *sc, const size_t *sd,
                               void *recv, const size_t *rc, const size_t *rd, dt_dtype dtype,
                               dt_work **work);
dt_status dt__staged_alltoallw(dt_comm *comm, const void *send, const dt_comm_block *sb, void *recv,
                               const dt_comm_block *rb, dt_dtype dtype, dt_work **work);
dt_status dt__staged_broadcast(dt_comm *comm, void *buf, size_t count, dt_dtype dtype, int root,
                               dt_work **work);
dt_status dt__staged_send(dt_comm *comm, const void *buf, size_t count, dt_dtype dtype, int peer,
                          int tag, dt_work **work);
dt_status dt__staged_recv(dt_comm *comm, void *buf, size_t count, dt_dtype dtype, int peer, int tag,
                          dt_work **work);

#endif
