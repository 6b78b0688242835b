/*
 * The layout behind dt_mesh, shared by mesh/ and placement/. Not installed.
 *
 * A root mesh (dt_mesh_create / _virtual) owns its dim comms, its counters
 * and its cache; a sliced mesh points at its root (holding a reference) and
 * uses the root's comms, counters and cache lock.
 */
#ifndef DT_MESH_IMPL_H
#define DT_MESH_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "dtensor/mesh.h"

/* One entry of the plan cache: a value blob keyed by bytes (both copied). */
typedef struct dt__mesh_cache_entry {
    struct dt__mesh_cache_entry *next;
    uint64_t hash; /* of the key: most mismatches cost one compare */
    size_t key_len, value_len;
    unsigned char *key; /* key then value, one block */
} dt__mesh_cache_entry;

#define DT__MESH_CACHE_MAX 256 /* entries kept per mesh; the oldest go first */

struct dt_mesh {
    uint32_t magic; /* DT__MAGIC_MESH while alive (core/handle.h) */
    atomic_int refcount;
    int ndim;
    int shape[DT_MESH_MAX_DIMS];
    char names[DT_MESH_MAX_DIMS][DT_MESH_NAME_MAX]; /* "" = unnamed */
    int size;
    int *ranks;  /* world rank at each position (row-major), [size] */
    int my_rank; /* position of this process in ranks */
    int coord[DT_MESH_MAX_DIMS];
    dt_runtime *rt;                      /* NULL for a virtual mesh */
    dt_comm *dim_comm[DT_MESH_MAX_DIMS]; /* borrowed from root when sliced */
    struct dt_mesh *root;                /* NULL for a root; else retained */
    /* root only: */
    pthread_mutex_t lock;
    dt__mesh_cache_entry *cache;
    int cache_len;
    atomic_llong coll_count[DT_COLL_KIND_COUNT];
    atomic_llong coll_bytes[DT_COLL_KIND_COUNT];
};

/* Count one collective of @p kind in which this rank received @p bytes. */
void dt__mesh_count_coll(dt_mesh *m, dt_coll_kind kind, int64_t bytes);

/* Copy the value cached under @p key into @p value (value_len bytes); false when
 * absent. Values are copied in and out so eviction never frees one in use. */
bool dt__mesh_cache_get(dt_mesh *m, const void *key, size_t key_len, void *value, size_t value_len);
/* Cache a copy of @p value under @p key (no-op if present or out of memory). */
void dt__mesh_cache_put(dt_mesh *m, const void *key, size_t key_len, const void *value,
                        size_t value_len);

/* Format a mesh shape as "2x3x4" into buf (truncated to len); returns buf. */
/* dt_mesh_dim_index for a caller: the error names @p fn, the call the user made. */
dt_status dt__mesh_dim_find(const char *fn, const dt_mesh *m, const char *name, int *out);

const char *dt__mesh_shape_str(int ndim, const int *shape, char *buf, size_t len);

/* Build the layout part of a root mesh (no comms): validation named after fn. */
dt_status dt__mesh_layout_create(const char *fn, int ndim, const int *shape,
                                 const char *const *names, int world_size, int my_rank,
                                 dt_mesh **out);

#endif
