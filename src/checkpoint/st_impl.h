/*
 * Internals of the safetensors reader and writer (src/checkpoint/).
 */
#ifndef DT_CHECKPOINT_ST_IMPL_H
#define DT_CHECKPOINT_ST_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtensor/checkpoint.h"

/* The reference reader's cap on the header length. */
#define DT_ST_MAX_HEADER ((uint64_t)100000000)
/* Largest integer a JSON number (a double in cJSON) holds exactly. */
#define DT_ST_MAX_INT ((double)9007199254740992.0)

/* A safetensors dtype name: its element size, its rank in the reference
 * writer's order (Rust enum order: larger = written first) and our dtype
 * (DT_DTYPE_COUNT when we have none). */
typedef struct dt_st_dtype {
    const char *name;
    size_t size;
    int rank;
    dt_dtype dtype;
} dt_st_dtype;

/* The table entry for @p name, NULL when unknown. */
const dt_st_dtype *dt__st_dtype_by_name(const char *name);
/* The table entry for our @p dtype (always found for a valid dtype). */
const dt_st_dtype *dt__st_dtype_of(dt_dtype dtype);

/* A JSON number that is an integer in [0, 2^53] into @p out; false otherwise. */
struct cJSON;
bool dt__st_json_uint(const struct cJSON *v, uint64_t *out);

/* True when @p s[0..len) is valid UTF-8 (no overlongs, surrogates or
 * code points past U+10FFFF); *bad_at receives the first bad byte's offset. */
bool dt__st_utf8_valid(const unsigned char *s, size_t len, size_t *bad_at);

/* The reference writer's order for @p n entries: by dtype rank descending,
 * then by name (bytewise). @p order receives entry indices. */
void dt__st_write_order(int n, const dt_safetensors_entry *entries, int *order);

/* Parsed tensor of an open file. */
typedef struct dt_st_tensor {
    char *name;
    const dt_st_dtype *dt;
    int ndim;
    int64_t shape[DT_MAX_DIMS];
    uint64_t begin, end;
} dt_st_tensor;

struct dt_safetensors {
    char *path;                /* for messages */
    const unsigned char *base; /* whole file */
    size_t len;
    bool mapped;               /* base is our mmap */
    const unsigned char *data; /* data section */
    uint64_t data_len;
    int n;
    dt_st_tensor *tensors; /* by begin offset */
    int *by_name;          /* indices sorted by name, for lookups */
    int n_meta;
    char **meta; /* key, value pairs */
};

/* Parse and validate @p len bytes at @p base into @p f (whose path, base and
 * len are set). */
dt_status dt__st_parse(dt_safetensors *f);

#endif
