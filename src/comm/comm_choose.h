/*
 * The dispatcher's algorithm choice as pure functions of the collective's
 * size, the group size and what the transport can do, so the runtime
 * (comm.c) and the simulator (tools/commsim) make the same choice.
 * DT_ALGO / dt_comm_set_algo overrides are applied by the caller first.
 */
#ifndef DT_COMM_CHOOSE_H
#define DT_COMM_CHOOSE_H

#include <stdbool.h>
#include <stddef.h>

/* What the choice depends on besides the sizes. */
typedef struct dt__comm_shape {
    int ranks;
    bool peer_copy; /* same-host copies reach every member (dt__comm_can_peer_copy) */
    bool p2p_shm;   /* send/recv go through shared memory to every member */
} dt__comm_shape;

/* "direct", "recursive_doubling" or "ring" for @p count elements of @p bytes in all. */
const char *dt__choose_allreduce(int ranks, size_t bytes, size_t count);
/* "peer_copy", "direct" or "ring"; @p least_bytes: the smallest block. */
const char *dt__choose_allgather(const dt__comm_shape *sh, size_t total_bytes, size_t least_bytes);
/* "direct", "fold" (one pass: a few ranks, all on shared memory, large
 * inputs) or "ring"; @p total_bytes: the input of one rank. */
const char *dt__choose_reduce_scatter(const dt__comm_shape *sh, size_t total_bytes);
/* "peer_copy", "direct", "binomial" or "pipeline". */
const char *dt__choose_broadcast(const dt__comm_shape *sh, size_t bytes);
/* Whether an all-to-all of blocks of at least @p block_bytes goes by same-host copies. */
bool dt__choose_alltoall_peer_copy(const dt__comm_shape *sh, size_t block_bytes);

#endif
