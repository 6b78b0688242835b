/*
 * Matmuls on oneDNN's matmul primitive. Creating a primitive costs 0.1-1 ms
 * (its kernels are generated for the exact layout), running a small one a few
 * microseconds, so primitives are kept in an LRU cache of DT_GEMM_CACHE
 * entries keyed by everything a primitive fixes: shape, batch, strides,
 * transposes, alpha (an output scale), beta (a sum post-op) and the thread
 * count. Calls are serialised by one lock: each matmul already uses every
 * thread of the rank, so running two at once would only oversubscribe.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "core/error.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/onednn_api.h"

#ifdef DT_HAVE_ONEDNN
enum { KEY_WORDS = 17 };

typedef struct mm_key {
    int64_t w[KEY_WORDS];
} mm_key;

typedef struct cache_entry {
    mm_key key;
    uint64_t hash, last_use;
    dnnl_primitive_t prim;
    dnnl_memory_t mem[4]; /* a, b, c, bias (NULL without); data handles set per call */
} cache_entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static cache_entry *cache;
static int cache_cap, cache_len;
static uint64_t tick;
static int64_t n_created, n_evicted;
static atomic_bool timing;  /* dt__onednn_time_gemms */
static double gemm_seconds; /* under lock */

static double thread_cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void fork_prepare(void)
{
    pthread_mutex_lock(&lock);
}

static void fork_after(void)
{
    pthread_mutex_unlock(&lock);
}

static void cache_init(void)
{
    cache_cap = (int)dt__config_int("DT_GEMM_CACHE");
    if (cache_cap < 1)
        cache_cap = 1;
    cache = calloc((size_t)cache_cap, sizeof(*cache));
    if (cache == NULL)
        cache_cap = 0; /* every call then builds and drops its primitive */
    /* a fork in the middle of a matmul must not leave the child's lock held */
    pthread_atfork(fork_prepare, fork_after, fork_after);
}

static mm_key make_key(const dt__onednn_mm *mm, int threads)
{
    mm_key k;
    memset(&k, 0, sizeof(k));
    int64_t *w = k.w;
    float alpha = mm->alpha, beta = mm->beta;
    uint32_t ab = 0, bb = 0;
    memcpy(&ab, &alpha, sizeof(ab));
    memcpy(&bb, &beta, sizeof(bb));
    int64_t v[] = {mm->batch,
                   mm->m,
                   mm->n,
                   mm->k,
                   mm->trans_a,
                   mm->trans_b,
                   mm->lda,
                   mm->ldb,
                   mm->ldc,
                   mm->sa,
                   mm->sb,
                   mm->sc,
                   ab,
                   bb,
                   threads,
                   mm->ab_dtype * 16 + mm->c_dtype,
                   mm->bias != NULL};
    memcpy(w, v, sizeof(v));
    return k;
}

static uint64_t key_hash(const mm_key *k)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    const unsigned char *p = (const unsigned char *)k->w;
    for (size_t i = 0; i < sizeof(k->w); i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/*
 * One operand's descriptor: logical rows x cols, stored row-major with row
 * stride @p ld, or transposed (cols rows of stride ld). A batch of one that
 * is shared (bstride 0) is a broadcast dim of size 1.
 */
static dnnl_status_t mat_desc(const dt__onednn_mm *mm, dnnl_memory_desc_t *md, int64_t bstride,
                              int64_t rows, int64_t cols, bool trans, int64_t ld, dt_dtype dtype)
{
    const dt__dnnl *api = dt__dnnl_api();
    int64_t span = ld * (trans ? cols : rows);
    dnnl_dims_t dims = {0}, strides = {0};
    int nd = 0;
    if (mm->batch > 1) {
        dims[nd] = bstride == 0 ? 1 : mm->batch;
        strides[nd++] = bstride == 0 ? span : bstride;
    }
    dims[nd] = rows;
    strides[nd++] = trans ? 1 : ld;
    dims[nd] = cols;
    strides[nd++] = trans ? ld : 1;
    dnnl_data_type_t dt = dtype == DT_DTYPE_BF16 ? dnnl_bf16 : dnnl_f32;
    return api->dnnl_memory_desc_init_by_strides(md, nd, dims, dt, strides);
}

/* The bias: one f32 row of n, broadcast over C's rows (and batches). */
static dnnl_status_t bias_desc(const dt__onednn_mm *mm, dnnl_memory_desc_t *md)
{
    dnnl_dims_t dims = {1, 1, 1}, strides = {mm->n, mm->n, 1};
    int nd = mm->batch > 1 ? 3 : 2;
    dims[nd - 1] = mm->n;
    return dt__dnnl_api()->dnnl_memory_desc_init_by_strides(md, nd, dims, dnnl_f32,
                                                            strides + (3 - nd));
}

/* a, b, c and (with a bias) the bias; returns how many. */
static dnnl_status_t build_descs(const dt__onednn_mm *mm, dnnl_memory_desc_t md[4], int *n)
{
    dnnl_status_t s =
        mat_desc(mm, &md[0], mm->sa, mm->m, mm->k, mm->trans_a, mm->lda, mm->ab_dtype);
    if (s == dnnl_success)
        s = mat_desc(mm, &md[1], mm->sb, mm->k, mm->n, mm->trans_b, mm->ldb, mm->ab_dtype);
    if (s == dnnl_success)
        s = mat_desc(mm, &md[2], mm->sc, mm->m, mm->n, false, mm->ldc, mm->c_dtype);
    *n = 3;
    if (s == dnnl_success && mm->bias != NULL) {
        s = bias_desc(mm, &md[3]);
        *n = 4;
    }
    return s;
}

/* alpha as an output scale (applied before post-ops), beta as a sum post-op. */
static dnnl_status_t make_attr(const dt__onednn_mm *mm, dnnl_primitive_attr_t *attr)
{
    const dt__dnnl *api = dt__dnnl_api();
    dnnl_status_t s = api->dnnl_primitive_attr_create(attr);
    if (s == dnnl_success && mm->alpha != 1.0f)
        s = api->dnnl_primitive_attr_set_output_scales(*attr, 1, 0, &mm->alpha);
    if (s == dnnl_success && mm->beta != 0.0f) {
        dnnl_post_ops_t po = NULL;
        s = api->dnnl_post_ops_create(&po);
        if (s == dnnl_success)
            s = api->dnnl_post_ops_append_sum(po, mm->beta);
        if (s == dnnl_success)
            s = api->dnnl_primitive_attr_set_post_ops(*attr, po);
        if (po != NULL)
            api->dnnl_post_ops_destroy(po);
    }
    return s;
}

dnnl_status_t dt__onednn_matmul_pd(const dt__onednn_mm *mm, dnnl_primitive_desc_t *pd)
{
    const dt__dnnl *api = dt__dnnl_api();
    dnnl_memory_desc_t md[4];
    dnnl_matmul_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    int n = 0;
    dnnl_status_t s = build_descs(mm, md, &n);
    if (s == dnnl_success)
        s = api->dnnl_matmul_desc_init(&desc, &md[0], &md[1], n > 3 ? &md[3] : NULL, &md[2]);
    if (s == dnnl_success)
        s = make_attr(mm, &attr);
    if (s == dnnl_success)
        s = api->dnnl_primitive_desc_create(pd, &desc, attr, api->engine, NULL);
    if (attr != NULL)
        api->dnnl_primitive_attr_destroy(attr);
    return s;
}

static void entry_destroy(cache_entry *e)
{
    const dt__dnnl *api = dt__dnnl_api();
    for (int i = 0; i < 4; i++)
        if (e->mem[i] != NULL)
            api->dnnl_memory_destroy(e->mem[i]);
    if (e->prim != NULL)
        api->dnnl_primitive_destroy(e->prim);
    memset(e, 0, sizeof(*e));
}

/* A layout oneDNN does not take is DT_ERR_UNSUPPORTED (gemm.c then splits the batch). */
static dt_status mm_error(const dt__onednn_mm *mm, const char *what, dnnl_status_t s)
{
    bool layout = strcmp(what, "primitive descriptor") == 0 &&
                  (s == dnnl_unimplemented || s == dnnl_invalid_arguments);
    return DT_ERR(layout ? DT_ERR_UNSUPPORTED : DT_ERR_BACKEND,
                  "gemm: oneDNN %s failed (%s) for %s batch %lld x [%lld x %lld] * [%lld x %lld] "
                  "-> %s, trans_a %d trans_b %d, lda %lld ldb %lld ldc %lld, alpha %g beta %g%s",
                  what, dt__dnnl_status_str(s), dt_dtype_name(mm->ab_dtype), (long long)mm->batch,
                  (long long)mm->m, (long long)mm->k, (long long)mm->k, (long long)mm->n,
                  dt_dtype_name(mm->c_dtype), mm->trans_a, mm->trans_b, (long long)mm->lda,
                  (long long)mm->ldb, (long long)mm->ldc, (double)mm->alpha, (double)mm->beta,
                  mm->bias != NULL ? ", with bias" : "");
}

/* Build the primitive and its memory objects into @p e. */
static dt_status entry_create(const dt__onednn_mm *mm, cache_entry *e)
{
    const dt__dnnl *api = dt__dnnl_api();
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dt__onednn_matmul_pd(mm, &pd);
    if (s != dnnl_success)
        return mm_error(mm, "primitive descriptor", s);
    s = api->dnnl_primitive_create(&e->prim, pd);
    api->dnnl_primitive_desc_destroy(pd);
    dnnl_memory_desc_t md[4];
    int n = 0;
    if (s == dnnl_success)
        s = build_descs(mm, md, &n);
    for (int i = 0; i < n && s == dnnl_success; i++)
        s = api->dnnl_memory_create(&e->mem[i], &md[i], api->engine, DNNL_MEMORY_NONE);
    if (s != dnnl_success) {
        entry_destroy(e);
        return mm_error(mm, "primitive creation", s);
    }
    n_created++;
    return DT_OK;
}

/* The cached entry for @p key, else a new one in a free or the least recently used slot. */
static dt_status lookup(const dt__onednn_mm *mm, const mm_key *key, cache_entry **out)
{
    uint64_t h = key_hash(key);
    int victim = 0;
    for (int i = 0; i < cache_len; i++) {
        cache_entry *e = &cache[i];
        if (e->hash == h && memcmp(&e->key, key, sizeof(*key)) == 0) {
            e->last_use = ++tick;
            *out = e;
            return DT_OK;
        }
        if (e->last_use < cache[victim].last_use)
            victim = i;
    }
    if (cache_len < cache_cap)
        victim = cache_len++;
    else if (cache[victim].prim != NULL) {
        entry_destroy(&cache[victim]);
        n_evicted++;
    }
    cache_entry *e = &cache[victim];
    dt_status st = entry_create(mm, e);
    if (st != DT_OK) {
        if (victim == cache_len - 1)
            cache_len--;
        else
            e->last_use = 0; /* an empty slot, reused first */
        return st;
    }
    e->key = *key;
    e->hash = h;
    e->last_use = ++tick;
    *out = e;
    return DT_OK;
}

static dt_status execute(const dt__onednn_mm *mm, cache_entry *e, const void *a, const void *b,
                         void *c)
{
    const dt__dnnl *api = dt__dnnl_api();
    /* oneDNN never writes a, b or the bias */
    void *ptr[4] = {(void *)a, (void *)b, c, (void *)mm->bias};
    int n = mm->bias != NULL ? 4 : 3;
    dnnl_status_t s = dnnl_success;
    for (int i = 0; i < n && s == dnnl_success; i++)
        s = api->dnnl_memory_set_data_handle(e->mem[i], ptr[i]);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, e->mem[0]},
                               {DNNL_ARG_WEIGHTS, e->mem[1]},
                               {DNNL_ARG_DST, e->mem[2]},
                               {DNNL_ARG_BIAS, e->mem[3]}};
    if (s == dnnl_success)
        s = api->dnnl_primitive_execute(e->prim, api->stream, n, args);
    if (s == dnnl_success)
        s = api->dnnl_stream_wait(api->stream);
    return s == dnnl_success ? DT_OK : mm_error(mm, "execution", s);
}

dt_status dt__onednn_matmul(const dt__onednn_mm *mm, const void *a, const void *b, void *c)
{
    DT_CHECK(dt__onednn_load(NULL));
    pthread_once(&init_once, cache_init);
    pthread_mutex_lock(&lock);
    mm_key key = make_key(mm, dt__onednn_apply_threads());
    dt_status st;
    if (cache_cap == 0) { /* no memory for a cache: build, run, drop */
        cache_entry tmp;
        memset(&tmp, 0, sizeof(tmp));
        st = entry_create(mm, &tmp);
        if (st == DT_OK)
            st = execute(mm, &tmp, a, b, c);
        entry_destroy(&tmp);
    } else {
        cache_entry *e = NULL;
        st = lookup(mm, &key, &e);
        bool timed = atomic_load_explicit(&timing, memory_order_relaxed);
        double t0 = timed ? thread_cpu_s() : 0.0;
        if (st == DT_OK)
            st = execute(mm, e, a, b, c);
        if (timed)
            gemm_seconds += thread_cpu_s() - t0;
    }
    pthread_mutex_unlock(&lock);
    return st;
}

void dt__onednn_time_gemms(bool on)
{
    atomic_store(&timing, on);
}

double dt__onednn_gemm_seconds(void)
{
    pthread_mutex_lock(&lock);
    double s = gemm_seconds;
    pthread_mutex_unlock(&lock);
    return s;
}

void dt__onednn_cache_stats(int *entries, int64_t *created, int64_t *evicted)
{
    pthread_mutex_lock(&lock);
    int live = 0;
    for (int i = 0; i < cache_len; i++)
        live += cache[i].prim != NULL;
    *entries = live;
    *created = n_created;
    *evicted = n_evicted;
    pthread_mutex_unlock(&lock);
}
#else
void dt__onednn_time_gemms(bool on)
{
    (void)on;
}

double dt__onednn_gemm_seconds(void)
{
    return 0.0;
}

dt_status dt__onednn_matmul(const dt__onednn_mm *mm, const void *a, const void *b, void *c)
{
    (void)mm, (void)a, (void)b, (void)c;
    return dt__onednn_load(NULL);
}

void dt__onednn_cache_stats(int *entries, int64_t *created, int64_t *evicted)
{
    *entries = 0;
    *created = *evicted = 0;
}
#endif
