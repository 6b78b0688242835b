/*
 * Storage and memory accounting: every dt_storage is counted per device and
 * per category (current and peak, requested bytes) around the device's
 * allocator (alloc.h). The thread-local default category tags new storage.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "core/log.h"
#include "core/memory_budget.h"
#include "core/tensor_impl.h"

#define DT_MAX_CUDA_DEVICES 16
#define DT_ACCT_SIM         (1 + DT_MAX_CUDA_DEVICES)
#define DT_ACCT_SLOTS       (2 + DT_MAX_CUDA_DEVICES) /* CPU, CUDA 0..15, sim */

static pthread_mutex_t acct_lock = PTHREAD_MUTEX_INITIALIZER;
static dt_memory_stats acct[DT_ACCT_SLOTS];
/* Referenced here, not only registered from a constructor in src/kernels/,
 * so a statically linked program that never touches a kernel table still
 * gets the device allocators. */
extern const dt_allocator_ops dt__sim_allocator;
#ifdef DT_HAVE_CUDA
extern const dt_allocator_ops dt__cuda_allocator;
static const dt_allocator_ops *allocators[DT_DEVICE_TYPE_COUNT] = {
    &dt__host_allocator, &dt__cuda_allocator, &dt__sim_allocator};
#else
static const dt_allocator_ops *allocators[DT_DEVICE_TYPE_COUNT] = {&dt__host_allocator, NULL,
                                                                   &dt__sim_allocator};
#endif
static _Thread_local dt_mem_category default_category = DT_MEM_OTHER;
static atomic_bool device_memory_used;

bool dt__device_memory_used(void)
{
    return atomic_load_explicit(&device_memory_used, memory_order_relaxed);
}

static int acct_slot(dt_device device)
{
    if (device.type == DT_DEVICE_CPU)
        return 0;
    if (device.type == DT_DEVICE_CUDA && device.index >= 0 && device.index < DT_MAX_CUDA_DEVICES)
        return 1 + device.index;
    if (device.type == DT_DEVICE_SIM && device.index == 0)
        return DT_ACCT_SIM;
    return -1;
}

void dt__allocator_register(dt_device_type type, const dt_allocator_ops *ops)
{
    if ((int)type >= 0 && (int)type < DT_DEVICE_TYPE_COUNT) {
        pthread_mutex_lock(&acct_lock);
        allocators[type] = ops;
        pthread_mutex_unlock(&acct_lock);
    }
}

const dt_allocator_ops *dt__allocator_for(dt_device device)
{
    if ((int)device.type < 0 || (int)device.type >= DT_DEVICE_TYPE_COUNT)
        return NULL;
    pthread_mutex_lock(&acct_lock);
    const dt_allocator_ops *ops = allocators[device.type];
    pthread_mutex_unlock(&acct_lock);
    return ops;
}

const char *dt_mem_category_name(dt_mem_category cat)
{
    static const char *const names[DT_MEM_CATEGORY_COUNT] = {"other",     "parameter",  "gradient",
                                                             "optimizer", "activation", "comm"};
    return ((int)cat >= 0 && (int)cat < DT_MEM_CATEGORY_COUNT) ? names[cat] : "invalid";
}

dt_mem_category dt_memory_set_default_category(dt_mem_category cat)
{
    dt_mem_category prev = default_category;
    if ((int)cat >= 0 && (int)cat < DT_MEM_CATEGORY_COUNT)
        default_category = cat;
    else
        DT_LOG_WARN("alloc", "dt_memory_set_default_category: unknown category %d ignored",
                    (int)cat);
    return prev;
}

/* Caller holds acct_lock. */
static void acct_add(dt_memory_stats *s, dt_mem_category cat, int64_t bytes)
{
    s->current[cat] += bytes;
    s->total_current += bytes;
    if (s->current[cat] > s->peak[cat])
        s->peak[cat] = s->current[cat];
    if (s->total_current > s->total_peak)
        s->total_peak = s->total_current;
}

/* DT_MEMORY_LIMIT's admission of @p nbytes more live host bytes. */
static dt_status host_admit(size_t nbytes)
{
    int64_t limit = dt__memory_budget(NULL);
    if (limit < 0)
        return DT_OK;
    pthread_mutex_lock(&acct_lock);
    dt_memory_stats live = acct[0];
    pthread_mutex_unlock(&acct_lock);
    if (live.total_current + (int64_t)nbytes <= limit)
        return DT_OK;
    return dt__memory_budget_refuse(nbytes, default_category, &live);
}

dt_status dt__storage_create(size_t nbytes, dt_device device, dt_storage **out)
{
    DT_ARG_NOT_NULL(out);
    int slot = acct_slot(device);
    const dt_allocator_ops *ops = dt__allocator_for(device);
    if (slot < 0 || ops == NULL)
        return DT_ERR(DT_ERR_UNSUPPORTED, "dt__storage_create: no allocator for device %s:%d",
                      dt_device_type_name(device.type), device.index);
    if (nbytes > (size_t)INT64_MAX)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt__storage_create: %zu bytes is too large", nbytes);
    if (device.type == DT_DEVICE_CPU)
        DT_CHECK(host_admit(nbytes));
    dt_storage *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt__storage_create: no memory for the storage handle");
    bool hit = false;
    dt_status st = ops->alloc(device.index, nbytes, &s->data, &s->block_bytes, &hit);
    if (st != DT_OK) {
        free(s);
        return st;
    }
    atomic_init(&s->refcount, 1);
    if (device.type != DT_DEVICE_CPU)
        atomic_store(&device_memory_used, true);
    s->nbytes = nbytes;
    s->device = device;
    s->category = default_category;
    pthread_mutex_lock(&acct_lock);
    acct_add(&acct[slot], s->category, (int64_t)nbytes);
    acct[slot].n_allocs++;
    if (hit)
        acct[slot].n_cache_hits++;
    pthread_mutex_unlock(&acct_lock);
    *out = s;
    return DT_OK;
}

void dt__storage_release(dt_storage *s)
{
    if (s == NULL || atomic_fetch_sub(&s->refcount, 1) != 1)
        return;
    int slot = acct_slot(s->device);
    const dt_allocator_ops *ops = dt__allocator_for(s->device);
    pthread_mutex_lock(&acct_lock);
    acct_add(&acct[slot], s->category, -(int64_t)s->nbytes);
    pthread_mutex_unlock(&acct_lock);
    ops->free(s->device.index, s->data, s->block_bytes);
    free(s);
}

void dt__storage_set_category(dt_storage *s, dt_mem_category cat)
{
    if (s == NULL || (int)cat < 0 || (int)cat >= DT_MEM_CATEGORY_COUNT)
        return;
    int slot = acct_slot(s->device);
    pthread_mutex_lock(&acct_lock);
    if (s->category != cat) {
        acct_add(&acct[slot], s->category, -(int64_t)s->nbytes);
        s->category = cat;
        acct_add(&acct[slot], cat, (int64_t)s->nbytes);
    }
    pthread_mutex_unlock(&acct_lock);
}

dt_status dt_memory_stats_get(dt_device device, dt_memory_stats *out)
{
    DT_ARG_NOT_NULL(out);
    int slot = acct_slot(device);
    if (slot < 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_memory_stats_get: unknown device %s:%d",
                      dt_device_type_name(device.type), device.index);
    const dt_allocator_ops *ops = dt__allocator_for(device);
    int64_t cached =
        (ops != NULL && ops->cached_bytes != NULL) ? ops->cached_bytes(device.index) : 0;
    pthread_mutex_lock(&acct_lock);
    dt_memory_stats s = acct[slot];
    pthread_mutex_unlock(&acct_lock);
    s.cached = cached;
    *out = s;
    return DT_OK;
}

void dt_memory_reset_peak(dt_device device)
{
    int slot = acct_slot(device);
    if (slot < 0)
        return;
    pthread_mutex_lock(&acct_lock);
    for (int c = 0; c < DT_MEM_CATEGORY_COUNT; c++)
        acct[slot].peak[c] = acct[slot].current[c];
    acct[slot].total_peak = acct[slot].total_current;
    pthread_mutex_unlock(&acct_lock);
}

void dt__memory_step_end(void)
{
    for (int t = 0; t < DT_DEVICE_TYPE_COUNT; t++) {
        const dt_allocator_ops *ops = dt__allocator_for((dt_device){(dt_device_type)t, 0});
        if (ops != NULL && ops->trim != NULL)
            ops->trim();
    }
}

void dt_memory_empty_cache(void)
{
    for (int t = 0; t < DT_DEVICE_TYPE_COUNT; t++) {
        const dt_allocator_ops *ops = dt__allocator_for((dt_device){(dt_device_type)t, 0});
        if (ops != NULL && ops->empty_cache != NULL)
            ops->empty_cache();
    }
}

static void print_bytes(FILE *f, int64_t b)
{
    if (b >= ((int64_t)1 << 30))
        fprintf(f, " %10.2f GiB", (double)b / (double)(1 << 30));
    else if (b >= (1 << 20))
        fprintf(f, " %10.2f MiB", (double)b / (double)(1 << 20));
    else
        fprintf(f, " %10.2f KiB", (double)b / 1024.0);
}

void dt_memory_print(const dt_memory_stats *s, FILE *f)
{
    if (s == NULL || f == NULL)
        return;
    fprintf(f, "%-12s %14s %14s\n", "category", "current", "peak");
    for (int c = 0; c < DT_MEM_CATEGORY_COUNT; c++) {
        fprintf(f, "%-12s", dt_mem_category_name((dt_mem_category)c));
        print_bytes(f, s->current[c]);
        print_bytes(f, s->peak[c]);
        fputc('\n', f);
    }
    fprintf(f, "%-12s", "total");
    print_bytes(f, s->total_current);
    print_bytes(f, s->total_peak);
    fprintf(f, "\n%-12s", "cached");
    print_bytes(f, s->cached);
    fprintf(f, "\nallocations %lld, cache hits %lld\n", (long long)s->n_allocs,
            (long long)s->n_cache_hits);
}
