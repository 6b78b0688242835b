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
 * Progress: a non-blocking collective advances only inside dtensor calls on
 * its comm family (dt_work_test, dt_work_wait, or any other collective): call
 * dt_work_test now and then while computing to overlap communication.
 * Waiting spins for DT_SPIN_US, then sleeps on the transport's event fd, so
 * oversubscribed ranks do not burn the cores their peers need.
 *
 * Algorithms (generic, on the backend's point-to-point), on 3-8 ranks small
 * messages go in one direct round (every rank to every rank): all-reduce when
 * (ranks - 1) x message <= 16 KiB, all-gather and reduce-scatter up to 16 KiB
 * in total, broadcast (root to all) up to 32 KiB. Otherwise: all-reduce by
 * recursive doubling up to 64 KiB, or 256 bytes per rank on more than 256
 * ranks (docs/COMMSIM.md), or fewer elements than ranks, and a
 * pipelined ring above; all-gather and reduce-scatter a ring (reduce-scatters
 * of 16 MiB or more on 3-4 ranks all on shared memory: fold); all-to-all a
 * pairwise exchange; broadcast a binomial tree up to 256 KiB, a pipelined
 * chain above; barrier a dissemination pattern. On a comm spanning hosts
 * with the same number (> 1) of ranks on each, all-reduces over 64 KiB and
 * all-gathers and reduce-scatters past the direct range run hierarchically
 * (hier): inside each host through shared memory, across hosts one stream
 * per local rank, so fewer bytes cross the network. Among ranks of one host,
 * point-to-point goes through shared memory (DT_SHM=0 turns it off); where
 * it cannot, all-to-alls and all-gathers whose blocks all hold 64 KiB or
 * more, and broadcasts of 64 KiB or more, copy directly between the
 * processes (cross-memory attach, see dt_comm_alltoallw), also when forced
 * with peer_copy. DT_ALGO forces a choice, e.g.
 * DT_ALGO=allreduce:ring,broadcast:binomial, with the names allreduce: ring |
 * recursive_doubling | direct | hier; allgather: ring | direct | peer_copy |
 * hier; reduce_scatter: ring | direct | hier | fold (hier falls back to the ring on
 * one host or hosts of different sizes; fold: each rank sums the p pieces of
 * its block at once, in pieces); alltoall: pairwise | peer_copy; alltoallw:
 * pack | peer_copy; broadcast: direct | binomial | pipeline | peer_copy. A comm reads
 * DT_ALGO at its first collective; dt_comm_set_algo() sets it per comm.
 * DT_RING_SEGMENT_KB sets the ring's pipeline segment, DT_HIER_SEGMENT_KB the
 * two-host hierarchical all-reduce's. An unknown name fails
 * with DT_ERR_INVALID_ARG.
 *
 * Reductions: sum, avg, max, min, prod on f32, f64, f16, bf16, i32, i64
 * (other dtypes: DT_ERR_UNSUPPORTED). f16/bf16 are combined in f32 and rounded
 * at each step; avg is the sum divided once by the group size (integer
 * division, truncating, for i32/i64); integer sums and products wrap.
 *
 * Failures: a peer that died gives DT_ERR_PEER_LOST, an operation that does
 * not finish within DT_TIMEOUT_S (or the dt_work_wait timeout) gives
 * DT_ERR_TIMEOUT naming the peer waited for. Every failure of an operation
 * aborts the comm's family - the world comm and every comm split from it,
 * mesh dim comms included - on every rank (as ncclCommAbort): the rank that
 * saw it tells the others, a rank waiting in a collective wakes up and
 * fails within moments instead of at its timeout, and from then on every
 * operation on any comm of the family (pending works, new collectives,
 * splits) fails at once with the first error: its status and a message
 * naming the world rank that failed first and what it saw. A failed
 * non-blocking work poisons the family even when released without a wait.
 * dt_comm_status() asks for that error without communicating; after it only
 * destroying the comms works. Bad arguments give DT_ERR_INVALID_ARG naming
 * the value, before any traffic, and leave the comm usable.
 *
 * Consistency check: every collective's messages carry a hash of its
 * arguments (which collective, dtype, count, reduce op, root, and a caller's
 * context such as a redistribute's placements and global shape), so ranks
 * that call different collectives fail (DT_ERR_INVALID_ARG naming the other
 * world rank) when the first message between them arrives, at no extra round
 * trip. DT_DEBUG=detail also swaps the arguments before every collective (an
 * all-gather more per call): the error then prints both ranks' calls.
 *
 * Thread safety: comms split from one world share one transport worker: use
 * all of them from one thread at a time.
 */
#ifndef DTENSOR_COMM_H
#define DTENSOR_COMM_H

#include "dtensor/core.h"
#include "dtensor/memory.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_comm dt_comm;
typedef struct dt_work dt_work;

/** Split color of a rank that joins no group: its out comm is NULL. */
#define DT_COMM_SPLIT_NOCOLOR (-1)

/**
 * Force collective algorithms on @p comm with DT_ALGO's syntax
 * ("allreduce:ring,broadcast:binomial"); NULL or "" re-reads DT_ALGO from the
 * environment (a comm otherwise reads it once, at its first collective). An
 * unknown name fails when a collective uses it. Not collective, but every
 * member must set the same spec before the next collective.
 */
DT_API dt_status dt_comm_set_algo(dt_comm *comm, const char *spec);

/** This process's rank in @p comm (-1 for NULL). */
DT_API int dt_comm_rank(const dt_comm *comm);
/** Number of ranks in @p comm (0 for NULL). */
DT_API int dt_comm_size(const dt_comm *comm);
/** Backend name: "ucx", "nccl", "self". Borrowed, static. */
DT_API const char *dt_comm_backend(const dt_comm *comm);

/**
 * Collective: partition the group by @p color (>= 0, or DT_COMM_SPLIT_NOCOLOR);
 * within a color, ranks are ordered by (@p key, old rank). A rank with
 * DT_COMM_SPLIT_NOCOLOR gets NULL. The new comm shares the parent's transport
 * (UCX: a local regroup after one small all-gather) and never sees the
 * parent's or a sibling's messages. Caller destroys it with dt_comm_destroy();
 * it may outlive its parent comm but not the runtime.
 * Errors: DT_ERR_INVALID_ARG (negative color other than NOCOLOR), transport errors.
 */
DT_API dt_status dt_comm_split(dt_comm *comm, int color, int key, dt_comm **out);
/** Free a comm (NULL-safe). Not collective. */
DT_API void dt_comm_destroy(dt_comm *comm);

/**
 * recv = reduce(send) over all ranks, @p count elements; send == recv is
 * in-place. Collective. Errors: see the top of this file.
 */
DT_API dt_status dt_comm_allreduce(dt_comm *comm, const void *send, void *recv, size_t count,
                                   dt_dtype dtype, dt_reduce_op op, dt_work **work);
/**
 * recv[r*count ...] = rank r's send[0 .. count): recv holds size*count
 * elements. In-place: send == recv + rank*count (own block already there).
 */
DT_API dt_status dt_comm_allgather(dt_comm *comm, const void *send, void *recv, size_t count,
                                   dt_dtype dtype, dt_work **work);
/**
 * Rank r contributes recv_counts[r] elements (size entries, equal on every
 * rank); they land at recv + displs[r] elements (displs NULL = packed in rank
 * order). Elements of recv outside the blocks are left untouched.
 */
DT_API dt_status dt_comm_allgatherv(dt_comm *comm, const void *send, void *recv,
                                    const size_t *recv_counts, const size_t *displs, dt_dtype dtype,
                                    dt_work **work);
/**
 * recv (count elements) = the reduction over all ranks of block r = send +
 * r*count elements, on rank r. send holds size*count elements. In-place:
 * recv == send + rank*count.
 */
DT_API dt_status dt_comm_reduce_scatter(dt_comm *comm, const void *send, void *recv, size_t count,
                                        dt_dtype dtype, dt_reduce_op op, dt_work **work);
/**
 * Block r has recv_counts[r] elements (equal arrays on every rank), blocks
 * packed in send in rank order; rank r receives the reduction of block r.
 */
DT_API dt_status dt_comm_reduce_scatterv(dt_comm *comm, const void *send, void *recv,
                                         const size_t *recv_counts, dt_dtype dtype, dt_reduce_op op,
                                         dt_work **work);
/**
 * Block p (count elements at send + p*count) goes to rank p, landing at
 * recv + me*count there. send and recv hold size*count elements and must not
 * overlap (no in-place form).
 */
DT_API dt_status dt_comm_alltoall(dt_comm *comm, const void *send, void *recv, size_t count,
                                  dt_dtype dtype, dt_work **work);
/**
 * Rank me sends send_counts[p] elements from send + send_displs[p] to rank p,
 * which receives them (recv_counts[me] there, matching) at recv +
 * recv_displs[me]. Displacements in elements. send_counts[me] must equal
 * recv_counts[me].
 */
DT_API dt_status dt_comm_alltoallv(dt_comm *comm, const void *send, const size_t *send_counts,
                                   const size_t *send_displs, void *recv, const size_t *recv_counts,
                                   const size_t *recv_displs, dt_dtype dtype, dt_work **work);
/**
 * A 2-D block of a buffer, in elements of the collective's dtype: @p rows rows
 * of @p row_count elements, row i starting at offset + i * stride. A block of
 * one row, or with stride == row_count, is one contiguous run.
 */
typedef struct dt_comm_block {
    size_t offset;    /* first element of row 0 */
    size_t rows;      /* number of rows (0: an empty block) */
    size_t row_count; /* elements per row */
    size_t stride;    /* elements from one row start to the next (>= row_count if rows > 1) */
} dt_comm_block;

/**
 * All-to-all of 2-D blocks (MPI_Alltoallw with vector types): rank me sends
 * block send_blocks[p] of send to rank p, which stores it, row-major in the
 * same element order, into its block recv_blocks[me] of recv. The element
 * totals (rows x row_count) must match pairwise; a pair that does not fails
 * with DT_ERR_INVALID_ARG naming both ranks where the transport can tell
 * (same-host copies), else with the transport's size-mismatch error.
 * Receive blocks must not overlap each other or the send blocks.
 *
 * Ranks on one host copy straight between the processes' memory (Linux
 * cross-memory attach, one copy, no packing; DT_CMA=0 turns it off): the
 * side whose block is contiguous is the one addressed remotely. Otherwise
 * blocks are packed, exchanged pairwise and unpacked. Collective; host
 * memory only (a backend without it, NCCL, gives DT_ERR_UNSUPPORTED).
 */
DT_API dt_status dt_comm_alltoallw(dt_comm *comm, const void *send,
                                   const dt_comm_block *send_blocks, void *recv,
                                   const dt_comm_block *recv_blocks, dt_dtype dtype,
                                   dt_work **work);
/** Copy @p root's buf (count elements) to every rank's buf. Collective. */
DT_API dt_status dt_comm_broadcast(dt_comm *comm, void *buf, size_t count, dt_dtype dtype, int root,
                                   dt_work **work);
/**
 * Point-to-point (not collective): @p tag in [0, 2^23); messages with the same
 * (peer, tag) match in posting order; the receive must name the exact count
 * sent (a mismatch is DT_ERR_INVALID_ARG). User tags never match collectives.
 */
DT_API dt_status dt_comm_send(dt_comm *comm, const void *buf, size_t count, dt_dtype dtype,
                              int peer, int tag, dt_work **work);
DT_API dt_status dt_comm_recv(dt_comm *comm, void *buf, size_t count, dt_dtype dtype, int peer,
                              int tag, dt_work **work);
/** Return (or complete the work) only after every rank has entered. Collective. */
DT_API dt_status dt_comm_barrier(dt_comm *comm, dt_work **work);

/**
 * Progress @p work without blocking; *done = true when it finished. Returns
 * DT_OK while running or when it succeeded, its error once it failed.
 */
DT_API dt_status dt_work_test(dt_work *work, bool *done);
/**
 * Wait for @p work; @p timeout_s < 0 uses the comm's timeout (DT_TIMEOUT_S).
 * Sleeps rather than spins when idle. On DT_ERR_TIMEOUT the work is abandoned
 * (see Failures above); a finished work returns its result at once.
 */
DT_API dt_status dt_work_wait(dt_work *work, double timeout_s);
/**
 * Wait for @p n works (NULL entries skipped) under one deadline: @p
 * timeout_s from the first wait (< 0: the first work's comm timeout), not a
 * fresh one per work. After a failure the others of its family fail at once.
 * Returns DT_OK or the first error (with its message).
 */
DT_API dt_status dt_work_wait_all(dt_work *const *works, size_t n, double timeout_s);
/**
 * Free a work handle; one still running is waited for first. A failure it
 * meets is not lost: it aborted the comm family (see Failures), so the next
 * call on the family fails with it. The buffers may be reused after this
 * returns. Release every work before destroying its comm. NULL-safe.
 */
DT_API void dt_work_release(dt_work *work);

/**
 * The asynchronous error of @p comm's family (as ncclCommGetAsyncError):
 * DT_OK, or the error it was aborted with (status and message naming the
 * world rank that failed first). Takes in abort notices that arrived; does
 * not wait or communicate.
 */
DT_API dt_status dt_comm_status(dt_comm *comm);
/**
 * Abort @p comm's family on every rank with @p status (an error) and @p
 * reason, as a failure would (see Failures). Not collective; returns @p
 * status, or the family's error when it was aborted already.
 */
DT_API dt_status dt_comm_abort(dt_comm *comm, dt_status status, const char *reason);

/**
 * Collective over @p comm (NULL: only this rank): every rank's
 * dt_memory_stats_get(cpu) is gathered to rank 0 of @p comm, which prints to
 * @p f (ignored elsewhere, may be NULL there) a header and one row per rank:
 * current and peak MiB of parameters, gradients, optimizer state,
 * activations, communication buffers and the total, then the bytes its
 * allocator caches for reuse (not live). When a rank has used a
 * device (sim, cuda), a second table shows that device's memory the same way,
 * so host and device memory read apart (e.g. optimizer state offloaded to the
 * host). When @p rows is not NULL it receives, on every rank, the host
 * snapshots in rank order (caller allocates comm-size entries).
 */
DT_API dt_status dt_memory_report(dt_comm *comm, const char *title, FILE *f, dt_memory_stats *rows);

#ifdef __cplusplus
}
#endif
#endif /* DTENSOR_COMM_H */
