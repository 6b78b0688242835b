/*
 * safetensors writer: the header is computed from names, dtypes and shapes
 * (the reference writer's bytes), then each tensor's data is streamed to a
 * temporary file that is fsync'ed and renamed over the real path at commit.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "checkpoint/atomic_file.h"
#include "checkpoint/st_impl.h"
#include "core/error.h"
#include "core/tensor_impl.h"

typedef struct st_wentry {
    char *name;
    dt_dtype dtype;
    int ndim;
    int64_t shape[DT_MAX_DIMS];
    uint64_t nbytes;
} st_wentry;

struct dt_safetensors_writer {
    dt_atomic_file *file;
    int n;
    st_wentry *entries;
    int *order; /* write order: entry indices */
    int next;   /* position in order */
    bool failed;
};

static void st_writer_free(dt_safetensors_writer *w)
{
    for (int i = 0; w != NULL && i < w->n; i++)
        free(w->entries[i].name);
    if (w != NULL) {
        free(w->entries);
        free(w->order);
        free(w);
    }
}

static dt_status st_check_name(const char *fn, const char *what, int i, const char *name)
{
    if (name == NULL || name[0] == '\0')
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s %d has an empty name", fn, what, i);
    if (!dt__st_utf8_valid((const unsigned char *)name, strlen(name), NULL))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s %d name is not valid UTF-8", fn, what, i);
    return DT_OK;
}

static int st_cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static dt_status st_copy_entries(dt_safetensors_writer *w, int n, const dt_safetensors_entry *e)
{
    static const char *fn = "dt_safetensors_writer_create";
    for (int i = 0; i < n; i++) {
        st_wentry *d = &w->entries[i];
        DT_CHECK(st_check_name(fn, "entry", i, e[i].name));
        if (strcmp(e[i].name, "__metadata__") == 0)
            return DT_ERR(DT_ERR_INVALID_ARG, "%s: entry %d uses the reserved name __metadata__",
                          fn, i);
        DT_CHECK(dt__check_dtype(fn, e[i].dtype));
        if (e[i].ndim < 0 || e[i].ndim > DT_MAX_DIMS || (e[i].ndim > 0 && e[i].shape == NULL))
            return DT_ERR(DT_ERR_INVALID_ARG, "%s: entry '%s' has bad ndim %d", fn, e[i].name,
                          e[i].ndim);
        DT_CHECK(dt__check_shape(fn, e[i].ndim, e[i].shape));
        d->name = strdup(e[i].name);
        if (d->name == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "%s: names", fn);
        d->dtype = e[i].dtype;
        d->ndim = e[i].ndim;
        if (d->ndim > 0)
            memcpy(d->shape, e[i].shape, sizeof(int64_t) * (size_t)d->ndim);
        d->nbytes = (uint64_t)dt__shape_numel(d->ndim, d->shape) * dt_dtype_size(d->dtype);
        w->n = i + 1;
    }
    dt__st_write_order(n, e, w->order);
    const char **names = malloc(sizeof(char *) * ((size_t)n + 1));
    if (names == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: names", fn);
    for (int i = 0; i < n; i++)
        names[i] = e[i].name;
    qsort(names, (size_t)n, sizeof(*names), st_cmp_str);
    for (int i = 1; i < n; i++)
        if (strcmp(names[i], names[i - 1]) == 0) {
            dt_status st = DT_ERR(DT_ERR_INVALID_ARG, "%s: duplicate name '%s'", fn, names[i]);
            free(names);
            return st;
        }
    free(names);
    return DT_OK;
}

static cJSON *st_raw_u64(uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
    return cJSON_CreateRaw(buf);
}

/* The header JSON, compact, in the reference writer's key order. */
static dt_status st_header_json(const dt_safetensors_writer *w, int n_meta, const char *const *meta,
                                char **out)
{
    cJSON *root = cJSON_CreateObject();
    bool ok = root != NULL;
    if (ok && n_meta > 0) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        ok = m != NULL;
        for (int k = 0; ok && k < n_meta; k++)
            ok = cJSON_AddStringToObject(m, meta[2 * k], meta[2 * k + 1]) != NULL;
    }
    uint64_t at = 0;
    for (int k = 0; ok && k < w->n; k++) {
        const st_wentry *e = &w->entries[w->order[k]];
        cJSON *o = cJSON_AddObjectToObject(root, e->name);
        cJSON *sh = cJSON_CreateArray(), *off = cJSON_CreateArray();
        ok = o != NULL && sh != NULL && off != NULL &&
             cJSON_AddStringToObject(o, "dtype", dt__st_dtype_of(e->dtype)->name) != NULL;
        for (int d = 0; ok && d < e->ndim; d++)
            ok = cJSON_AddItemToArray(sh, st_raw_u64((uint64_t)e->shape[d]));
        ok = ok && cJSON_AddItemToArray(off, st_raw_u64(at)) &&
             cJSON_AddItemToArray(off, st_raw_u64(at + e->nbytes));
        if (ok) {
            cJSON_AddItemToObject(o, "shape", sh);
            cJSON_AddItemToObject(o, "data_offsets", off);
        } else {
            cJSON_Delete(sh);
            cJSON_Delete(off);
        }
        at += e->nbytes;
    }
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (text == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_safetensors_writer_create: header JSON");
    *out = text;
    return DT_OK;
}

static dt_status st_write_header(dt_safetensors_writer *w, int n_meta, const char *const *meta)
{
    char *json = NULL;
    DT_CHECK(st_header_json(w, n_meta, meta, &json));
    size_t len = strlen(json), padded = (len + 7) / 8 * 8;
    unsigned char *buf = malloc(8 + padded);
    if (buf == NULL) {
        free(json);
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_safetensors_writer_create: header of %zu bytes", len);
    }
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(buf + 8, json, len);
    memset(buf + 8 + len, ' ', padded - len);
    free(json);
    dt_status st = dt__atomic_file_write(w->file, buf, 8 + padded);
    free(buf);
    return st;
}

dt_status dt_safetensors_writer_create(const char *path, int n, const dt_safetensors_entry *entries,
                                       int n_meta, const char *const *meta,
                                       dt_safetensors_writer **out)
{
    static const char *fn = "dt_safetensors_writer_create";
    DT_ARG_NOT_NULL(path);
    DT_ARG_NOT_NULL(out);
    if (n < 0 || (n > 0 && entries == NULL) || n_meta < 0 || (n_meta > 0 && meta == NULL))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: bad counts n=%d n_meta=%d", fn, n, n_meta);
    for (int k = 0; k < n_meta; k++) {
        DT_CHECK(st_check_name(fn, "metadata key", k, meta[2 * k]));
        if (meta[2 * k + 1] == NULL || !dt__st_utf8_valid((const unsigned char *)meta[2 * k + 1],
                                                          strlen(meta[2 * k + 1]), NULL))
            return DT_ERR(DT_ERR_INVALID_ARG, "%s: metadata value %d is NULL or not UTF-8", fn, k);
        for (int j = 0; j < k; j++)
            if (strcmp(meta[2 * j], meta[2 * k]) == 0)
                return DT_ERR(DT_ERR_INVALID_ARG, "%s: duplicate metadata key '%s'", fn,
                              meta[2 * k]);
    }
    dt_status st = DT_OK;
    dt_safetensors_writer *w = calloc(1, sizeof(*w));
    if (w == NULL || (w->entries = calloc((size_t)n + 1, sizeof(*w->entries))) == NULL ||
        (w->order = calloc((size_t)n + 1, sizeof(int))) == NULL) {
        st_writer_free(w);
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: %d entries", fn, n);
    }
    DT_CHECK_GOTO(st_copy_entries(w, n, entries), st, err_free);
    DT_CHECK_GOTO(dt__atomic_file_create(path, &w->file), st, err_free);
    DT_CHECK_GOTO(st_write_header(w, n_meta, meta), st, err_abort);
    *out = w;
    return DT_OK;

err_abort:
    dt__atomic_file_abort(w->file);
err_free:
    st_writer_free(w);
    return st;
}

int dt_safetensors_writer_next(const dt_safetensors_writer *w)
{
    if (w == NULL || w->next >= w->n)
        return -1;
    return w->order[w->next];
}

dt_status dt_safetensors_writer_write(dt_safetensors_writer *w, const dt_tensor *t)
{
    static const char *fn = "dt_safetensors_writer_write";
    DT_ARG_NOT_NULL(w);
    DT_CHECK(dt__check_local_tensor(fn, "t", t));
    if (w->failed)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: an earlier write failed; abort the writer", fn);
    if (w->next >= w->n)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: all %d entries are already written", fn, w->n);
    const st_wentry *e = &w->entries[w->order[w->next]];
    bool same = t->dtype == e->dtype && t->ndim == e->ndim;
    for (int d = 0; same && d < e->ndim; d++)
        same = t->shape[d] == e->shape[d];
    if (!same) {
        char a[128], b[128];
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: entry '%s' is %s %s, the tensor is %s %s", fn,
                      e->name, dt_dtype_name(e->dtype),
                      dt__shape_str(e->ndim, e->shape, a, sizeof(a)), dt_dtype_name(t->dtype),
                      dt__shape_str(t->ndim, t->shape, b, sizeof(b)));
    }
    dt_status st = DT_OK;
    dt_tensor *host = NULL;
    if (t->device.type == DT_DEVICE_CPU && dt_tensor_is_contiguous(t)) {
        host = dt_tensor_retain((dt_tensor *)t);
    } else {
        st = dt_tensor_empty(t->ndim, t->shape, t->dtype, dt_device_cpu(), &host);
        if (st == DT_OK)
            st = dt_tensor_copy_(host, t);
    }
    if (st == DT_OK && e->nbytes > 0)
        st = dt__atomic_file_write(w->file, dt_tensor_data(host), (size_t)e->nbytes);
    dt_tensor_release(host);
    if (st != DT_OK) {
        w->failed = true;
        return st;
    }
    w->next++;
    return DT_OK;
}

dt_status dt_safetensors_writer_commit(dt_safetensors_writer *w)
{
    DT_ARG_NOT_NULL(w);
    dt_status st = DT_OK;
    if (w->failed || w->next < w->n) {
        st = DT_ERR(DT_ERR_INVALID_ARG, "dt_safetensors_writer_commit: %d of %d entries written%s",
                    w->next, w->n, w->failed ? " (a write failed)" : "");
        dt__atomic_file_abort(w->file);
    } else {
        st = dt__atomic_file_commit(w->file);
    }
    st_writer_free(w);
    return st;
}

void dt_safetensors_writer_abort(dt_safetensors_writer *w)
{
    if (w == NULL)
        return;
    dt__atomic_file_abort(w->file);
    st_writer_free(w);
}

dt_status dt_safetensors_save(const char *path, int n, const char *const *names,
                              dt_tensor *const *tensors, int n_meta, const char *const *meta)
{
    if (n < 0 || (n > 0 && (names == NULL || tensors == NULL)))
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_safetensors_save: bad tensor list (n=%d)", n);
    dt_safetensors_entry *e = calloc((size_t)n + 1, sizeof(*e));
    if (e == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_safetensors_save: %d entries", n);
    dt_status st = DT_OK;
    dt_safetensors_writer *w = NULL;
    for (int i = 0; i < n; i++) {
        DT_CHECK_GOTO(dt__check_local_tensor("dt_safetensors_save", "tensor", tensors[i]), st, out);
        e[i] = (dt_safetensors_entry){names[i], tensors[i]->dtype, tensors[i]->ndim,
                                      tensors[i]->shape};
    }
    DT_CHECK_GOTO(dt_safetensors_writer_create(path, n, e, n_meta, meta, &w), st, out);
    for (int k = dt_safetensors_writer_next(w); k >= 0; k = dt_safetensors_writer_next(w)) {
        st = dt_safetensors_writer_write(w, tensors[k]);
        if (st != DT_OK) {
            dt_safetensors_writer_abort(w);
            goto out;
        }
    }
    st = dt_safetensors_writer_commit(w);
out:
    free(e);
    return st;
}
