/*
 * Handle memory with a quarantine (handle.h). A released handle is zeroed (so
 * no stale pointer in it is ever followed), marked DT__MAGIC_DEAD and kept in
 * a ring of the last QUARANTINE releases of its size; only when it leaves the
 * ring does it become reusable. So a handle used after its release reads a
 * dead magic unless QUARANTINE handles of its size were released since.
 * Memory is never given back: handles are small and their peak count bounds
 * it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/handle.h"

#define QUARANTINE 1024
#define MAX_SIZES  8

typedef struct reusable {
    uint32_t magic; /* still DT__MAGIC_DEAD */
    struct reusable *next;
} reusable;

typedef struct size_pool {
    size_t size;
    void *ring[QUARANTINE]; /* the newest releases, oldest at ring[head] when full */
    size_t head, n;
    reusable *free; /* out of quarantine */
} size_pool;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static size_pool pools[MAX_SIZES];

/* The pool of @p size; NULL when every slot holds another size. Caller holds lock. */
static size_pool *pool_for(size_t size)
{
    for (int i = 0; i < MAX_SIZES; i++) {
        if (pools[i].size == size)
            return &pools[i];
        if (pools[i].size == 0) {
            pools[i].size = size;
            return &pools[i];
        }
    }
    return NULL;
}

void *dt__handle_new(size_t size, uint32_t magic)
{
    void *h = NULL;
    pthread_mutex_lock(&lock);
    size_pool *p = pool_for(size);
    if (p != NULL && p->free != NULL) {
        h = p->free;
        p->free = p->free->next;
    }
    pthread_mutex_unlock(&lock);
    if (h == NULL)
        h = malloc(size < sizeof(reusable) ? sizeof(reusable) : size);
    if (h != NULL) {
        memset(h, 0, size);
        *(uint32_t *)h = magic;
    }
    return h;
}

void dt__handle_delete(void *h, size_t size)
{
    if (h == NULL)
        return;
    memset(h, 0, size);
    *(uint32_t *)h = DT__MAGIC_DEAD;
    pthread_mutex_lock(&lock);
    size_pool *p = pool_for(size);
    if (p != NULL) {
        if (p->n == QUARANTINE) { /* the oldest leaves quarantine */
            reusable *old = p->ring[p->head];
            old->next = p->free;
            p->free = old;
            p->ring[p->head] = h;
            p->head = (p->head + 1) % QUARANTINE;
        } else {
            p->ring[(p->head + p->n++) % QUARANTINE] = h;
        }
    }
    pthread_mutex_unlock(&lock);
    if (p == NULL) /* a ninth handle size: no quarantine for it */
        free(h);
}

const char *dt__handle_problem(const void *h, uint32_t magic)
{
    if (magic == 0 || h == NULL)
        return NULL;
    uint32_t m = *(const uint32_t *)h;
    if (m == magic)
        return NULL;
    return m == DT__MAGIC_DEAD ? "a released" : "not a live"; /* "... tensor" */
}
