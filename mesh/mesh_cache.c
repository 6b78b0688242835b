/* The mesh's collective counters (CommDebugMode) and its plan cache, both kept
 * on the root mesh and shared by its slices; thread-safe. */
#include <stdlib.h>
#include <string.h>

#include "mesh/mesh_impl.h"

static dt_mesh *mesh_root(dt_mesh *m)
{
    return m->root != NULL ? m->root : m;
}

const char *dt_coll_kind_name(dt_coll_kind kind)
{
    static const char *names[DT_COLL_KIND_COUNT] = {"all-gather", "all-reduce", "reduce-scatter",
                                                    "all-to-all", "broadcast"};
    return (kind >= 0 && kind < DT_COLL_KIND_COUNT) ? names[kind] : "invalid";
}

void dt__mesh_count_coll(dt_mesh *m, dt_coll_kind kind, int64_t bytes)
{
    dt_mesh *r = mesh_root(m);
    atomic_fetch_add(&r->coll_count[kind], 1);
    atomic_fetch_add(&r->coll_bytes[kind], bytes);
}

void dt_mesh_coll_stats(const dt_mesh *m, dt_coll_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (m == NULL)
        return;
    const dt_mesh *r = m->root != NULL ? m->root : m;
    for (int k = 0; k < DT_COLL_KIND_COUNT; k++) {
        out->count[k] = atomic_load(&r->coll_count[k]);
        out->bytes[k] = atomic_load(&r->coll_bytes[k]);
    }
}

void dt_mesh_coll_stats_reset(dt_mesh *m)
{
    if (m == NULL)
        return;
    dt_mesh *r = mesh_root(m);
    for (int k = 0; k < DT_COLL_KIND_COUNT; k++) {
        atomic_store(&r->coll_count[k], 0);
        atomic_store(&r->coll_bytes[k], 0);
    }
}

int64_t dt_coll_stats_total(const dt_coll_stats *s)
{
    int64_t t = 0;
    for (int k = 0; k < DT_COLL_KIND_COUNT; k++)
        t += s->count[k];
    return t;
}

/* The cache lives on the root and is shared by its slices: callers put the
 * identity of the (sliced) mesh they plan for into the key. */
static uint64_t key_hash(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

bool dt__mesh_cache_get(dt_mesh *m, const void *key, size_t key_len, void *value, size_t value_len)
{
    dt_mesh *r = mesh_root(m);
    uint64_t h = key_hash(key, key_len);
    bool found = false;
    pthread_mutex_lock(&r->lock);
    for (dt__mesh_cache_entry **pp = &r->cache; *pp != NULL; pp = &(*pp)->next) {
        dt__mesh_cache_entry *e = *pp;
        if (e->hash == h && e->key_len == key_len && e->value_len == value_len &&
            memcmp(e->key, key, key_len) == 0) {
            memcpy(value, e->key + key_len, value_len);
            *pp = e->next; /* move to the front: recently used entries stay */
            e->next = r->cache;
            r->cache = e;
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return found;
}

static void cache_entry_free(dt__mesh_cache_entry *e)
{
    free(e->key);
    free(e);
}

void dt__mesh_cache_put(dt_mesh *m, const void *key, size_t key_len, const void *value,
                        size_t value_len)
{
    dt_mesh *r = mesh_root(m);
    dt__mesh_cache_entry *e = calloc(1, sizeof(*e));
    unsigned char *kv = malloc(key_len + value_len);
    if (e == NULL || kv == NULL) { /* a cache miss next time is harmless */
        free(e);
        free(kv);
        return;
    }
    memcpy(kv, key, key_len);
    memcpy(kv + key_len, value, value_len);
    e->key = kv;
    e->hash = key_hash(key, key_len);
    e->key_len = key_len;
    e->value_len = value_len;
    pthread_mutex_lock(&r->lock);
    for (dt__mesh_cache_entry *x = r->cache; x != NULL; x = x->next) {
        if (x->hash == e->hash && x->key_len == key_len && memcmp(x->key, key, key_len) == 0) {
            pthread_mutex_unlock(&r->lock);
            cache_entry_free(e);
            return;
        }
    }
    if (r->cache_len >= DT__MESH_CACHE_MAX) { /* drop the least recently used (the tail) */
        dt__mesh_cache_entry **pp = &r->cache;
        while ((*pp)->next != NULL)
            pp = &(*pp)->next;
        cache_entry_free(*pp);
        *pp = NULL;
        r->cache_len--;
    }
    e->next = r->cache;
    r->cache = e;
    r->cache_len++;
    pthread_mutex_unlock(&r->lock);
}
