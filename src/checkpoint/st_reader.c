/*
 * safetensors reader: map the file, validate every field of the header before
 * use (the file is hostile until proven otherwise), then serve tensors and
 * boxes of tensors straight from the mapping.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "checkpoint/st_impl.h"
#include "core/error.h"
#include "core/file_open.h"
#include "core/tensor_impl.h"

/* A DT_ERR_FORMAT message; callers pass "%s: ..." with the path first. */
#define FMT(f, ...) DT_ERR(DT_ERR_FORMAT, "safetensors " __VA_ARGS__)

static void st_free_contents(dt_safetensors *f)
{
    for (int i = 0; i < f->n; i++)
        free(f->tensors[i].name);
    free(f->tensors);
    free(f->by_name);
    for (int i = 0; i < 2 * f->n_meta; i++)
        free(f->meta[i]);
    free(f->meta);
}

void dt_safetensors_close(dt_safetensors *f)
{
    if (f == NULL)
        return;
    st_free_contents(f);
    if (f->mapped && (f->len > 0))
        munmap((void *)f->base, f->len);
    free(f->path);
    free(f);
}

static dt_status st_alloc(const char *path, dt_safetensors **out)
{
    dt_safetensors *f = calloc(1, sizeof(*f));
    if (f == NULL || (f->path = strdup(path)) == NULL) {
        free(f);
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_safetensors_open: no memory for %s", path);
    }
    *out = f;
    return DT_OK;
}

dt_status dt_safetensors_open_memory(const void *data, size_t len, dt_safetensors **out)
{
    DT_ARG_NOT_NULL(out);
    if (data == NULL && len > 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_safetensors_open_memory: NULL data of %zu bytes",
                      len);
    dt_safetensors *f = NULL;
    DT_CHECK(st_alloc("<memory>", &f));
    f->base = data;
    f->len = len;
    dt_status st = dt__st_parse(f);
    if (st != DT_OK) {
        dt_safetensors_close(f);
        return st;
    }
    *out = f;
    return DT_OK;
}

dt_status dt_safetensors_open(const char *path, dt_safetensors **out)
{
    DT_ARG_NOT_NULL(path);
    DT_ARG_NOT_NULL(out);
    dt_status st = DT_OK;
    dt_safetensors *f = NULL;
    struct stat sb;
    int fd = -1;
    DT_CHECK(dt__open_regular("dt_safetensors_open", path, &fd, &sb));
    DT_CHECK_GOTO(st_alloc(path, &f), st, err_close);
    f->len = (size_t)sb.st_size;
    f->mapped = true;
    if (f->len > 0) {
        void *p = mmap(NULL, f->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            st = DT_ERR(DT_ERR_SYSTEM, "dt_safetensors_open: cannot map %s (%zu bytes): %s", path,
                        f->len, strerror(errno));
            f->len = 0;
            goto err_free;
        }
        f->base = p;
    }
    close(fd);
    fd = -1;
    DT_CHECK_GOTO(dt__st_parse(f), st, err_free);
    *out = f;
    return DT_OK;

err_free:
    dt_safetensors_close(f);
err_close:
    if (fd >= 0)
        close(fd);
    return st;
}

/* ------------------------------------------------------------ parsing */

bool dt__st_json_uint(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v))
        return false;
    double d = v->valuedouble;
    if (!isfinite(d) || d < 0 || d > DT_ST_MAX_INT || d != floor(d))
        return false;
    *out = (uint64_t)d;
    return true;
}

static int st_cmp_strp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Duplicate keys, found by sorting (a hostile header may hold millions). */
static dt_status st_check_meta_dups(dt_safetensors *f)
{
    char **keys = malloc(sizeof(char *) * ((size_t)f->n_meta + 1));
    if (keys == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "safetensors %s: metadata", f->path);
    for (int k = 0; k < f->n_meta; k++)
        keys[k] = f->meta[2 * k];
    qsort(keys, (size_t)f->n_meta, sizeof(*keys), st_cmp_strp);
    dt_status st = DT_OK;
    for (int k = 1; k < f->n_meta && st == DT_OK; k++)
        if (strcmp(keys[k], keys[k - 1]) == 0)
            st = FMT(f, "%s: duplicate __metadata__ key '%.64s'", f->path, keys[k]);
    free(keys);
    return st;
}

static dt_status st_parse_meta(dt_safetensors *f, const cJSON *meta)
{
    if (!cJSON_IsObject(meta))
        return FMT(f, "%s: __metadata__ is not an object", f->path);
    int n = cJSON_GetArraySize(meta);
    f->meta = calloc((size_t)(2 * n + 1), sizeof(char *));
    if (f->meta == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "safetensors %s: metadata", f->path);
    const cJSON *it = NULL;
    cJSON_ArrayForEach(it, meta)
    {
        if (!cJSON_IsString(it))
            return FMT(f, "%s: __metadata__ value of '%.64s' is not a string", f->path, it->string);
        f->meta[2 * f->n_meta] = strdup(it->string);
        f->meta[2 * f->n_meta + 1] = strdup(it->valuestring);
        f->n_meta++;
        if (f->meta[2 * f->n_meta - 2] == NULL || f->meta[2 * f->n_meta - 1] == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "safetensors %s: metadata", f->path);
    }
    return st_check_meta_dups(f);
}

/* Tensor @p nm's "shape" @p sh into t->ndim/t->shape; @p numel gets its
 * element count, whose bytes (of t->dt) must fit in an int64. */
static dt_status st_parse_shape(const dt_safetensors *f, const char *nm, const cJSON *sh,
                                dt_st_tensor *t, uint64_t *numel)
{
    if (!cJSON_IsArray(sh))
        return FMT(f, "%s: tensor '%.64s': shape missing or not an array", f->path, nm);
    int ndim = cJSON_GetArraySize(sh);
    if (ndim > DT_MAX_DIMS)
        return DT_ERR(DT_ERR_UNSUPPORTED, "safetensors %s: tensor '%.64s' has %d dims (at most %d)",
                      f->path, nm, ndim, DT_MAX_DIMS);
    t->ndim = ndim;
    uint64_t n = 1;
    bool overflow = false, zero = false;
    for (int d = 0; d < ndim; d++) {
        uint64_t v;
        if (!dt__st_json_uint(cJSON_GetArrayItem(sh, d), &v))
            return FMT(f, "%s: tensor '%.64s': shape[%d] is not a non-negative integer", f->path,
                       nm, d);
        t->shape[d] = (int64_t)v;
        zero = zero || v == 0;
        if (!overflow && v != 0 && n > (uint64_t)INT64_MAX / v)
            overflow = true;
        if (!overflow && v != 0)
            n *= v;
    }
    /* a zero dim makes the count zero, but the strides (the product of the
     * non-zero dims) must still fit */
    if (overflow && zero)
        return FMT(f,
                   "%s: tensor '%.64s': shape's strides overflow (its non-zero dims multiply "
                   "past INT64_MAX)",
                   f->path, nm);
    if (overflow)
        return FMT(f, "%s: tensor '%.64s': shape's element count overflows", f->path, nm);
    if (zero)
        n = 0;
    if (n > (uint64_t)INT64_MAX / t->dt->size)
        return FMT(f, "%s: tensor '%.64s': shape's byte count overflows", f->path, nm);
    *numel = n;
    return DT_OK;
}

static dt_status st_parse_tensor(dt_safetensors *f, const cJSON *o, dt_st_tensor *t)
{
    const char *nm = o->string;
    if (!cJSON_IsObject(o))
        return FMT(f, "%s: tensor '%.64s' is not an object", f->path, nm);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(o, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(o, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(o, "data_offsets");
    if (!cJSON_IsString(dt))
        return FMT(f, "%s: tensor '%.64s': dtype missing or not a string", f->path, nm);
    t->dt = dt__st_dtype_by_name(dt->valuestring);
    if (t->dt == NULL)
        return FMT(f, "%s: tensor '%.64s': unknown dtype '%.32s'", f->path, nm, dt->valuestring);
    uint64_t numel = 0;
    DT_CHECK(st_parse_shape(f, nm, sh, t, &numel));
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 ||
        !dt__st_json_uint(cJSON_GetArrayItem(off, 0), &t->begin) ||
        !dt__st_json_uint(cJSON_GetArrayItem(off, 1), &t->end))
        return FMT(f,
                   "%s: tensor '%.64s': data_offsets is not [begin, end] of non-negative integers",
                   f->path, nm);
    if (t->end < t->begin)
        return FMT(f, "%s: tensor '%.64s': data_offsets [%llu, %llu] end before begin", f->path, nm,
                   (unsigned long long)t->begin, (unsigned long long)t->end);
    if (t->end - t->begin != numel * t->dt->size)
        return FMT(f,
                   "%s: tensor '%.64s': data_offsets [%llu, %llu] hold %llu bytes, %s x %llu "
                   "elements need %llu",
                   f->path, nm, (unsigned long long)t->begin, (unsigned long long)t->end,
                   (unsigned long long)(t->end - t->begin), t->dt->name, (unsigned long long)numel,
                   (unsigned long long)(numel * t->dt->size));
    t->name = strdup(nm);
    if (t->name == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "safetensors %s: tensor names", f->path);
    return DT_OK;
}

static int st_cmp_begin(const void *a, const void *b)
{
    const dt_st_tensor *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

static _Thread_local const dt_safetensors *sort_file;

static int st_cmp_name(const void *a, const void *b)
{
    return strcmp(sort_file->tensors[*(const int *)a].name,
                  sort_file->tensors[*(const int *)b].name);
}

/* Offsets sorted by begin must tile [0, data_len) exactly; names unique. */
static dt_status st_check_layout(dt_safetensors *f)
{
    qsort(f->tensors, (size_t)f->n, sizeof(*f->tensors), st_cmp_begin);
    uint64_t at = 0;
    for (int i = 0; i < f->n; i++) {
        const dt_st_tensor *t = &f->tensors[i];
        if (t->begin != at)
            return FMT(f, "%s: tensor '%.64s': data_offsets [%llu, %llu] %s (expected begin %llu)",
                       f->path, t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                       t->begin < at ? "overlap the previous tensor" : "leave a gap",
                       (unsigned long long)at);
        at = t->end;
    }
    if (at != f->data_len)
        return FMT(f, "%s: tensors cover %llu bytes of a %llu-byte data section", f->path,
                   (unsigned long long)at, (unsigned long long)f->data_len);
    f->by_name = malloc(sizeof(int) * (size_t)(f->n + 1));
    if (f->by_name == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "safetensors %s: index", f->path);
    for (int i = 0; i < f->n; i++)
        f->by_name[i] = i;
    sort_file = f;
    qsort(f->by_name, (size_t)f->n, sizeof(int), st_cmp_name);
    sort_file = NULL;
    for (int i = 1; i < f->n; i++)
        if (strcmp(f->tensors[f->by_name[i]].name, f->tensors[f->by_name[i - 1]].name) == 0)
            return FMT(f, "%s: duplicate tensor name '%.64s'", f->path,
                       f->tensors[f->by_name[i]].name);
    return DT_OK;
}

static dt_status st_parse_json(dt_safetensors *f, const char *hdr, size_t n)
{
    dt_status st = DT_OK;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, n, &end, false);
    if (root == NULL) {
        size_t at = (end != NULL && end >= hdr) ? (size_t)(end - hdr) : 0;
        return FMT(f, "%s: header is not valid JSON (near byte %zu)", f->path, at);
    }
    if (!cJSON_IsObject(root)) {
        st = FMT(f, "%s: header is not a JSON object", f->path);
        goto out;
    }
    for (const char *p = end; p < hdr + n; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            st = FMT(f, "%s: bytes after the JSON header at %zu", f->path, (size_t)(p - hdr));
            goto out;
        }
    int total = cJSON_GetArraySize(root);
    f->tensors = calloc((size_t)total + 1, sizeof(*f->tensors));
    if (f->tensors == NULL) {
        st = DT_ERR(DT_ERR_NO_MEMORY, "safetensors %s: %d tensors", f->path, total);
        goto out;
    }
    bool seen_meta = false;
    const cJSON *it = NULL;
    cJSON_ArrayForEach(it, root)
    {
        if (strcmp(it->string, "__metadata__") == 0) {
            if (seen_meta) {
                st = FMT(f, "%s: duplicate __metadata__", f->path);
                goto out;
            }
            seen_meta = true;
            DT_CHECK_GOTO(st_parse_meta(f, it), st, out);
            continue;
        }
        DT_CHECK_GOTO(st_parse_tensor(f, it, &f->tensors[f->n]), st, out);
        f->n++;
    }
    DT_CHECK_GOTO(st_check_layout(f), st, out);
out:
    cJSON_Delete(root);
    return st;
}

dt_status dt__st_parse(dt_safetensors *f)
{
    if (f->len < 8)
        return FMT(f, "%s: %zu bytes, shorter than the 8-byte header length", f->path, f->len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | f->base[i];
    if (n > DT_ST_MAX_HEADER)
        return FMT(f, "%s: header length %llu over the 100000000-byte limit", f->path,
                   (unsigned long long)n);
    if (n > f->len - 8)
        return FMT(f, "%s: header length %llu runs past the end of the %zu-byte file", f->path,
                   (unsigned long long)n, f->len);
    const unsigned char *hdr = f->base + 8;
    size_t bad = 0;
    if (n == 0 || hdr[0] != '{')
        return FMT(f, "%s: header does not start with '{'", f->path);
    if (!dt__st_utf8_valid(hdr, (size_t)n, &bad))
        return FMT(f, "%s: header is not valid UTF-8 (byte %zu)", f->path, bad);
    if (memchr(hdr, 0, (size_t)n) != NULL)
        return FMT(f, "%s: header contains a NUL byte", f->path);
    f->data = hdr + n;
    f->data_len = (uint64_t)(f->len - 8 - n);
    return st_parse_json(f, (const char *)hdr, (size_t)n);
}

/* ------------------------------------------------------------ queries */

int dt_safetensors_count(const dt_safetensors *f)
{
    return f == NULL ? 0 : f->n;
}

dt_status dt_safetensors_info_at(const dt_safetensors *f, int i, dt_safetensors_info *out)
{
    DT_ARG_NOT_NULL(f);
    DT_ARG_NOT_NULL(out);
    if (i < 0 || i >= f->n)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_safetensors_info_at: index %d outside [0, %d)", i,
                      f->n);
    const dt_st_tensor *t = &f->tensors[i];
    dt_safetensors_info info = {.name = t->name,
                                .dtype_name = t->dt->name,
                                .dtype = t->dt->dtype,
                                .ndim = t->ndim,
                                .offset = t->begin,
                                .nbytes = t->end - t->begin};
    memcpy(info.shape, t->shape, sizeof(info.shape));
    *out = info;
    return DT_OK;
}

dt_status dt_safetensors_find(const dt_safetensors *f, const char *name, int *index)
{
    DT_ARG_NOT_NULL(f);
    DT_ARG_NOT_NULL(name);
    DT_ARG_NOT_NULL(index);
    int lo = 0, hi = f->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(f->tensors[f->by_name[mid]].name, name);
        if (c == 0) {
            *index = f->by_name[mid];
            return DT_OK;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return DT_ERR(DT_ERR_NOT_FOUND, "safetensors %s: no tensor '%s'", f->path, name);
}

const void *dt_safetensors_data_at(const dt_safetensors *f, int i)
{
    if (f == NULL || i < 0 || i >= f->n)
        return NULL;
    return f->data + f->tensors[i].begin;
}

int dt_safetensors_metadata_count(const dt_safetensors *f)
{
    return f == NULL ? 0 : f->n_meta;
}

const char *dt_safetensors_metadata_key_at(const dt_safetensors *f, int i)
{
    return (f == NULL || i < 0 || i >= f->n_meta) ? NULL : f->meta[2 * i];
}

const char *dt_safetensors_metadata_value_at(const dt_safetensors *f, int i)
{
    return (f == NULL || i < 0 || i >= f->n_meta) ? NULL : f->meta[2 * i + 1];
}

const char *dt_safetensors_metadata_get(const dt_safetensors *f, const char *key)
{
    for (int i = 0; f != NULL && key != NULL && i < f->n_meta; i++)
        if (strcmp(f->meta[2 * i], key) == 0)
            return f->meta[2 * i + 1];
    return NULL;
}
