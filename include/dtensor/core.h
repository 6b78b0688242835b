/*
 * dtensor/core.h - status codes, last error, logging, dtypes, devices, versions.
 *
 * Thread safety: every function here may be called from any thread. The last
 * error is thread-local; the logger is process-wide (set it before starting
 * threads).
 */
#ifndef DTENSOR_CORE_H
#define DTENSOR_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(DT_BUILDING_LIBRARY)
#define DT_API __attribute__((visibility("default")))
#else
#define DT_API
#endif

#define DT_VERSION_MAJOR 0
#define DT_VERSION_MINOR 1
#define DT_VERSION_PATCH 0
#define DT_VERSION_CODE  (DT_VERSION_MAJOR * 10000 + DT_VERSION_MINOR * 100 + DT_VERSION_PATCH)

/** The library's version code (DT_VERSION_CODE of the build). */
DT_API int dt_version(void);

/* ---------------------------------------------------------------- status */

/* X-macro: code, value, text. Only append: the numeric values are ABI. */
#define DT_STATUS_MAP(X)                                                                           \
    X(DT_OK, 0, "success")                                                                         \
    X(DT_IN_PROGRESS, 1, "operation in progress")                                                  \
    X(DT_ERR_INVALID_ARG, -1, "invalid argument")                                                  \
    X(DT_ERR_UNSUPPORTED, -2, "unsupported")                                                       \
    X(DT_ERR_NO_MEMORY, -3, "out of memory")                                                       \
    X(DT_ERR_SYSTEM, -4, "system error")                                                           \
    X(DT_ERR_BACKEND, -5, "backend error")                                                         \
    X(DT_ERR_TIMEOUT, -6, "timed out")                                                             \
    X(DT_ERR_PEER_LOST, -7, "peer lost")                                                           \
    X(DT_ERR_FORMAT, -8, "malformed data")                                                         \
    X(DT_ERR_NOT_FOUND, -9, "not found")                                                           \
    X(DT_ERR_INTERNAL, -10, "internal error")

typedef enum dt_status {
#define DT_STATUS_ENUM_(name, value, text) name = value,
    DT_STATUS_MAP(DT_STATUS_ENUM_)
#undef DT_STATUS_ENUM_
} dt_status;

/** Static text for a status code ("invalid argument"); never NULL. */
DT_API const char *dt_status_str(dt_status s);

/**
 * What went wrong in the last failing dtensor call on this thread, naming the
 * offending value ("dt_tensor_empty: dim 2 has negative size -3"). Empty string
 * when nothing failed yet. Borrowed; valid until the next failing call on this thread.
 */
DT_API const char *dt_last_error(void);

/** Forget the last error of this thread. */
DT_API void dt_clear_error(void);

/* ---------------------------------------------------------------- logging */

typedef enum dt_log_level {
    DT_LOG_LEVEL_NONE = 0,
    DT_LOG_LEVEL_ERROR,
    DT_LOG_LEVEL_WARN,
    DT_LOG_LEVEL_INFO,
    DT_LOG_LEVEL_DEBUG,
    DT_LOG_LEVEL_TRACE
} dt_log_level;

/**
 * Log sink: receives each formatted line (no trailing newline) with its level
 * and subsystem name ("comm", "redist", ...).
 */
typedef void (*dt_log_fn)(dt_log_level level, const char *subsys, const char *line,
                          void *user_data);

/**
 * Replace the log sink (NULL restores the default: stderr, or DT_LOG_FILE).
 * The level still comes from DT_LOG (error|warn|info|debug|trace, default warn)
 * and the subsystem filter from DT_LOG_SUBSYS (comma list, default all).
 */
DT_API void dt_log_set(dt_log_fn fn, void *user_data);

/** Override the DT_LOG level for this process. */
DT_API void dt_log_set_level(dt_log_level level);

/* ---------------------------------------------------------------- dtypes */

/* Only append: values are stored in checkpoints' in-memory descriptions. */
typedef enum dt_dtype {
    DT_DTYPE_F32 = 0, /* compute type */
    DT_DTYPE_F64,
    DT_DTYPE_F16,  /* storage: IEEE half, round-to-nearest-even */
    DT_DTYPE_BF16, /* storage: bfloat16, round-to-nearest-even */
    DT_DTYPE_I32,
    DT_DTYPE_I64,
    DT_DTYPE_U16, /* token ids */
    DT_DTYPE_U8,  /* masks, bytes */
    DT_DTYPE_COUNT
} dt_dtype;

/** Bytes per element of @p dtype; 0 for an invalid value. */
DT_API size_t dt_dtype_size(dt_dtype dtype);

/** Short name: "f32", "bf16", ... ; "invalid" for an out-of-range value. */
DT_API const char *dt_dtype_name(dt_dtype dtype);

/** Parse a name ("f32", "float32", "bf16", "F16", ...) into @p out. */
DT_API dt_status dt_dtype_parse(const char *name, dt_dtype *out);

/** Exact conversions (round-to-nearest-even, NaN stays NaN, overflow -> inf). */
DT_API uint16_t dt_f32_to_bf16(float x);
DT_API float dt_bf16_to_f32(uint16_t x);
DT_API uint16_t dt_f32_to_f16(float x);
DT_API float dt_f16_to_f32(uint16_t x);

/* ---------------------------------------------------------------- devices */

/*
 * Where a tensor's storage lives and its kernels run.
 *   cpu:  host memory, the reference kernels.
 *   cuda: a GPU (built with DT_CUDA), cuBLAS and dtensor's .cu kernels.
 *   sim:  a strict simulated device for tests (always built): its memory is
 *         not host memory (a host read or write of it crashes), its kernels
 *         are the CPU ones run asynchronously, in order, on a stream (a worker
 *         thread), so a missing synchronisation shows up as a wrong value; its
 *         results are bit-identical to the CPU's. See docs/DEVICES.md.
 */
typedef enum dt_device_type {
    DT_DEVICE_CPU = 0,
    DT_DEVICE_CUDA = 1,
    DT_DEVICE_SIM = 2,
    DT_DEVICE_TYPE_COUNT
} dt_device_type;

typedef struct dt_device {
    dt_device_type type;
    int index; /* CUDA ordinal; 0 for the CPU and the sim device */
} dt_device;

/** The host device. */
static inline dt_device dt_device_cpu(void)
{
    dt_device d = {DT_DEVICE_CPU, 0};
    return d;
}

/** "cpu", "cuda", "sim"; "unknown" otherwise. */
DT_API const char *dt_device_type_name(dt_device_type type);

/**
 * Parse "cpu", "sim", "cuda" or "cuda:N" into *out. DT_ERR_INVALID_ARG naming
 * @p name when it is none of these. Does not check the device exists.
 */
DT_API dt_status dt_device_parse(const char *name, dt_device *out);

/**
 * Wait until every kernel and copy queued on @p device has finished, and
 * report an error one of them raised (asynchronous errors surface here once,
 * as CUDA's do). DT_OK at once for the CPU. DT_ERR_UNSUPPORTED for a device
 * not built in. Not collective.
 */
DT_API dt_status dt_device_synchronize(dt_device device);

/* ---------------------------------------------------------------- params */

/**
 * Parameter structs lead with `uint64_t field_mask`; a field is read only when
 * its bit is set, otherwise its documented default applies. NULL = all defaults.
 */
#define DT_PARAM_VALUE(p, name, flag, dflt)                                                        \
    ((((p) != NULL) && ((p)->field_mask & (flag))) ? (p)->name : (dflt))

/* ---------------------------------------------------------------- reduce ops */

typedef enum dt_reduce_op {
    DT_REDUCE_OP_SUM = 0,
    DT_REDUCE_OP_AVG,
    DT_REDUCE_OP_MAX,
    DT_REDUCE_OP_MIN,
    DT_REDUCE_OP_PROD,
    DT_REDUCE_OP_COUNT
} dt_reduce_op;

/** "sum", "avg", "max", "min", "prod"; "invalid" otherwise. */
DT_API const char *dt_reduce_op_name(dt_reduce_op op);

/* ---------------------------------------------------------------- tunables */

/**
 * Print every environment tunable dtensor reads (name, default, current value,
 * help) to @p f. The registry is the single place tunables are declared.
 */
DT_API void dt_config_print(FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* DTENSOR_CORE_H */
