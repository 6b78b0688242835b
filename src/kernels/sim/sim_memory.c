/*
 * The sim device's allocator (core/alloc.h): host blocks from aligned_alloc,
 * handed out as tagged addresses that fault when host code touches them. New
 * blocks are filled with 0xff bytes (NaN for floats), so a kernel that reads
 * memory nobody wrote gives NaN instead of a plausible zero. Frees are
 * stream-ordered: the block goes back only after the kernels queued before
 * the free have run, as with cudaFreeAsync. No caching: ASan sees every block.
 */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "kernels/sim/sim.h"

static dt_status sim_alloc(int index, size_t nbytes, void **ptr, size_t *block_bytes,
                           bool *cache_hit)
{
    size_t n = (nbytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, n > 0 ? n : 64);
    if (p == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "sim:%d: cannot allocate %zu bytes", index, nbytes);
    if (dt__sim_untag(p) != p) {
        uintptr_t a = (uintptr_t)p;
        free(p);
        return DT_ERR(DT_ERR_BACKEND, "sim:%d: host address %#lx already uses the tag bits", index,
                      (unsigned long)a);
    }
    memset(p, 0xff, n);
    *ptr = (void *)((uintptr_t)p | DT_SIM_TAG);
    *block_bytes = n;
    *cache_hit = false;
    return DT_OK;
}

static dt_status run_free(dt_sim_job *j)
{
    free(j->p[0]);
    return DT_OK;
}

static void sim_free(int index, void *ptr, size_t block_bytes)
{
    (void)index;
    (void)block_bytes;
    dt_sim_job *j = NULL;
    if (dt__sim_job_new("free", run_free, &j) != DT_OK)
        return; /* out of memory for 200 bytes: the block leaks, nothing worse */
    j->after_errors = true;
    j->p[0] = dt__sim_untag(ptr);
    (void)dt__sim_submit(j);
}

const dt_allocator_ops dt__sim_allocator = {
    .name = "sim",
    .alloc = sim_alloc,
    .free = sim_free,
    /* the kernel table's entries, for core's copies (core/alloc.h) */
    .copy = dt__sim_copy,
    .copy_async = dt__sim_copy_async,
    .fill = dt__sim_fill,
};
