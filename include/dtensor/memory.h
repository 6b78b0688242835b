/*
 * dtensor/memory.h - memory accounting and the caching host allocator.
 *
 * Every storage allocation is counted per device and per category, current and
 * peak, in requested bytes (numel * dtype size). Host storage comes from a
 * caching allocator: requests round up to a size class (powers of two from 64
 * bytes to 1 MiB, then four steps per power of two: 1.25, 1.5, 1.75, 2 x 2^k),
 * blocks are 64-byte aligned and from 1 MiB on come from mmap; freed blocks
 * are kept per class and reused (a request whose class has no cached block
 * takes the smallest cached block at most twice its size), so steady-state
 * training maps no new pages.
 * DT_ALLOC=system (read once, at the first allocation) frees blocks at once.
 * When the system refuses memory the cache is emptied and the request retried.
 * Thread-safe: every function may be called from any thread.
 */
#ifndef DTENSOR_MEMORY_H
#define DTENSOR_MEMORY_H

#include "dtensor/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_mem_category {
    DT_MEM_OTHER = 0,
    DT_MEM_PARAMETER,
    DT_MEM_GRADIENT,
    DT_MEM_OPTIMIZER,
    DT_MEM_ACTIVATION,
    DT_MEM_COMM, /* communication buffers */
    DT_MEM_CATEGORY_COUNT
} dt_mem_category;

/** "parameter", "gradient", ... */
DT_API const char *dt_mem_category_name(dt_mem_category cat);

typedef struct dt_memory_stats {
    int64_t current[DT_MEM_CATEGORY_COUNT]; /* live bytes by category */
    int64_t peak[DT_MEM_CATEGORY_COUNT];    /* highest live bytes by category */
    int64_t total_current;                  /* live bytes, all categories */
    int64_t total_peak;                     /* highest total live bytes */
    int64_t cached;                         /* block bytes held by the cache, not live */
    int64_t n_allocs;                       /* storage allocations served */
    int64_t n_cache_hits;                   /* of which reused a cached block */
} dt_memory_stats;

/** Snapshot of the accounting of @p device (DT_ERR_INVALID_ARG for an unknown device). */
DT_API dt_status dt_memory_stats_get(dt_device device, dt_memory_stats *out);
/** Reset the peaks of @p device to the current values. */
DT_API void dt_memory_reset_peak(dt_device device);
/** Return every cached, unused block of every device to the system. */
DT_API void dt_memory_empty_cache(void);
/** Print a one-table report of @p s (bytes per category, current and peak).
 * Every rank's, gathered in one table: dt_memory_report (comm.h). */
DT_API void dt_memory_print(const dt_memory_stats *s, FILE *f);

/**
 * Category new allocations on this thread are tagged with until changed
 * (default DT_MEM_OTHER). Returns the previous one, to restore a scope.
 */
DT_API dt_mem_category dt_memory_set_default_category(dt_mem_category cat);

#ifdef __cplusplus
}
#endif
#endif /* DTENSOR_MEMORY_H */
