/* The store's key-value table: chained hash buckets, grown when crowded. */
#include <stdlib.h>
#include <string.h>

#include "comm/store/store_kv.h"

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

bool dt__store_kv_init(dt_store_kv *kv)
{
    kv->nbuckets = 256;
    kv->count = 0;
    kv->buckets = calloc(kv->nbuckets, sizeof(*kv->buckets));
    return kv->buckets != NULL;
}

static void entry_free(dt_store_kv_entry *e)
{
    free(e->key);
    free(e->val);
    free(e);
}

void dt__store_kv_free(dt_store_kv *kv)
{
    if (kv->buckets == NULL)
        return;
    for (size_t b = 0; b < kv->nbuckets; b++) {
        dt_store_kv_entry *e = kv->buckets[b];
        while (e != NULL) {
            dt_store_kv_entry *next = e->next;
            entry_free(e);
            e = next;
        }
    }
    free(kv->buckets);
    kv->buckets = NULL;
}

dt_store_kv_entry *dt__store_kv_find(dt_store_kv *kv, const uint8_t *key, size_t klen)
{
    dt_store_kv_entry *e = kv->buckets[hash_bytes(key, klen) % kv->nbuckets];
    for (; e != NULL; e = e->next)
        if (e->klen == klen && memcmp(e->key, key, klen) == 0)
            return e;
    return NULL;
}

/* Double the bucket count when the table gets crowded; on no memory keep it. */
static void maybe_grow(dt_store_kv *kv)
{
    if (kv->count < 2 * kv->nbuckets)
        return;
    size_t nb = kv->nbuckets * 2;
    dt_store_kv_entry **buckets = calloc(nb, sizeof(*buckets));
    if (buckets == NULL)
        return;
    for (size_t b = 0; b < kv->nbuckets; b++) {
        dt_store_kv_entry *e = kv->buckets[b];
        while (e != NULL) {
            dt_store_kv_entry *next = e->next;
            size_t nbk = hash_bytes(e->key, e->klen) % nb;
            e->next = buckets[nbk];
            buckets[nbk] = e;
            e = next;
        }
    }
    free(kv->buckets);
    kv->buckets = buckets;
    kv->nbuckets = nb;
}

static uint8_t *dup_bytes(const uint8_t *p, size_t n)
{
    uint8_t *d = malloc(n > 0 ? n : 1);
    if (d != NULL && n > 0)
        memcpy(d, p, n);
    return d;
}

bool dt__store_kv_set(dt_store_kv *kv, const uint8_t *key, size_t klen, const uint8_t *val,
                      size_t vlen)
{
    uint8_t *v = dup_bytes(val, vlen);
    if (v == NULL)
        return false;
    dt_store_kv_entry *e = dt__store_kv_find(kv, key, klen);
    if (e != NULL) {
        free(e->val);
        e->val = v;
        e->vlen = vlen;
        return true;
    }
    e = calloc(1, sizeof(*e));
    uint8_t *k = dup_bytes(key, klen);
    if (e == NULL || k == NULL) {
        free(e);
        free(k);
        free(v);
        return false;
    }
    e->key = k;
    e->klen = klen;
    e->val = v;
    e->vlen = vlen;
    size_t b = hash_bytes(key, klen) % kv->nbuckets;
    e->next = kv->buckets[b];
    kv->buckets[b] = e;
    kv->count++;
    maybe_grow(kv);
    return true;
}

size_t dt__store_kv_delete_prefix(dt_store_kv *kv, const uint8_t *prefix, size_t plen)
{
    size_t n = 0;
    for (size_t b = 0; b < kv->nbuckets; b++) {
        dt_store_kv_entry **pp = &kv->buckets[b];
        while (*pp != NULL) {
            dt_store_kv_entry *e = *pp;
            if (e->klen >= plen && memcmp(e->key, prefix, plen) == 0) {
                *pp = e->next;
                entry_free(e);
                n++;
            } else {
                pp = &e->next;
            }
        }
    }
    kv->count -= n;
    return n;
}
