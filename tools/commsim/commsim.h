/*
 * commsim: the comm layer's real schedules (src/comm/algo/) run on a virtual
 * clock under a cost model, to predict collectives on jobs larger than any
 * machine at hand. commsim_build.c builds the schedules, commsim_sim.c runs
 * them, commsim_model.c holds the cost model, commsim.c is the command line.
 */
#ifndef DT_COMMSIM_H
#define DT_COMMSIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------ cost model */

typedef struct cs_model {
    double lat_shm, bw_shm;       /* same host: latency (s), bytes/s of one transfer */
    double lat_net, bw_net;       /* other host: latency, bytes/s of a host's NIC (each way) */
    double lat_switch, bw_uplink; /* other switch: extra latency; a switch's uplink bytes/s */
    double bw_reduce, bw_copy;    /* local ops: bytes/s of a reduce (output bytes) and a copy */
    double o_msg;                 /* CPU time to post one send or receive */
    double o_round;               /* CPU time to wake up when a round's transfers end */
    double o_tiny;                /* the tiny path (src/comm/comm_tiny.c): CPU time per send or
                                     receive, in place of o_msg and o_round (no engine) */
    double o_switch;              /* more ranks than cores: a context switch per such wake-up */
    double eager_bytes;           /* up to this size a send completes when posted; larger
                                     ones pay a handshake (two more latencies) */
    double bw_eager;              /* same host, eager messages: bytes/s (small ring slots) */
    double chunk_shm;             /* same host, larger messages: the bulk path's chunk
                                     (ucx_shm_bulk.c); the receiver copies a chunk out after the
                                     sender copied it in, so the first chunk's copies run in
                                     sequence (0: none) */
    int flight_shm;               /* chunks a send keeps in flight (SHM_BULK_CHUNKS), and the
                                     window's slots on hosts of more than 4 ranks */
    int slots_shm;                /* the window's slots on hosts of up to 4 ranks
                                     (dt__shm_window_slots); more than flight_shm, with a core
                                     per rank: a message of several chunks overlaps its copies
                                     from the first chunk (no fill) */
    double eager_net;             /* other host: up to this size a message flows once its send
                                     is posted, without the handshake (0: eager_bytes) */
    double bw_tcp;                /* other host: bytes/s one rank's CPU moves through kernel TCP,
                                     stretched as CPU costs are (0: the NIC is the only limit) */
    double o_switch_net;          /* more ranks than cores: the wake-up after a round with
                                     transfers to other hosts (0: o_switch) */
    double bw_net_cpu;            /* other host: bytes/s the ranks' CPUs move through kernel
                                     TCP on the link; a transfer holds the sending and receiving
                                     ranks' CPUs for bytes / it (or its bw_tcp time, at most its
                                     own time), so their shared-memory copies and local ops wait
                                     behind it (0: the NIC moves the bytes, they overlap it) */
    /* buffers of more than cache_bytes per host (2 per rank): bandwidths on
     * the host divided by (bytes / cache_bytes)^mem_exp, at most mem_max */
    double cache_bytes, mem_exp, mem_max;
    double cache_call; /* the caller's buffers of a call on the host beyond this (bytes): the
                          side of a shared-memory transfer in them streams from memory, as above
                          with cache_call for cache_bytes (0: per op, as the scratch's) */
    int per_host, hosts_per_switch;
    int cores; /* per host: more ranks than cores stretch every CPU cost */
} cs_model;

/* The model named @p name ("local", "cluster"); false if there is none. */
bool cs_model_preset(const char *name, cs_model *m);
/* Set one parameter from "key=value" (sizes take K/M/G, times us/ms/s);
 * false with a message in @p err naming the key or value. */
bool cs_model_set(cs_model *m, const char *kv, char *err, size_t cap);
/* Print every parameter as key=value. */
void cs_model_print(const cs_model *m);

/* ------------------------------------------------------------ schedules */

enum { CS_SEND, CS_RECV, CS_LOCAL };

/* One op of a rank's schedule without its buffers: a transfer to the rank
 * `peer` places to the right (mod p), or local work on `bytes` bytes. */
typedef struct cs_op {
    uint8_t kind;
    uint8_t copy;    /* CS_LOCAL: a copy (else a reduce or scale) */
    uint8_t scratch; /* CS_SEND, CS_RECV: the rank's buffer is the schedule's scratch (else
                        the caller's send or receive buffer) */
    int32_t peer;
    uint64_t bytes;
} cs_op;

typedef struct cs_round {
    uint32_t first, count;
    bool early;
} cs_round;

/* A schedule's shape; ranks whose shapes are equal share one. */
typedef struct cs_shape {
    cs_op *ops;
    cs_round *rounds;
    uint32_t nops, nrounds;
    uint64_t hash;
} cs_shape;

typedef struct cs_job {
    int ranks;
    uint64_t bytes;
    double foot; /* bytes of a rank's send and receive buffers (the caller's) */
    cs_shape *shapes;
    uint32_t nshapes, cap;
    uint32_t *shape_of; /* per rank: index into shapes */
    bool tiny;          /* run by the tiny path: its costs, not the engine's */
} cs_job;

/* Collectives and algorithms commsim knows (NULL-terminated). */
extern const char *const cs_collectives[];
const char *const *cs_algorithms(const char *coll);
/* Build every rank's schedule of @p coll by @p algo on @p ranks ranks,
 * @p bytes as comm_bench counts them (float32, the largest buffer); ranks
 * share hosts @p per_host at a time (what the two-level "hier" sees). */
bool cs_build(cs_job *job, const char *coll, const char *algo, int ranks, int per_host,
              uint64_t bytes, char *err, size_t cap);
void cs_job_free(cs_job *job);
/* The algorithm dt_comm_* would pick for @p ranks ranks, @p per_host per host. */
const char *cs_dispatch(const char *coll, int ranks, int per_host, uint64_t bytes);
/* Whether dt_comm_* runs @p coll of @p bytes on the tiny path (comm_tiny.h):
 * one host, few ranks, small messages; only the dispatcher's algorithm, and
 * only when no algorithm is forced. */
bool cs_tiny(const char *coll, int ranks, int per_host, uint64_t bytes);
/* Whether the two-level algorithms apply (comm.c's hier_for_ring): more than
 * one host, hosts of one size, more than one rank each. */
bool cs_hier_applies(int ranks, int per_host);

/* ------------------------------------------------------------ simulation */

/* Seconds from the start of all ranks to the end of the last; < 0 on a
 * deadlock (with a message in @p err). */
double cs_simulate(const cs_job *job, const cs_model *m, char *err, size_t cap);
/* nccl-tests' bus bandwidth factor of @p coll on @p n ranks. */
double cs_busbw_factor(const char *coll, int n);

#endif
