/*
 * The NCCL backend of dt_comm (device memory): buffers passed to its
 * collectives are CUDA device pointers on the comm's device. Host buffers
 * also work (small host-side exchanges over a comm that happens to be NCCL):
 * they are staged through device scratch, copied in when the operation is
 * posted and back when it completes - correct, but slow for large data.
 *
 * Semantics beyond comm.h:
 *   - every operation runs on the comm's own CUDA stream, ordered after the
 *     work already enqueued on the compute stream (the legacy default stream
 *     the CUDA kernels use) when the operation is posted; a work handle
 *     completes when the stream reaches the operation's event;
 *   - point-to-point tags are checked but not used for matching: NCCL matches
 *     sends and receives between two ranks in posting order. A blocking send
 *     completes only once the peer posted the receive (no eager buffering);
 *   - a timed-out or failed operation aborts the NCCL communicator
 *     (ncclCommAbort): later operations on it fail at once with the first
 *     error; dt_comm_destroy still works.
 */
#ifndef DT_COMM_NCCL_COMM_H
#define DT_COMM_NCCL_COMM_H

#include "comm/comm_impl.h"

struct dt_store;

/*
 * Collective over @p size ranks: the world comm on CUDA device @p device.
 * Rank 0 creates the NCCL unique id and publishes it in @p store; all ranks
 * then join within @p timeout_s (DT_ERR_TIMEOUT otherwise).
 */
dt_status dt__comm_nccl_create_world(struct dt_store *store, int rank, int size, int device,
                                     double timeout_s, dt_comm **out);

#endif
