/*
 * dtensor/runtime.h - process start-up: environment, device, world group.
 *
 * dt_init reads the launcher's environment (dtrun / torchrun: RANK,
 * WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
 * DT_JOB_TOKEN; else Open MPI's OMPI_COMM_WORLD_*, PMI_*, Slurm's SLURM_*;
 * else a single process), picks the device, sets up compute threads and the
 * BLAS kernel, connects the bootstrap store and creates the world comm.
 * Collective over the world. One runtime per process.
 */
#ifndef DTENSOR_RUNTIME_H
#define DTENSOR_RUNTIME_H

#include "dtensor/comm.h"
#include "dtensor/store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_runtime dt_runtime;

enum {
    DT_INIT_PARAM_FIELD_DEVICE = 1u << 0,
    DT_INIT_PARAM_FIELD_TIMEOUT = 1u << 1,
    DT_INIT_PARAM_FIELD_NUM_THREADS = 1u << 2,
};

typedef struct dt_init_params {
    uint64_t field_mask;
    dt_device_type device; /* default: DT_DEVICE env, else CUDA when built and present, else CPU */
    double timeout_s;      /* default DT_TIMEOUT_S (300) */
    int num_threads;       /* default DT_NUM_THREADS, else cores / local ranks */
} dt_init_params;

/**
 * Start the runtime (collective over the world; @p params NULL = defaults).
 * Reads the launcher's environment, sets the rank shown in logs, applies
 * num_threads, and for a world of more than one rank starts the store (rank
 * 0 serves it on MASTER_PORT) and the UCX world comm (worker addresses swapped
 * through the store, then a barrier), plus the NCCL world when the device is
 * CUDA (see dt_runtime_world). A world of one has no store and a "self" world
 * comm. Loads BLAS and reports its library, version, kernel and threads
 * (DT_LOG=info; a warning when the kernel is a generic fallback). Caller destroys with
 * dt_runtime_destroy(). Before anything else it checks every DT_* variable that is set against the
 * registry (dt_config_print lists them): a value that is not a number where
 * one is expected, out of range, or not one of the allowed words fails with
 * DT_ERR_INVALID_ARG naming the variable and the value, e.g. "dt_init:
 * environment variable DT_TIMEOUT_S='abc' is not a number (want a number > 0
 * and <= 1e+07)" (also when @p params overrides that setting). Booleans
 * take 0/1, true/false, yes/no, on/off. A DT_* variable dtensor does not read
 * is warned about once (a misspelling). Code that reads a tunable before
 * dt_init (or without it) uses the default for a bad value and warns once.
 * Errors: DT_ERR_INVALID_ARG (a bad DT_* value, bad launcher variables,
 * device, timeout), DT_ERR_UNSUPPORTED (a device not built in),
 * DT_ERR_TIMEOUT / store and transport errors while connecting.
 */
DT_API dt_status dt_init(const dt_init_params *params, dt_runtime **out);
/**
 * Tear down the world comm, the store and caches (not collective). Waits first
 * for work still queued on the sim device and the runtime's CUDA device (an
 * error it raised is logged as a warning). Comms split
 * from the world keep the transport alive until they are destroyed too.
 * Rank 0 stops serving the store:
 * call a barrier first if other ranks may still use dt_runtime_store().
 * NULL-safe.
 */
DT_API void dt_runtime_destroy(dt_runtime *rt);

DT_API int dt_runtime_rank(const dt_runtime *rt);
DT_API int dt_runtime_size(const dt_runtime *rt);
DT_API int dt_runtime_local_rank(const dt_runtime *rt);
DT_API int dt_runtime_local_size(const dt_runtime *rt);
DT_API dt_device dt_runtime_device(const dt_runtime *rt);
/**
 * The world group for tensors on the runtime's device. Borrowed; lives as long
 * as the runtime. On a CUDA device with more than one rank this is the NCCL
 * world (backend "nccl": buffers are device pointers; host buffers work but
 * are staged through device memory); otherwise the host world below.
 */
DT_API dt_comm *dt_runtime_world(dt_runtime *rt);
/**
 * The world group for host memory: UCX (backend "ucx"), or "self" in a world
 * of one process. Same as dt_runtime_world except on a multi-rank CUDA run,
 * where both exist (ranks and order are the same in both). Borrowed.
 */
DT_API dt_comm *dt_runtime_host_world(dt_runtime *rt);
/** The bootstrap store. Borrowed; NULL in a world of one process. */
DT_API dt_store *dt_runtime_store(dt_runtime *rt);

/** What the runtime found: BLAS library, version, kernel, threads; CPU features;
 * the GEMM engine. */
typedef struct dt_runtime_info {
    char blas_library[64];
    char blas_version[64];
    char blas_kernel[64]; /* core name in use, e.g. "SkylakeX" */
    int blas_threads;
    char cpu_features[128];   /* e.g. "avx2 fma avx512f avx512bw avx512vl avx512dq" */
    bool blas_kernel_generic; /* a fallback kernel on a CPU that supports a better one */
    int num_threads;
    /* The engine every CPU matmul runs on (DT_GEMM=auto|onednn|openblas). */
    char gemm_engine[16];  /* "onednn" or "openblas" */
    char gemm_library[64]; /* e.g. "oneDNN (libdnnl.so.2)" */
    char gemm_version[32]; /* e.g. "2.6.3" */
    char gemm_kernel[64];  /* oneDNN: implementation of an f32 matmul, e.g. "brg:avx512_core";
                              OpenBLAS: the core name, as blas_kernel */
    int gemm_threads;
    char gemm_detail[160]; /* e.g. "isa avx512_core_bf16, OpenMP runtime, idle threads passive" */
    char gemm_reason[192]; /* why this engine, e.g. "default (DT_GEMM=auto)" */
    /* bf16 matmuls (f32 accumulation): oneDNN's kernel, e.g. "brg:avx512_core_bf16";
       "converted to f32" when they run as f32 matmuls (OpenBLAS, or no bf16 kernel) */
    char gemm_kernel_bf16[64];
} dt_runtime_info;

/** Fill @p out (works before dt_init too, for single-process programs). */
DT_API dt_status dt_runtime_info_get(dt_runtime_info *out);

#ifdef __cplusplus
}
#endif
#endif /* DTENSOR_RUNTIME_H */
