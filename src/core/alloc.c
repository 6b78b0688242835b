/*
 * The caching host allocator. Requests are rounded up to a size class:
 * powers of two from 64 bytes to 1 MiB, then four steps per power of two
 * (1.25, 1.5, 1.75, 2 x 2^k). Blocks are 64-byte aligned; blocks of 1 MiB and
 * more come straight from mmap. A freed block goes onto its class's free list
 * and the next request of that class reuses it (or, when that class has
 * none, the smallest cached block at most twice as big), so a steady-state
 * training step maps no new pages. DT_ALLOC=system frees every block at once instead.
 * The cache gives memory back: mapped blocks (1 MiB and more) that a whole
 * training step did not reuse go back at its end (trim, from dt_optim_step),
 * the cache never holds more than DT_ALLOC_CACHE_MAX, and a new mapping that
 * would take the blocks in use plus cached past the memory budget
 * (DT_MEMORY_LIMIT) empties the cache first, as does a mapping that fails.
 * The free-list link and the step it was freed in live in the first 16 bytes
 * of the cached block itself.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/alloc.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/memory_budget.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n)   ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define ALIGN       64
#define MIN_BLOCK   ((size_t)64)
#define FINE_FROM   ((size_t)1 << 20) /* 4 steps per power of two above this */
#define MMAP_FROM   ((size_t)1 << 20)
#define MAX_REQUEST ((size_t)1 << 62)
#define N_CLASSES   183 /* the last one: 2^62 bytes, MAX_REQUEST */

typedef struct free_block {
    struct free_block *next;
    uint64_t step; /* cache_step when it was freed */
} free_block;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static free_block *free_lists[N_CLASSES];
static int64_t cached_total, in_use_total; /* block bytes */
static int64_t cache_max = -1;             /* DT_ALLOC_CACHE_MAX in bytes */
static uint64_t cache_step;                /* trims so far */
static int cache_mode = -1;                /* -1 not read yet, 0 caching, 1 system */

static int log2_floor(size_t n)
{
    return 63 - __builtin_clzll((unsigned long long)n);
}

/* Size class index and block size of a request. */
static int size_class(size_t nbytes, size_t *block)
{
    if (nbytes <= MIN_BLOCK) {
        *block = MIN_BLOCK;
        return 0;
    }
    if (nbytes <= FINE_FROM) {
        int k = log2_floor(nbytes - 1) + 1; /* smallest 2^k >= nbytes */
        *block = (size_t)1 << k;
        return k - 6;
    }
    int k = log2_floor(nbytes - 1); /* 2^k < nbytes <= 2^(k+1) */
    size_t step = (size_t)1 << (k - 2);
    size_t q = (nbytes + step - 1) / step; /* 5..8 */
    *block = q * step;
    return 15 + (k - 20) * 4 + (int)(q - 5);
}

/* Block size of class @p c (the inverse of size_class). */
static size_t class_block(int c)
{
    if (c < 15)
        return MIN_BLOCK << c;
    int k = 20 + (c - 15) / 4;
    return (size_t)(5 + (c - 15) % 4) << (k - 2);
}

size_t dt__alloc_size_class(size_t nbytes)
{
    size_t block = 0;
    (void)size_class(nbytes, &block);
    return block;
}

static bool caching_enabled(void)
{
    /* caller holds cache_lock */
    if (cache_mode < 0) {
        const char *mode = dt__config_str("DT_ALLOC");
        if (mode != NULL && strcmp(mode, "system") == 0) {
            cache_mode = 1;
        } else {
            if (mode != NULL && strcmp(mode, "caching") != 0)
                DT_LOG_WARN("alloc", "DT_ALLOC=%s is not caching|system; using caching", mode);
            cache_mode = 0;
        }
        DT_LOG_DEBUG("alloc", "host allocator: %s", cache_mode ? "system" : "caching");
        uint64_t max = 0;
        const char *v = dt__config_str("DT_ALLOC_CACHE_MAX");
        cache_max = (v != NULL && dt__parse_bytes(v, &max)) ? (int64_t)max : INT64_MAX;
    }
    return cache_mode == 0;
}

static void *system_alloc(size_t block)
{
    if (block >= MMAP_FROM) {
        void *p = mmap(NULL, block, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    return aligned_alloc(ALIGN, block);
}

static void system_free(void *p, size_t block)
{
    UNPOISON(p, block);
    if (block >= MMAP_FROM) {
        if (munmap(p, block) != 0)
            DT_LOG_WARN("alloc", "munmap(%p, %zu) failed: %s", p, block, strerror(errno));
    } else {
        free(p);
    }
}

/* Caller holds cache_lock. */
static void empty_locked(void)
{
    for (int c = 0; c < N_CLASSES; c++) {
        while (free_lists[c] != NULL) {
            free_block *b = free_lists[c];
            free_lists[c] = b->next;
            size_t block = class_block(c);
            cached_total -= (int64_t)block;
            system_free(b, block);
        }
    }
}

/* Caller holds cache_lock. A new block of @p block bytes is about to be
 * mapped: when the blocks in use, the cache and it would pass the memory
 * budget, the cache goes back first. */
static void make_room_locked(size_t block)
{
    int64_t limit = dt__memory_budget(NULL);
    if (limit >= 0 && cached_total > 0 && in_use_total + cached_total + (int64_t)block > limit)
        empty_locked();
}

/* A cached block of class @p c or up to twice as big (sizes that vary a
 * little from step to step still map nothing); NULL when none. Caller holds
 * cache_lock; *block is updated to the block's size. */
static void *take_cached_locked(int c, size_t *block)
{
    for (int k = c; k < N_CLASSES && class_block(k) <= 2 * *block; k++) {
        if (free_lists[k] == NULL)
            continue;
        free_block *b = free_lists[k];
        *block = class_block(k);
        UNPOISON(b, *block);
        free_lists[k] = b->next;
        cached_total -= (int64_t)*block;
        return b;
    }
    return NULL;
}

static dt_status host_alloc(int index, size_t nbytes, void **ptr, size_t *block_bytes,
                            bool *cache_hit)
{
    if (nbytes > MAX_REQUEST)
        return DT_ERR(DT_ERR_NO_MEMORY, "host allocator: request of %zu bytes is too large",
                      nbytes);
    size_t block = 0;
    int c = size_class(nbytes, &block);
    pthread_mutex_lock(&cache_lock);
    bool caching = caching_enabled();
    void *p = caching ? take_cached_locked(c, &block) : NULL;
    *cache_hit = (p != NULL);
    if (p == NULL && caching)
        make_room_locked(block);
    pthread_mutex_unlock(&cache_lock);
    if (p == NULL) {
        if (block >= MMAP_FROM)
            DT_LOG_DEBUG("alloc", "cache miss: mapping %zu bytes for a request of %zu", block,
                         nbytes);
        p = system_alloc(block);
        if (p == NULL && caching) { /* give the cache back and try once more */
            pthread_mutex_lock(&cache_lock);
            empty_locked();
            pthread_mutex_unlock(&cache_lock);
            p = system_alloc(block);
        }
        if (p == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "host allocator: cannot allocate %zu bytes (block %zu)",
                          nbytes, block);
    }
    pthread_mutex_lock(&cache_lock);
    in_use_total += (int64_t)block;
    pthread_mutex_unlock(&cache_lock);
    *ptr = p;
    *block_bytes = block;
    return DT_OK;
}

static void host_free(int index, void *ptr, size_t block)
{
    if (ptr == NULL)
        return;
    size_t check = 0;
    int c = size_class(block, &check);
    pthread_mutex_lock(&cache_lock);
    in_use_total -= (int64_t)block;
    if (caching_enabled() && check == block && cached_total + (int64_t)block <= cache_max) {
        free_block *b = ptr;
        b->next = free_lists[c];
        b->step = cache_step;
        free_lists[c] = b;
        cached_total += (int64_t)block;
        POISON((char *)ptr + sizeof(free_block), block - sizeof(free_block));
        ptr = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
    if (ptr != NULL)
        system_free(ptr, block);
}

/* Mapped blocks freed before the previous trim were not reused for a whole
 * step: a transient (start-up, a one-off evaluation) whose pages go back. */
static void host_trim(void)
{
    pthread_mutex_lock(&cache_lock);
    for (int c = 0; c < N_CLASSES; c++) {
        size_t block = class_block(c);
        if (block < MMAP_FROM)
            continue;
        for (free_block **link = &free_lists[c]; *link != NULL;) {
            free_block *b = *link;
            if (b->step == cache_step) { /* freed during the step that just ended */
                link = &b->next;
                continue;
            }
            *link = b->next;
            cached_total -= (int64_t)block;
            system_free(b, block);
        }
    }
    cache_step++;
    pthread_mutex_unlock(&cache_lock);
}

static void host_empty_cache(void)
{
    pthread_mutex_lock(&cache_lock);
    empty_locked();
    pthread_mutex_unlock(&cache_lock);
}

static int64_t host_cached_bytes(int index)
{
    pthread_mutex_lock(&cache_lock);
    int64_t n = cached_total;
    pthread_mutex_unlock(&cache_lock);
    return n;
}

const dt_allocator_ops dt__host_allocator = {
    .name = "host-caching",
    .alloc = host_alloc,
    .free = host_free,
    .empty_cache = host_empty_cache,
    .cached_bytes = host_cached_bytes,
    .trim = host_trim,
};
