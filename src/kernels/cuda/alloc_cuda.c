/*
 * The CUDA device allocator behind dt_storage (core/alloc.h). By default it is
 * CUDA's stream-ordered allocator: cudaMallocAsync / cudaFreeAsync on the
 * compute stream from the device's default memory pool, with the pool's
 * release threshold raised so freed blocks stay cached for reuse (no
 * cudaMalloc/cudaFree, which synchronise the device, in steady state).
 * DT_ALLOC=system, or a device without memory pools, uses cudaMalloc/cudaFree.
 */
#include <pthread.h>
#include <string.h>

#include "core/alloc.h"
#include "core/config.h"
#include "core/log.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/kernels_cuda.h"

#define DT_CUDA_MAX_DEVICES 16

enum { MODE_UNSET = 0, MODE_POOL, MODE_SYSTEM };

static pthread_mutex_t mode_lock = PTHREAD_MUTEX_INITIALIZER;
static int device_mode[DT_CUDA_MAX_DEVICES];

/* Pick (once per device) the mode and configure the pool. */
static dt_status device_setup(const char *fn, int index, int *mode)
{
    if (index < 0 || index >= DT_CUDA_MAX_DEVICES)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: cuda device %d (at most %d supported)", fn, index,
                      DT_CUDA_MAX_DEVICES);
    pthread_mutex_lock(&mode_lock);
    dt_status s = DT_OK;
    if (device_mode[index] == MODE_UNSET) {
        int pools = 0;
        const char *cfg = dt__config_str("DT_ALLOC");
        cudaError_t e = cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, index);
        if (e != cudaSuccess) {
            s = dt__cuda_error(e, fn, "cudaDeviceGetAttribute", __FILE__, __LINE__);
            goto out_unlock;
        }
        int m = (pools && !(cfg != NULL && strcmp(cfg, "system") == 0)) ? MODE_POOL : MODE_SYSTEM;
        if (m == MODE_POOL) {
            cudaMemPool_t pool;
            uint64_t keep = UINT64_MAX; /* cache everything until empty_cache */
            e = cudaDeviceGetDefaultMemPool(&pool, index);
            if (e == cudaSuccess)
                e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
            if (e != cudaSuccess) {
                s = dt__cuda_error(e, fn, "configuring the memory pool", __FILE__, __LINE__);
                goto out_unlock;
            }
        }
        device_mode[index] = m;
        DT_LOG_DEBUG("alloc", "cuda:%d allocator: %s", index,
                     m == MODE_POOL ? "stream-ordered pool" : "cudaMalloc");
    }
    *mode = device_mode[index];
out_unlock:
    pthread_mutex_unlock(&mode_lock);
    return s;
}

dt_status dt__cuda_device_pooled(const char *fn, int index, bool *pooled)
{
    int mode = MODE_UNSET;
    DT_CHECK(device_setup(fn, index, &mode));
    *pooled = mode == MODE_POOL;
    return DT_OK;
}

static uint64_t pool_reserved(int index)
{
    cudaMemPool_t pool;
    uint64_t v = 0;
    if (cudaDeviceGetDefaultMemPool(&pool, index) != cudaSuccess ||
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &v) != cudaSuccess)
        return 0;
    return v;
}

static dt_status cuda_alloc(int index, size_t nbytes, void **ptr, size_t *block_bytes,
                            bool *cache_hit)
{
    const char *fn = "dt_cuda_alloc";
    int mode = MODE_UNSET;
    int ndev = dt__cuda_device_count();
    if (index < 0 || index >= ndev) /* like a device type that is not built in */
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: no device cuda:%d (%d CUDA devices usable)", fn,
                      index, ndev);
    DT_CUDA_CHECK(cudaSetDevice(index), fn);
    DT_CHECK(device_setup(fn, index, &mode));
    size_t bytes = nbytes > 0 ? nbytes : 1; /* a real, unique address even for 0 bytes */
    void *p = NULL;
    cudaError_t e;
    bool hit = false;
    if (mode == MODE_POOL) {
        uint64_t before = pool_reserved(index);
        e = cudaMallocAsync(&p, bytes, DT_CUDA_STREAM);
        hit = e == cudaSuccess && pool_reserved(index) == before;
    } else {
        e = cudaMalloc(&p, bytes);
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return DT_ERR(e == cudaErrorMemoryAllocation ? DT_ERR_NO_MEMORY : DT_ERR_BACKEND,
                      "%s: %zu bytes on cuda:%d: %s", fn, nbytes, index, cudaGetErrorString(e));
    }
    *ptr = p;
    *block_bytes = bytes;
    *cache_hit = hit;
    return DT_OK;
}

static void cuda_free(int index, void *ptr, size_t block_bytes)
{
    if (ptr == NULL)
        return;
    int mode = (index >= 0 && index < DT_CUDA_MAX_DEVICES) ? device_mode[index] : MODE_SYSTEM;
    cudaError_t e = cudaSetDevice(index);
    if (e == cudaSuccess)
        e = mode == MODE_POOL ? cudaFreeAsync(ptr, DT_CUDA_STREAM) : cudaFree(ptr);
    if (e != cudaSuccess)
        DT_LOG_WARN("alloc", "freeing %zu bytes on cuda:%d failed: %s", block_bytes, index,
                    cudaGetErrorString(e));
}

static void cuda_empty_cache(void)
{
    for (int i = 0; i < DT_CUDA_MAX_DEVICES; i++) {
        if (device_mode[i] != MODE_POOL)
            continue;
        cudaMemPool_t pool;
        if (cudaSetDevice(i) != cudaSuccess || cudaDeviceGetDefaultMemPool(&pool, i) != cudaSuccess)
            continue;
        /* blocks freed in stream order are only reusable once the stream gets there */
        (void)cudaStreamSynchronize(DT_CUDA_STREAM);
        (void)cudaMemPoolTrimTo(pool, 0);
    }
}

static int64_t cuda_cached_bytes(int index)
{
    if (index < 0 || index >= DT_CUDA_MAX_DEVICES || device_mode[index] != MODE_POOL)
        return 0;
    cudaMemPool_t pool;
    uint64_t reserved = 0, used = 0;
    if (cudaDeviceGetDefaultMemPool(&pool, index) != cudaSuccess ||
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) !=
            cudaSuccess ||
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) != cudaSuccess)
        return 0;
    return reserved > used ? (int64_t)(reserved - used) : 0;
}

const dt_allocator_ops dt__cuda_allocator = {
    .name = "cuda",
    .alloc = cuda_alloc,
    .free = cuda_free,
    .empty_cache = cuda_empty_cache,
    .cached_bytes = cuda_cached_bytes,
    /* the kernel table's entries, for core's copies (core/alloc.h) */
    .copy = dt__cuda_copy,
    .fill = dt__cuda_fill,
};
