/*
 * The per-device hook behind dt_storage. Each device type has one small
 * vtable; memory.c does the accounting (per category, current and peak)
 * around it, so an allocator only hands out and takes back blocks. The CPU
 * one (alloc.c) is a caching allocator; a CUDA allocator registers itself with
 * dt__allocator_register at load time. A device's vtable also carries the data
 * movement core's copies need (tensor_copy.c): the kernel tables sit a layer
 * above core, so the device's code hands these entries down here instead.
 */
#ifndef DT_CORE_ALLOC_H
#define DT_CORE_ALLOC_H

#include "dtensor/memory.h"
#include "dtensor/tensor.h"

typedef struct dt_allocator_ops {
    const char *name;
    /* A block of at least @p nbytes (nbytes may be 0) on device @p index; sets
     * *block_bytes to the block's real size and *cache_hit when it was reused.
     * Records the error message on failure. */
    dt_status (*alloc)(int index, size_t nbytes, void **ptr, size_t *block_bytes, bool *cache_hit);
    /* Take back a block from alloc (same block_bytes). */
    void (*free)(int index, void *ptr, size_t block_bytes);
    /* (optional) Return cached blocks to the system. */
    void (*empty_cache)(void);
    /* (optional) Bytes held in the cache of device @p index. */
    int64_t (*cached_bytes)(int index);
    /* (optional) A training step ended: return the large cached blocks that
     * were not reused since the previous call. */
    void (*trim)(void);
    /* (optional, non-CPU devices) dst = src for tensors of one shape, one of
     * them on this device and the other on it or on the CPU: the device's
     * copy kernel. copy_async returns once the copy is queued. */
    dt_status (*copy)(dt_tensor *dst, const dt_tensor *src);
    dt_status (*copy_async)(dt_tensor *dst, const dt_tensor *src);
    /* (optional, non-CPU devices) Every element of @p t set to @p value. */
    dt_status (*fill)(dt_tensor *t, double value);
} dt_allocator_ops;

/* Install the allocator of a device type (replaces the previous one). */
void dt__allocator_register(dt_device_type type, const dt_allocator_ops *ops);
/* The allocator of @p device's type; NULL when this build has none. */
const dt_allocator_ops *dt__allocator_for(dt_device device);

/* A training step ended (dt_optim_step): every allocator's trim. */
void dt__memory_step_end(void);

/* Whether this process has ever allocated storage on a non-CPU device (lets
 * host-only paths skip asking whether a pointer is device memory). */
bool dt__device_memory_used(void);

/* The caching host allocator (alloc.c). */
extern const dt_allocator_ops dt__host_allocator;

/* Size class of a request: the block size the caching allocator hands out. */
size_t dt__alloc_size_class(size_t nbytes);

#endif
