/*
 * index.json of a sharded checkpoint: every tensor's global shape and dtype
 * and where each of its shards lives (file, key, offset, shape). Parsed as
 * hostile input, like the safetensors header.
 *
 *   {"format": "dtensor-sharded", "version": 1, "save_id": "<hex>",
 *    "world_size": W,
 *    "optim": {"name": "adamw", "step": 3, "lr": 0.003, ...},   (optional)
 *    "tensors": {"<fqn>": {"dtype": "F32", "shape": [..], "placements": "S(0)",
 *                "shards": [{"file": "rank-0.<id>.safetensors", "key": "<fqn>",
 *                            "offset": [..], "shape": [..]}, ...]}}}
 *
 * With "optim", the tensors named "optim.<fqn>.<state>" are the optimizer
 * state of parameter <fqn>, stored with the parameter's placements.
 */
#define DT_CK_OPTIM_PREFIX "optim."
#ifndef DT_CHECKPOINT_CK_INDEX_H
#define DT_CHECKPOINT_CK_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "dtensor/checkpoint.h"

#define DT_CK_INDEX_NAME "index.json"
#define DT_CK_INDEX_MAX  ((size_t)64 << 20) /* largest index.json we read */

typedef struct dt_ck_shard {
    char *file; /* a plain name inside the checkpoint directory */
    char *key;
    int64_t offset[DT_MAX_DIMS];
    int64_t shape[DT_MAX_DIMS];
} dt_ck_shard;

typedef struct dt_ck_entry {
    char *name;
    dt_dtype dtype;
    int ndim;
    int64_t shape[DT_MAX_DIMS];
    int n_shards;
    dt_ck_shard *shards;
} dt_ck_entry;

typedef struct dt_ck_index {
    char *save_id;
    int world_size;
    /* "optim": {"name": "adamw", "step": N, ...} when optimizer state was saved */
    char *optim_name; /* NULL when the index has no "optim" object */
    int64_t optim_step;
    int n;
    dt_ck_entry *entries; /* sorted by name */
} dt_ck_index;

/* Parse and validate @p len bytes of index JSON (@p what names it in messages):
 * DT_ERR_FORMAT naming the tensor and value for anything inconsistent (bad
 * types, unknown dtype, a file name with '/' or starting with '.', shards
 * outside the tensor or overlapping, ndim mismatches, duplicate names). */
dt_status dt__ck_index_parse(const char *text, size_t len, const char *what, dt_ck_index **out);
/* Read and parse <dir>/index.json. */
dt_status dt__ck_index_read(const char *dir, dt_ck_index **out);
void dt__ck_index_free(dt_ck_index *x);
/* The entry called @p name, or NULL. */
const dt_ck_entry *dt__ck_index_find(const dt_ck_index *x, const char *name);

#endif
