/*
 * Copies that involve the sim device: sim -> sim, host -> sim and sim ->
 * host, run by the CPU copy kernel on the stream (dtype conversion and
 * strides as on the CPU). The blocking entry waits for the data whenever a
 * host tensor is involved, as cudaMemcpy does. The asynchronous one returns
 * once queued: its host source must stay untouched, and its host destination
 * holds 0xff bytes (NaN for floats) until the copy has run, so a read that
 * forgot dt_device_synchronize sees poison, not a lucky right value.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/kernel_ops.h"
#include "kernels/sim/sim.h"

extern const dt_kernel_ops dt__kernels_cpu;

static dt_status run_copy(dt_sim_job *j)
{
    return dt__kernels_cpu.copy(j->a[0], j->a[1]);
}

static bool on_host(const dt_tensor *t)
{
    return t->device.type == DT_DEVICE_CPU;
}

/* A job copying src into dst, each a sim or host tensor. */
static dt_status copy_job(dt_tensor *dst, const dt_tensor *src, dt_sim_job **out)
{
    if ((!on_host(dst) && dst->device.type != DT_DEVICE_SIM) ||
        (!on_host(src) && src->device.type != DT_DEVICE_SIM))
        return DT_ERR(DT_ERR_UNSUPPORTED, "sim copy: from %s:%d to %s:%d is not supported",
                      dt_device_type_name(src->device.type), src->device.index,
                      dt_device_type_name(dst->device.type), dst->device.index);
    dt_sim_job *j = NULL;
    DT_CHECK(dt__sim_job_new("copy", run_copy, &j));
    const dt_tensor *t[2] = {dst, src};
    for (int k = 0; k < 2; k++) {
        dt_status st = on_host(t[k]) ? dt__sim_job_host_tensor(j, t[k], &j->a[k])
                                     : dt__sim_job_tensor(j, k ? "src" : "dst", t[k], &j->a[k]);
        if (st != DT_OK) {
            free(j);
            return st;
        }
    }
    *out = j;
    return DT_OK;
}

dt_status dt__sim_copy(dt_tensor *dst, const dt_tensor *src)
{
    dt_sim_job *j = NULL;
    DT_CHECK(copy_job(dst, src, &j));
    DT_CHECK(dt__sim_submit(j));
    if (on_host(dst) || on_host(src))
        return dt__sim_synchronize();
    return DT_OK;
}

/* 0xff into every byte of @p t's elements (a host tensor). */
static void poison(dt_tensor *t)
{
    size_t es = dt_dtype_size(t->dtype);
    char *base = (char *)t->storage->data + t->offset * (int64_t)es;
    int64_t n = dt__shape_numel(t->ndim, t->shape);
    for (int64_t i = 0; i < n; i++)
        memset(base + dt__elem_offset(t, i) * (int64_t)es, 0xff, es);
}

dt_status dt__sim_copy_async(dt_tensor *dst, const dt_tensor *src)
{
    dt_sim_job *j = NULL;
    DT_CHECK(copy_job(dst, src, &j));
    if (on_host(dst))
        poison(dst);
    return dt__sim_submit(j);
}

static dt_status run_copy_bytes(dt_sim_job *j)
{
    memcpy(j->p[0], j->p[1], (size_t)j->l[0]);
    return DT_OK;
}

dt_status dt__sim_copy_bytes(void *dst, const void *src, size_t n)
{
    if (n == 0)
        return DT_OK;
    dt_sim_job *j = NULL;
    DT_CHECK(dt__sim_job_new("copy_bytes", run_copy_bytes, &j));
    j->p[0] = dt__sim_untag(dst);
    j->p[1] = dt__sim_untag(src);
    j->l[0] = (int64_t)n;
    DT_CHECK(dt__sim_submit(j));
    if (!dt__sim_is_tagged(dst) || !dt__sim_is_tagged(src))
        return dt__sim_synchronize(); /* a host side: done when we return */
    return DT_OK;
}

bool dt__sim_owns(const void *p, int *index)
{
    *index = 0;
    return dt__sim_is_tagged(p);
}
