/*
 * Generic collectives as schedules of point-to-point rounds (sched.c), the
 * element-wise reductions they run (reduce_combine.c), and one algorithm per
 * file in src/comm/algo/.
 */
#ifndef DT_COMM_SCHED_H
#define DT_COMM_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/block2d.h"
#include "dtensor/comm.h"

/* ------------------------------------------------------------ schedules */

/*
 * A generic collective is a schedule: a list of rounds run in order. A round
 * posts all its sends and receives, waits for them, then runs its local ops
 * (reduce, copy, scale) in order. A round flagged `early` is independent of
 * the previous round's local ops: its transfers are posted before those run,
 * which pipelines a ring (transfer of segment i+1 overlaps reduce of i).
 */
typedef enum dt__op_kind {
    DT__OP_SEND,   /* src, bytes -> peer */
    DT__OP_RECV,   /* dst, bytes <- peer; with src: then dst = op(dst, src) (recv_reduce) */
    DT__OP_SEND2D, /* the byte stream of block (dt__block2d *)src, n bytes -> peer */
    DT__OP_REDUCE, /* dst[i] = op(dst[i], src[i]) for count elements; op(aux[i], src[i]) with aux */
    DT__OP_COPY,   /* memcpy(dst, src, bytes) */
    DT__OP_SCALE,  /* dst[i] /= divisor (the avg of a sum) for count elements */
    DT__OP_COPY2D, /* block (dt__block2d *)dst = block (dt__block2d *)src, part part/nparts */
    /* Same-host copy between my block (dt__block2d *)src and peer's block
     * (dt__block2d *)dst, a descriptor received earlier; n: 1 when my block
     * is the one sent, 0 when it is the one received; only part part of
     * nparts of my block (dt__block2d_part). Which of the two ranks moves
     * the data: dt__peer_copy_run. */
    DT__OP_PEER_COPY,
    /* Fail unless all n status words at (uint64_t *)src are DT_OK (word i is
     * comm rank i's; a rank that failed shares its status instead of leaving
     * its peers waiting). A failing PEER_COPY stores its status in *aux. */
    DT__OP_CHECK
} dt__op_kind;

typedef struct dt__op {
    dt__op_kind kind;
    int peer;
    void *dst;
    const void *src;
    size_t n;              /* bytes for SEND/RECV/COPY, elements for REDUCE/SCALE */
    void *aux;             /* PEER_COPY: where a failure's status goes */
    uint32_t part, nparts; /* COPY2D, PEER_COPY: the slice of the block */
} dt__op;

typedef struct dt__round {
    size_t first, count; /* ops[first .. first+count) */
    bool early;
} dt__round;

/* Ops and rounds a schedule holds before it allocates (most small collectives). */
#define DT__SCHED_INLINE_OPS    16
#define DT__SCHED_INLINE_ROUNDS 8

typedef struct dt__sched {
    dt__op *ops;
    size_t nops, cap_ops;
    dt__round *rounds;
    size_t nrounds, cap_rounds;
    dt_dtype dtype;
    dt_reduce_op op; /* SUM for AVG (the SCALE op divides) */
    int divisor;
    void *scratch;        /* freed with the schedule */
    size_t scratch_block; /* its block size in the host allocator's cache */
    bool p2p;             /* user point-to-point: use p2p_tag, not a collective sequence */
    uint32_t p2p_tag;
    dt_status status;                        /* first build error (NO_MEMORY), checked at the end */
    dt__op inline_ops[DT__SCHED_INLINE_OPS]; /* ops/rounds point here until they grow */
    dt__round inline_rounds[DT__SCHED_INLINE_ROUNDS];
} dt__sched;

void dt__sched_init(dt__sched *s, dt_dtype dtype, dt_reduce_op op);
void dt__sched_free(dt__sched *s);
/* Move @p src into @p dst (uninitialised); src is left empty. */
void dt__sched_move(dt__sched *dst, dt__sched *src);
/* Start a new round; subsequent adds go into it. */
void dt__sched_round(dt__sched *s, bool early);
void dt__sched_send(dt__sched *s, const void *src, size_t bytes, int peer);
void dt__sched_recv(dt__sched *s, void *dst, size_t bytes, int peer);
/* Send the rows of 2-D block @p src as one message (the backend's isend2d;
 * the descriptor lives as long as the schedule). */
void dt__sched_send2d(dt__sched *s, const dt__block2d *src, const dt__block2d *ride, int peer);
/* Receive into @p dst and fold @p src into it: dst = op(received, src), the
 * same values as a receive then dt__sched_reduce(dst, src). A backend with
 * irecv_reduce folds the message as it lands (out of its own buffers);
 * @p dst and @p src must not overlap. */
void dt__sched_recv_reduce(dt__sched *s, void *dst, const void *src, size_t bytes, int peer);
void dt__sched_reduce(dt__sched *s, void *dst, const void *src, size_t count);
/* dst = op(x, src): the values of copying x to dst, then dt__sched_reduce(dst,
 * src), in one pass; dst overlaps neither. */
void dt__sched_reduce3(dt__sched *s, void *dst, const void *x, const void *src, size_t count);
void dt__sched_copy(dt__sched *s, void *dst, const void *src, size_t bytes);
void dt__sched_scale(dt__sched *s, void *dst, size_t count, int divisor);
/* Scratch memory owned by the schedule (one block per schedule). */
void *dt__sched_scratch(dt__sched *s, size_t bytes);
/* Copy of part @p part of @p nparts of 2-D blocks (0 of 1: all); the
 * descriptors must live as long as the schedule. */
void dt__sched_copy2d(dt__sched *s, const dt__block2d *dst, const dt__block2d *src, uint32_t part,
                      uint32_t nparts);
/* A DT__OP_PEER_COPY (see there); descriptors live as long as the schedule. */
void dt__sched_peer_copy(dt__sched *s, int peer, bool sending, const dt__block2d *mine,
                         const dt__block2d *theirs, uint64_t *status, uint32_t part,
                         uint32_t nparts);
/* A DT__OP_CHECK of @p n status words. */
void dt__sched_check(dt__sched *s, const uint64_t *status, size_t n);

/* ------------------------------------------------------------ reductions */

/* dst[i] = op(dst[i], src[i]); op is never AVG here (use SUM + divide). */
void dt__reduce(void *dst, const void *src, size_t count, dt_dtype dtype, dt_reduce_op op);
/* dst[i] = op(x[i], y[i]): the same values as copying x to dst and then
 * dt__reduce(dst, y); dst overlaps neither x nor y. */
void dt__reduce3(void *dst, const void *x, const void *y, size_t count, dt_dtype dtype,
                 dt_reduce_op op);
/* dst[i] = dst[i] / divisor (integer division for integer dtypes). */
void dt__reduce_divide(void *dst, size_t count, dt_dtype dtype, int divisor);
/* Whether dt__reduce supports (dtype, op). */
bool dt__reduce_supported(dt_dtype dtype, dt_reduce_op op);

/* ------------------------------------------------------------ algorithms */

/* Each fills @p s (already initialised with dtype/op) for the calling rank. */
dt_status dt__algo_allreduce_ring(dt_comm *c, const void *send, void *recv, size_t count,
                                  dt__sched *s);
dt_status dt__algo_allreduce_recursive_doubling(dt_comm *c, const void *send, void *recv,
                                                size_t count, dt__sched *s);
dt_status dt__algo_allreduce_direct(dt_comm *c, const void *send, void *recv, size_t count,
                                    dt__sched *s);
/* Two-level (hosts, then ranks of a host: algo/hier_topo.h); the ring where
 * the comm is on one host or its hosts differ in size. */
dt_status dt__algo_allreduce_hier(dt_comm *c, const void *send, void *recv, size_t count,
                                  dt__sched *s);
dt_status dt__algo_allgatherv_hier(dt_comm *c, const void *send, void *recv, const size_t *counts,
                                   const size_t *displs, dt__sched *s);
dt_status dt__algo_reduce_scatterv_hier(dt_comm *c, const void *send, void *recv,
                                        const size_t *counts, dt__sched *s);
dt_status dt__algo_allgatherv_direct(dt_comm *c, const void *send, void *recv, const size_t *counts,
                                     const size_t *displs, dt__sched *s);
dt_status dt__algo_allgatherv_ring(dt_comm *c, const void *send, void *recv, const size_t *counts,
                                   const size_t *displs, dt__sched *s);
dt_status dt__algo_reduce_scatterv_direct(dt_comm *c, const void *send, void *recv,
                                          const size_t *counts, dt__sched *s);
dt_status dt__algo_reduce_scatterv_ring(dt_comm *c, const void *send, void *recv,
                                        const size_t *counts, dt__sched *s);
/* Direct, in pieces: each rank folds the p contributions to its block at once. */
dt_status dt__algo_reduce_scatterv_fold(dt_comm *c, const void *send, void *recv,
                                        const size_t *counts, dt__sched *s);
dt_status dt__algo_alltoallv_pairwise(dt_comm *c, const void *send, const size_t *scounts,
                                      const size_t *sdispls, void *recv, const size_t *rcounts,
                                      const size_t *rdispls, dt__sched *s);
/* All-to-all of 2-D blocks (dt_comm_alltoallw; blocks in bytes, absolute
 * addresses): pack + pairwise + unpack, or descriptors + peer copies. */
dt_status dt__algo_alltoallw_pack(dt_comm *c, const dt__block2d *send, const dt__block2d *recv,
                                  dt__sched *s);
/* ... or the rows of strided send blocks streamed through shared memory
 * (isend2d), strided receive blocks staged: comms all on shared memory. */
dt_status dt__algo_alltoallw_stream(dt_comm *c, const dt__block2d *send, const dt__block2d *recv,
                                    dt__sched *s);
dt_status dt__algo_alltoallw_peer_copy(dt_comm *c, const dt__block2d *send, const dt__block2d *recv,
                                       dt__sched *s);
/* Run one DT__OP_PEER_COPY: the side that moves the data, and the checks
 * (a size mismatch names @p what, the public collective). */
dt_status dt__peer_copy_run(dt_comm *c, const char *what, const dt__op *op);
dt_status dt__algo_broadcast_direct(dt_comm *c, void *buf, size_t count, int root, dt__sched *s);
dt_status dt__algo_broadcast_binomial(dt_comm *c, void *buf, size_t count, int root, dt__sched *s);
dt_status dt__algo_broadcast_pipeline(dt_comm *c, void *buf, size_t count, int root, dt__sched *s);
dt_status dt__algo_broadcast_peer_copy(dt_comm *c, void *buf, size_t count, int root, dt__sched *s);
dt_status dt__algo_barrier_dissemination(dt_comm *c, dt__sched *s);

/* Segment size (bytes) of pipelined ring steps. */
size_t dt__algo_ring_segment_bytes(void);

#endif
