/* Kernel table lookup per device, and the per-process compute thread count. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/config.h"
#include "core/host_info.h"
#include "core/error.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/onednn.h"
#include "kernels/kernel_ops.h"

extern const dt_kernel_ops dt__kernels_cpu;
extern const dt_kernel_ops dt__kernels_sim;
#ifdef DT_HAVE_CUDA
extern const dt_kernel_ops dt__kernels_cuda;
#endif

const dt_kernel_ops *dt__kernels_for(dt_device device)
{
    switch (device.type) {
    case DT_DEVICE_CPU:
        return &dt__kernels_cpu;
    case DT_DEVICE_CUDA:
#ifdef DT_HAVE_CUDA
        return &dt__kernels_cuda;
#else
        return NULL;
#endif
    case DT_DEVICE_SIM:
        return &dt__kernels_sim;
    case DT_DEVICE_TYPE_COUNT:
        break;
    }
    return NULL;
}

bool dt__kernels_device_of(const void *p, dt_device *out)
{
    if (p == NULL || !dt__device_memory_used())
        return false;
    for (int t = DT_DEVICE_CPU + 1; t < DT_DEVICE_TYPE_COUNT; t++) {
        const dt_kernel_ops *k = dt__kernels_for((dt_device){(dt_device_type)t, 0});
        int index = 0;
        if (k != NULL && k->owns != NULL && k->owns(p, &index)) {
            *out = (dt_device){(dt_device_type)t, index};
            return true;
        }
    }
    return false;
}

dt_status dt__kernel_reduce_args(const char *fn, dt_reduce_kind kind, const dt_tensor *x, int dim,
                                 int *dim_out)
{
    if ((unsigned)kind > DT_REDUCE_KIND_MAX)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: unknown kind %d", fn, (int)kind);
    int nd = x->ndim > 0 ? x->ndim : 1;
    if (dim < -nd || dim >= nd)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: dim %d out of range for %d dims", fn, dim, x->ndim);
    *dim_out = dim < 0 ? dim + nd : dim;
    return DT_OK;
}

dt_status dt__kernel_embedding_dims(const char *fn, const char *tname, const dt_tensor *table,
                                    const dt_tensor *ids, const char *rname,
                                    const dt_tensor *rows_t, int64_t *rows, int64_t *dim,
                                    int64_t *n)
{
    if (table->ndim != 2)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s has %d dims, expected 2", fn, tname, table->ndim);
    int64_t d = table->shape[1], k = dt__shape_numel(ids->ndim, ids->shape);
    int64_t have = dt__shape_numel(rows_t->ndim, rows_t->shape);
    if (have != k * d)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s has %lld elements, expected %lld ids x %lld", fn,
                      rname, (long long)have, (long long)k, (long long)d);
    *rows = table->shape[0];
    *dim = d;
    *n = k;
    return DT_OK;
}

static atomic_int threads_override; /* 0: from the environment */

/* Cores this process may run on (affinity mask, so taskset/cgroups count). */
static int usable_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int dt__kernels_num_threads(void)
{
    int forced = atomic_load(&threads_override);
    if (forced > 0)
        return forced;
    int64_t env = dt__config_int("DT_NUM_THREADS");
    if (env > 0)
        return (int)env;
    int n = usable_cores() / dt__host_local_ranks();
    return n >= 1 ? n : 1;
}

void dt__kernels_set_num_threads(int n)
{
    atomic_store(&threads_override, n > 0 ? n : 0);
    const dt__blas *b = NULL;
    if (dt__blas_get(&b) == DT_OK)
        b->set_num_threads(dt__kernels_num_threads());
    if (dt__onednn_loaded())
        dt__onednn_set_num_threads(dt__kernels_num_threads());
}
