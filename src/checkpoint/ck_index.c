/*
 * index.json of sharded checkpoints: hostile-input parsing and validation.
 * (The writer side builds the JSON in sharded_save.c.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "checkpoint/ck_index.h"
#include "checkpoint/st_impl.h"
#include "core/error.h"
#include "core/file_open.h"
#include "core/tensor_impl.h"

#define IFMT(...) DT_ERR(DT_ERR_FORMAT, "checkpoint index " __VA_ARGS__)

void dt__ck_index_free(dt_ck_index *x)
{
    if (x == NULL)
        return;
    for (int i = 0; i < x->n; i++) {
        dt_ck_entry *e = &x->entries[i];
        for (int k = 0; k < e->n_shards; k++) {
            free(e->shards[k].file);
            free(e->shards[k].key);
        }
        free(e->shards);
        free(e->name);
    }
    free(x->entries);
    free(x->save_id);
    free(x->optim_name);
    free(x);
}

static bool ix_uint(const cJSON *v, int64_t *out)
{
    uint64_t u = 0;
    if (!dt__st_json_uint(v, &u))
        return false;
    *out = (int64_t)u;
    return true;
}

/* An array of exactly @p ndim non-negative integers (ndim < 0: any up to DT_MAX_DIMS). */
static bool ix_dims(const cJSON *a, int ndim, int64_t *out, int *got)
{
    if (!cJSON_IsArray(a))
        return false;
    int n = cJSON_GetArraySize(a);
    if ((ndim >= 0 && n != ndim) || n > DT_MAX_DIMS)
        return false;
    for (int d = 0; d < n; d++)
        if (!ix_uint(cJSON_GetArrayItem(a, d), &out[d]))
            return false;
    if (got != NULL)
        *got = n;
    return true;
}

static bool ix_plain_name(const char *s)
{
    return s[0] != '\0' && s[0] != '.' && strchr(s, '/') == NULL && strlen(s) < 256;
}

static char *ix_strdup(const cJSON *v)
{
    return cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
}

static dt_status ix_shard(const char *what, const dt_ck_entry *e, int k, const cJSON *o,
                          dt_ck_shard *s)
{
    if (!cJSON_IsObject(o))
        return IFMT("%s: tensor '%.64s' shard %d is not an object", what, e->name, k);
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(o, "file");
    if (!cJSON_IsString(file) || !ix_plain_name(file->valuestring))
        return IFMT("%s: tensor '%.64s' shard %d: file is not a plain file name", what, e->name, k);
    if (!ix_dims(cJSON_GetObjectItemCaseSensitive(o, "offset"), e->ndim, s->offset, NULL) ||
        !ix_dims(cJSON_GetObjectItemCaseSensitive(o, "shape"), e->ndim, s->shape, NULL))
        return IFMT(
            "%s: tensor '%.64s' shard %d: offset and shape must be %d non-negative integers", what,
            e->name, k, e->ndim);
    for (int d = 0; d < e->ndim; d++)
        if (s->offset[d] > e->shape[d] || s->shape[d] > e->shape[d] - s->offset[d])
            return IFMT("%s: tensor '%.64s' shard %d: dim %d [%lld, +%lld) is outside size %lld",
                        what, e->name, k, d, (long long)s->offset[d], (long long)s->shape[d],
                        (long long)e->shape[d]);
    s->file = strdup(file->valuestring);
    s->key = ix_strdup(cJSON_GetObjectItemCaseSensitive(o, "key"));
    if (s->file == NULL || s->key == NULL)
        return IFMT("%s: tensor '%.64s' shard %d: key missing or not a string", what, e->name, k);
    return DT_OK;
}

static bool ix_overlap(const dt_ck_shard *a, const dt_ck_shard *b, int ndim)
{
    for (int d = 0; d < ndim; d++) {
        if (a->shape[d] == 0 || b->shape[d] == 0)
            return false;
        if (a->offset[d] + a->shape[d] <= b->offset[d] ||
            b->offset[d] + b->shape[d] <= a->offset[d])
            return false;
    }
    return true;
}

static _Thread_local const dt_ck_entry *sort_entry;
static _Thread_local int sort_dim;

static int ix_cmp_start(const void *a, const void *b)
{
    int64_t x = sort_entry->shards[*(const int *)a].offset[sort_dim];
    int64_t y = sort_entry->shards[*(const int *)b].offset[sort_dim];
    return (x > y) - (x < y);
}

static int ix_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The dim whose shard offsets take the most distinct values: sweeping along
 * it compares each shard with few others (a grid of a x b shards: a or b). */
static int ix_sweep_dim(const dt_ck_entry *e, int64_t *tmp)
{
    int best = 0, best_n = -1;
    for (int d = 0; d < e->ndim; d++) {
        for (int k = 0; k < e->n_shards; k++)
            tmp[k] = e->shards[k].offset[d];
        qsort(tmp, (size_t)e->n_shards, sizeof(*tmp), ix_cmp_i64);
        int n = e->n_shards > 0;
        for (int k = 1; k < e->n_shards; k++)
            n += tmp[k] != tmp[k - 1];
        if (n > best_n) {
            best = d;
            best_n = n;
        }
    }
    return best;
}

/* No two shards overlap: sort by start along one dim, then compare each shard
 * only with those starting before it ends there. */
static dt_status ix_check_overlaps(const char *what, const dt_ck_entry *e)
{
    if (e->n_shards < 2 || e->ndim == 0)
        return e->n_shards < 2 ? DT_OK
                               : IFMT("%s: tensor '%.64s': shards 0 and 1 overlap", what, e->name);
    int *order = malloc(sizeof(int) * (size_t)e->n_shards);
    int64_t *tmp = malloc(sizeof(int64_t) * (size_t)e->n_shards);
    dt_status st = DT_OK;
    if (order == NULL || tmp == NULL) {
        st = DT_ERR(DT_ERR_NO_MEMORY, "checkpoint index: %d shards", e->n_shards);
        goto out;
    }
    int sd = ix_sweep_dim(e, tmp);
    for (int k = 0; k < e->n_shards; k++)
        order[k] = k;
    sort_entry = e;
    sort_dim = sd;
    qsort(order, (size_t)e->n_shards, sizeof(int), ix_cmp_start);
    sort_entry = NULL;
    for (int i = 0; i < e->n_shards && st == DT_OK; i++) {
        const dt_ck_shard *a = &e->shards[order[i]];
        int64_t end = a->offset[sd] + a->shape[sd];
        for (int j = i + 1; j < e->n_shards && e->shards[order[j]].offset[sd] < end; j++)
            if (ix_overlap(a, &e->shards[order[j]], e->ndim)) {
                int x = order[i] < order[j] ? order[i] : order[j], y = order[i] ^ order[j] ^ x;
                st = IFMT("%s: tensor '%.64s': shards %d and %d overlap", what, e->name, x, y);
                break;
            }
    }
out:
    free(order);
    free(tmp);
    return st;
}

static dt_status ix_entry(const char *what, const cJSON *o, dt_ck_entry *e)
{
    e->name = strdup(o->string);
    if (e->name == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "checkpoint index: names");
    if (!cJSON_IsObject(o))
        return IFMT("%s: tensor '%.64s' is not an object", what, e->name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(o, "dtype");
    const dt_st_dtype *sd = cJSON_IsString(dt) ? dt__st_dtype_by_name(dt->valuestring) : NULL;
    if (sd == NULL || sd->dtype == DT_DTYPE_COUNT)
        return IFMT("%s: tensor '%.64s': dtype missing or not one of dtensor's", what, e->name);
    e->dtype = sd->dtype;
    if (!ix_dims(cJSON_GetObjectItemCaseSensitive(o, "shape"), -1, e->shape, &e->ndim))
        return IFMT("%s: tensor '%.64s': shape is not up to %d non-negative integers", what,
                    e->name, DT_MAX_DIMS);
    char who[96], why[320];
    snprintf(who, sizeof(who), "tensor '%.64s'", e->name);
    if (dt__check_shape(who, e->ndim, e->shape) != DT_OK) {
        snprintf(why, sizeof(why), "%s", dt_last_error()); /* DT_ERR rewrites that buffer */
        return IFMT("%s: %s", what, why);
    }
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(o, "shards");
    if (!cJSON_IsArray(sh))
        return IFMT("%s: tensor '%.64s': shards is not an array", what, e->name);
    int n = cJSON_GetArraySize(sh);
    e->shards = calloc((size_t)n + 1, sizeof(*e->shards));
    if (e->shards == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "checkpoint index: %d shards", n);
    const cJSON *it = NULL;
    cJSON_ArrayForEach(it, sh)
    {
        dt_status st = ix_shard(what, e, e->n_shards, it, &e->shards[e->n_shards]);
        e->n_shards++; /* counted even on failure so the strings are freed */
        if (st != DT_OK)
            return st;
    }
    return ix_check_overlaps(what, e);
}

static int ix_cmp(const void *a, const void *b)
{
    return strcmp(((const dt_ck_entry *)a)->name, ((const dt_ck_entry *)b)->name);
}

static dt_status ix_root(const char *what, const cJSON *root, dt_ck_index *x)
{
    if (!cJSON_IsObject(root))
        return IFMT("%s: not a JSON object", what);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "dtensor-sharded") != 0 ||
        !cJSON_IsNumber(ver) || ver->valuedouble != 1)
        return IFMT("%s: not a dtensor-sharded version 1 index", what);
    int64_t ws = 0;
    if (!ix_uint(cJSON_GetObjectItemCaseSensitive(root, "world_size"), &ws) || ws < 1 ||
        ws > (1 << 24))
        return IFMT("%s: world_size is not a positive integer", what);
    x->world_size = (int)ws;
    x->save_id = ix_strdup(cJSON_GetObjectItemCaseSensitive(root, "save_id"));
    if (x->save_id == NULL)
        return IFMT("%s: save_id missing or not a string", what);
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(root, "optim");
    if (op != NULL) {
        const cJSON *on = cJSON_IsObject(op) ? cJSON_GetObjectItemCaseSensitive(op, "name") : NULL;
        if (!cJSON_IsString(on) ||
            !ix_uint(cJSON_GetObjectItemCaseSensitive(op, "step"), &x->optim_step))
            return IFMT("%s: optim is not an object with a string name and an integer step", what);
        x->optim_name = strdup(on->valuestring);
        if (x->optim_name == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "checkpoint index: optim");
    }
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(root, "tensors");
    if (!cJSON_IsObject(ts))
        return IFMT("%s: tensors is not an object", what);
    int n = cJSON_GetArraySize(ts);
    x->entries = calloc((size_t)n + 1, sizeof(*x->entries));
    if (x->entries == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "checkpoint index: %d tensors", n);
    const cJSON *it = NULL;
    cJSON_ArrayForEach(it, ts)
    {
        dt_status st = ix_entry(what, it, &x->entries[x->n]);
        x->n++;
        if (st != DT_OK)
            return st;
    }
    qsort(x->entries, (size_t)x->n, sizeof(*x->entries), ix_cmp);
    for (int i = 1; i < x->n; i++)
        if (strcmp(x->entries[i].name, x->entries[i - 1].name) == 0)
            return IFMT("%s: duplicate tensor '%.64s'", what, x->entries[i].name);
    return DT_OK;
}

dt_status dt__ck_index_parse(const char *text, size_t len, const char *what, dt_ck_index **out)
{
    size_t bad = 0;
    if (!dt__st_utf8_valid((const unsigned char *)text, len, &bad))
        return IFMT("%s: not valid UTF-8 (byte %zu)", what, bad);
    if (memchr(text, 0, len) != NULL)
        return IFMT("%s: contains a NUL byte", what);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (root == NULL)
        return IFMT("%s: not valid JSON", what);
    dt_status st = DT_OK;
    for (const char *p = end; p < text + len && st == DT_OK; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            st = IFMT("%s: bytes after the JSON at %zu", what, (size_t)(p - text));
    dt_ck_index *x = calloc(1, sizeof(*x));
    if (st == DT_OK && x == NULL)
        st = DT_ERR(DT_ERR_NO_MEMORY, "checkpoint index");
    if (st == DT_OK)
        st = ix_root(what, root, x);
    cJSON_Delete(root);
    if (st != DT_OK) {
        dt__ck_index_free(x);
        return st;
    }
    *out = x;
    return DT_OK;
}

dt_status dt__ck_index_read(const char *dir, dt_ck_index **out)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, DT_CK_INDEX_NAME);
    FILE *f = NULL;
    struct stat sb;
    DT_CHECK(dt__fopen_regular("dt_checkpoint_load", path, &f, &sb));
    dt_status st = DT_OK;
    char *buf = NULL;
    if (sb.st_size < 0 || (size_t)sb.st_size > DT_CK_INDEX_MAX) {
        st = IFMT("%s: larger than %zu bytes", path, DT_CK_INDEX_MAX);
        goto out;
    }
    buf = malloc((size_t)sb.st_size + 1);
    if (buf == NULL) {
        st = DT_ERR(DT_ERR_NO_MEMORY, "dt_checkpoint_load: %s", path);
        goto out;
    }
    if (fread(buf, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size) {
        st = DT_ERR(DT_ERR_SYSTEM, "dt_checkpoint_load: cannot read %s", path);
        goto out;
    }
    st = dt__ck_index_parse(buf, (size_t)sb.st_size, path, out);
out:
    free(buf);
    fclose(f);
    return st;
}

const dt_ck_entry *dt__ck_index_find(const dt_ck_index *x, const char *name)
{
    int lo = 0, hi = x->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(x->entries[mid].name, name);
        if (c == 0)
            return &x->entries[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}
