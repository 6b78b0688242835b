/*
 * The store's key-value table (server side only; not thread-safe: the server
 * thread is its only user). Keys and values are byte strings.
 */
#ifndef DT_COMM_STORE_KV_H
#define DT_COMM_STORE_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct dt_store_kv_entry {
    struct dt_store_kv_entry *next;
    uint8_t *key, *val;
    size_t klen, vlen;
} dt_store_kv_entry;

typedef struct dt_store_kv {
    dt_store_kv_entry **buckets;
    size_t nbuckets, count;
} dt_store_kv;

/* An empty table; false when out of memory. free releases every entry. */
bool dt__store_kv_init(dt_store_kv *kv);
void dt__store_kv_free(dt_store_kv *kv);
/* The entry for @p key, or NULL (owned by the table). */
dt_store_kv_entry *dt__store_kv_find(dt_store_kv *kv, const uint8_t *key, size_t klen);
/* Insert or replace; copies both. False when out of memory (table unchanged). */
bool dt__store_kv_set(dt_store_kv *kv, const uint8_t *key, size_t klen, const uint8_t *val,
                      size_t vlen);
/* Remove every key starting with @p prefix; returns how many. */
size_t dt__store_kv_delete_prefix(dt_store_kv *kv, const uint8_t *prefix, size_t plen);

#endif
