/*
 * Algorithm choice by size (see comm_choose.h). The thresholds were measured
 * on one host (bench/comm/results_2core.txt); docs/COMMSIM.md checks them
 * against the simulator for large jobs.
 */
#include "comm/comm_choose.h"
#include "comm/comm_tiny.h"

/* Messages up to this many bytes use latency-optimal algorithms. */
#define DT_SMALL_ALLREDUCE_BYTES (64 * 1024)
/* ... and up to this many bytes per rank: the ring's 2(p-1) steps each
 * pay a latency, so on many ranks it wins only later (commsim, cluster
 * model: from 128 KiB on 256 ranks, 256 KiB on 1024, 1 MiB on 4096). */
#define DT_SMALL_ALLREDUCE_PER_RANK 256
/* All-reduces whose direct exchange moves at most this much per rank, on
 * more than 2 and at most DT_DIRECT_MAX_RANKS ranks, go in one round. */
#define DT_DIRECT_ALLREDUCE_BYTES (16 * 1024)
#define DT_DIRECT_MAX_RANKS       8
/* All-gathers of at most this many bytes in total, same rank range, too. */
#define DT_DIRECT_ALLGATHER_BYTES (16 * 1024)
/* Reduce-scatters of at most this many input bytes, same rank range, too. */
#define DT_DIRECT_REDUCE_SCATTER_BYTES (16 * 1024)
/* Reduce-scatters of at least this many input bytes on 3 to this many ranks,
 * all through shared memory, fold each block in one pass: rs/ar 0.3-0.5
 * against the ring's 0.5-0.65 from 16 MiB; at 1-4 MiB on 4 ranks the p-1
 * messages per round cost more than the passes they save (bench/comm/results_onehost.md). */
#define DT_FOLD_REDUCE_SCATTER_BYTES (16 * 1024 * 1024)
#define DT_FOLD_MAX_RANKS            4
/* Broadcasts go down the binomial tree below this many bytes per rank
 * beyond the first, down the pipelined chain from it (the chain from
 * 512 KiB on 2 ranks, 1 MiB on 3, 1.5 on 4, 31.5 on 64): the pipelined chain
 * pays p - 1 hops before its last rank has a segment, the binomial tree
 * log2(p) whole-message ones. Measured (comm_bench, bench/comm/results_onehost.md):
 * one host, the chain faster from 512 KiB on 2 and 3 ranks (~10% on 3 at
 * 512 KiB, where this keeps the tree), 8 MiB on 4 (the tree 1.1-1.4x
 * faster at 512 KiB-1 MiB, the chain 6-9% slower at 2-4 MiB); 2 namespace
 * hosts x 2 ranks at 10 Gbit/s, the tree 1.18x faster at 1 MiB, the chain
 * from 4 MiB; commsim's cluster model puts the crossover at 4-16
 * MiB on 16 ranks, 16-64 MiB on 64, 64-256 MiB on 256, 256 MiB-1 GiB on 1024
 * (a 1 MiB broadcast on 64 ranks: 5.6 ms down the chain, 1.0 by the tree). */
#define DT_PIPELINE_BROADCAST_PER_RANK (512 * 1024)
/* Broadcasts up to this size on at most DT_DIRECT_MAX_RANKS go root-to-all. */
#define DT_DIRECT_BROADCAST_BYTES (32 * 1024)
/* All-to-alls and all-gathers whose blocks all have at least this many
 * bytes use same-host copies (one copy per byte, no transport). */
#define DT_PEER_COPY_BYTES (64 * 1024)
/* ... except all-gathers on 2 ranks, where blocks need this many. */
#define DT_PEER_COPY_PAIR_BYTES (2 * 1024 * 1024)
/* Broadcasts of at least this many bytes use same-host copies. */
#define DT_PEER_COPY_BROADCAST_BYTES (64 * 1024)

/* The tiny path (comm_tiny.c) sends what the one-round algorithms chosen
 * here send: its sizes must stay inside their ranges. */
_Static_assert(DT_TINY_MAX_RANKS == DT_DIRECT_MAX_RANKS, "tiny path: the direct rank range");
_Static_assert(DT_TINY_BYTES *DT_TINY_MAX_RANKS <= DT_DIRECT_ALLREDUCE_BYTES &&
                   DT_TINY_BYTES * DT_TINY_MAX_RANKS <= DT_DIRECT_ALLGATHER_BYTES &&
                   DT_TINY_BYTES * DT_TINY_MAX_RANKS <= DT_DIRECT_REDUCE_SCATTER_BYTES &&
                   DT_TINY_BYTES <= DT_DIRECT_BROADCAST_BYTES && DT_TINY_BYTES < DT_PEER_COPY_BYTES,
               "tiny path: the direct algorithms' sizes");

static bool few_ranks(int ranks)
{
    return ranks > 2 && ranks <= DT_DIRECT_MAX_RANKS;
}

/* Same-host copies for blocks of @p block_bytes, unless send/recv go through
 * shared memory, which beats them at every size (2 ranks, 256 KiB - 16 MiB:
 * all-gather 1.1-1.5x, broadcast 1.7-2.9x; 4 ranks on 2 cores: 0.8-1.7x). */
static bool peer_copy(const dt__comm_shape *sh, size_t block_bytes, size_t min_bytes)
{
    return sh->peer_copy && block_bytes >= min_bytes && !sh->p2p_shm;
}

const char *dt__choose_allreduce(int ranks, size_t bytes, size_t count)
{
    if (few_ranks(ranks) && bytes * (size_t)(ranks - 1) <= DT_DIRECT_ALLREDUCE_BYTES)
        return "direct";
    if (bytes <= DT_SMALL_ALLREDUCE_BYTES || bytes / (size_t)ranks <= DT_SMALL_ALLREDUCE_PER_RANK ||
        count < (size_t)ranks)
        return "recursive_doubling";
    return "ring";
}

const char *dt__choose_allgather(const dt__comm_shape *sh, size_t total_bytes, size_t least_bytes)
{
    /* on 2 ranks the ring is one step, which the copies' two synchronising
     * rounds only match for big blocks (measured: 10 vs 9 us at 128 KiB) */
    if (peer_copy(sh, least_bytes, sh->ranks == 2 ? DT_PEER_COPY_PAIR_BYTES : DT_PEER_COPY_BYTES))
        return "peer_copy";
    if (few_ranks(sh->ranks) && total_bytes <= DT_DIRECT_ALLGATHER_BYTES)
        return "direct";
    return "ring";
}

const char *dt__choose_reduce_scatter(const dt__comm_shape *sh, size_t total_bytes)
{
    if (few_ranks(sh->ranks) && total_bytes <= DT_DIRECT_REDUCE_SCATTER_BYTES)
        return "direct";
    /* the fold reads each input once where the ring makes p-1 passes; on
     * 2 ranks the ring is one step already */
    if (sh->p2p_shm && sh->ranks > 2 && sh->ranks <= DT_FOLD_MAX_RANKS &&
        total_bytes >= DT_FOLD_REDUCE_SCATTER_BYTES)
        return "fold";
    return "ring";
}

const char *dt__choose_broadcast(const dt__comm_shape *sh, size_t bytes)
{
    if (peer_copy(sh, bytes, DT_PEER_COPY_BROADCAST_BYTES))
        return "peer_copy";
    if (bytes <= DT_DIRECT_BROADCAST_BYTES && sh->ranks <= DT_DIRECT_MAX_RANKS)
        return "direct";
    /* one rank never gets here (comm.c), so the rule needs no floor */
    return bytes < (size_t)(sh->ranks - 1) * DT_PIPELINE_BROADCAST_PER_RANK ? "binomial"
                                                                            : "pipeline";
}

bool dt__choose_alltoall_peer_copy(const dt__comm_shape *sh, size_t block_bytes)
{
    return peer_copy(sh, block_bytes, DT_PEER_COPY_BYTES);
}
