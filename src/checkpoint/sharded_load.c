/*
 * Sharded checkpoints, load side: each rank works out the box of every
 * parameter it holds under its own mesh and placements, intersects it with the
 * stored shards listed in index.json, and reads only those intersections
 * from the rank files (any mesh, any plan: resharding happens here). Every
 * read is planned and validated before the first parameter is written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/ck_index.h"
#include "checkpoint/ck_params.h"
#include "checkpoint/st_impl.h"
#include "core/error.h"
#include "core/tensor_impl.h"

typedef struct sl_read {
    int file;                     /* in the open-file cache */
    int tensor;                   /* in that file */
    int64_t src_off[DT_MAX_DIMS]; /* box origin inside the stored shard */
    dt_tensor *dst;               /* view of the parameter's local data */
} sl_read;

typedef struct sl_ctx {
    const char *dir;
    bool with_optim; /* the optimizer's state and step are loaded too */
    dt_ck_index *ix;
    int n_files;
    char **file_names;
    dt_safetensors **files;
    int n_reads, cap_reads;
    sl_read *reads;
} sl_ctx;

static void sl_free(sl_ctx *c)
{
    for (int i = 0; i < c->n_files; i++) {
        dt_safetensors_close(c->files[i]);
        free(c->file_names[i]);
    }
    free(c->files);
    free(c->file_names);
    for (int i = 0; i < c->n_reads; i++)
        dt_tensor_release(c->reads[i].dst);
    free(c->reads);
    dt__ck_index_free(c->ix);
}

/*
 * A rank file must come from the save index.json describes: the same save id
 * and, when the optimizer is loaded, the same optimizer and step (the step
 * index.json records is the one training resumes from, so it must not be
 * trusted alone). Files without dtensor metadata (written by other tools)
 * are not checked for the save id.
 */
static dt_status sl_check_meta(const sl_ctx *c, const dt_safetensors *f)
{
    const char *id = dt_safetensors_metadata_get(f, "dtensor.save_id");
    if (id != NULL && strcmp(id, c->ix->save_id) != 0)
        return DT_ERR(DT_ERR_FORMAT,
                      "dt_checkpoint_load: %s belongs to save %.40s, but %s/index.json is of "
                      "save %.40s",
                      f->path, id, c->dir, c->ix->save_id);
    if (!c->with_optim || c->ix->optim_name == NULL)
        return DT_OK;
    const char *name = dt_safetensors_metadata_get(f, "dtensor.optim");
    const char *step = dt_safetensors_metadata_get(f, "dtensor.optim_step");
    char *end = NULL;
    long long v = step != NULL ? strtoll(step, &end, 10) : -1;
    if (name == NULL || strcmp(name, c->ix->optim_name) != 0)
        return DT_ERR(DT_ERR_FORMAT,
                      "dt_checkpoint_load: %s/index.json records %.32s optimizer state, but %s "
                      "holds %.32s",
                      c->dir, c->ix->optim_name, f->path, name != NULL ? name : "none");
    if (step == NULL || end == step || *end != '\0' || v != c->ix->optim_step)
        return DT_ERR(DT_ERR_FORMAT,
                      "dt_checkpoint_load: %s/index.json records optimizer step %lld, but %s "
                      "holds step %.32s",
                      c->dir, (long long)c->ix->optim_step, f->path,
                      step != NULL ? step : "(none)");
    return DT_OK;
}

/* The open file called @p name (opened and checked on first use). */
static dt_status sl_file(sl_ctx *c, const char *name, int *out)
{
    for (int i = 0; i < c->n_files; i++)
        if (strcmp(c->file_names[i], name) == 0) {
            *out = i;
            return DT_OK;
        }
    char **nn = realloc(c->file_names, sizeof(char *) * (size_t)(c->n_files + 1));
    if (nn != NULL)
        c->file_names = nn;
    dt_safetensors **nf = realloc(c->files, sizeof(*nf) * (size_t)(c->n_files + 1));
    if (nf != NULL)
        c->files = nf;
    if (nn == NULL || nf == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_checkpoint_load: files");
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", c->dir, name);
    dt_safetensors *f = NULL;
    DT_CHECK(dt_safetensors_open(path, &f));
    dt_status st = sl_check_meta(c, f);
    if (st != DT_OK) {
        dt_safetensors_close(f);
        return st;
    }
    c->file_names[c->n_files] = strdup(name);
    c->files[c->n_files] = f;
    *out = c->n_files++;
    if (c->file_names[*out] == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_checkpoint_load: files");
    return DT_OK;
}

/* @p t narrowed to [off, off + shape) on every dim (a view). */
static dt_status sl_view(dt_tensor *t, const int64_t *off, const int64_t *shape, dt_tensor **out)
{
    dt_tensor *cur = dt_tensor_retain(t), *next = NULL;
    for (int d = 0; d < dt_tensor_ndim(t); d++) {
        dt_status st = dt_tensor_narrow(cur, d, off[d], shape[d], &next);
        dt_tensor_release(cur);
        if (st != DT_OK)
            return st;
        cur = next;
    }
    *out = cur;
    return DT_OK;
}

static dt_status sl_add_read(sl_ctx *c, const sl_read *r)
{
    if (c->n_reads == c->cap_reads) {
        int cap = c->cap_reads == 0 ? 64 : 2 * c->cap_reads;
        sl_read *p = realloc(c->reads, sizeof(*p) * (size_t)cap);
        if (p == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "dt_checkpoint_load: %d reads", cap);
        c->reads = p;
        c->cap_reads = cap;
    }
    c->reads[c->n_reads++] = *r;
    return DT_OK;
}

/* The stored shard @p s must be in its file with the index's dtype and shape. */
static dt_status sl_check_stored(sl_ctx *c, const dt_ck_entry *e, const dt_ck_shard *s, int *file,
                                 int *tensor)
{
    DT_CHECK(sl_file(c, s->file, file));
    const dt_safetensors *f = c->files[*file];
    if (dt_safetensors_find(f, s->key, tensor) != DT_OK)
        return DT_ERR(DT_ERR_FORMAT, "dt_checkpoint_load: %s has no tensor '%s' (a shard of '%s')",
                      f->path, s->key, e->name);
    const dt_st_tensor *ft = &f->tensors[*tensor];
    bool same = ft->dt->dtype == e->dtype && ft->ndim == e->ndim;
    for (int d = 0; same && d < e->ndim; d++)
        same = ft->shape[d] == s->shape[d];
    if (!same) {
        char a[128], b[128];
        return DT_ERR(DT_ERR_FORMAT,
                      "dt_checkpoint_load: %s holds '%s' as %s %s, index.json says %s %s", f->path,
                      s->key, ft->dt->name, dt__shape_str(ft->ndim, ft->shape, a, sizeof(a)),
                      dt_dtype_name(e->dtype), dt__shape_str(e->ndim, s->shape, b, sizeof(b)));
    }
    return DT_OK;
}

/* Plan the reads that fill box [off, off + shape) of @p local from @p e's shards. */
static dt_status sl_plan_param(sl_ctx *c, const dt_ck_entry *e, dt_tensor *local,
                               const int64_t *off, const int64_t *shape)
{
    int nd = e->ndim;
    int64_t need = dt__shape_numel(nd, shape), got = 0;
    for (int k = 0; k < e->n_shards && need > 0; k++) {
        const dt_ck_shard *s = &e->shards[k];
        int64_t lo[DT_MAX_DIMS], len[DT_MAX_DIMS], vol = 1;
        for (int d = 0; d < nd; d++) {
            int64_t a = off[d] > s->offset[d] ? off[d] : s->offset[d];
            int64_t b1 = off[d] + shape[d], b2 = s->offset[d] + s->shape[d];
            int64_t b = b1 < b2 ? b1 : b2;
            lo[d] = a;
            len[d] = b > a ? b - a : 0;
            vol *= len[d];
        }
        if (vol == 0)
            continue;
        sl_read r = {0};
        DT_CHECK(sl_check_stored(c, e, s, &r.file, &r.tensor));
        int64_t dst_off[DT_MAX_DIMS];
        for (int d = 0; d < nd; d++) {
            r.src_off[d] = lo[d] - s->offset[d];
            dst_off[d] = lo[d] - off[d];
        }
        DT_CHECK(sl_view(local, dst_off, len, &r.dst));
        dt_status st = sl_add_read(c, &r);
        if (st != DT_OK) {
            dt_tensor_release(r.dst);
            return st;
        }
        got += vol;
    }
    /* shards do not overlap (checked when parsing), so volumes add up */
    if (got != need)
        return DT_ERR(DT_ERR_FORMAT,
                      "dt_checkpoint_load: the shards of '%s' in %s/index.json cover %lld of "
                      "the %lld elements this rank needs",
                      e->name, c->dir, (long long)got, (long long)need);
    return DT_OK;
}

/* Plan the reads of parameter @p t: the whole local tensor, or each box of its shard. */
static dt_status sl_plan_boxes(sl_ctx *c, const dt_ck_entry *e, dt_tensor *t)
{
    if (!dt_tensor_is_distributed(t)) {
        int64_t off[DT_MAX_DIMS] = {0};
        return sl_plan_param(c, e, t, off, dt_tensor_shape(t));
    }
    dt_box boxes[DT_PLACEMENT_MAX_SPLIT];
    int n = 0;
    DT_CHECK(dt__ck_boxes(t, NULL, boxes, &n));
    for (int b = 0; b < n; b++) {
        dt_tensor *v = NULL;
        DT_CHECK(dt__ck_box_view(dt_to_local(t), &boxes[b], &v));
        dt_status st = sl_plan_param(c, e, v, boxes[b].offset, boxes[b].shape);
        dt_tensor_release(v);
        DT_CHECK(st);
    }
    return DT_OK;
}

/* Whether index entry @p e may stay unread: optimizer state when loading without an optimizer. */
static bool sl_may_skip(const sl_ctx *c, const dt_ck_entry *e, bool with_optim)
{
    return !with_optim && c->ix->optim_name != NULL &&
           strncmp(e->name, DT_CK_OPTIM_PREFIX, strlen(DT_CK_OPTIM_PREFIX)) == 0;
}

static dt_status sl_plan(sl_ctx *c, const char *fn, dt_ck_params *l, bool with_optim)
{
    unsigned char *used = calloc((size_t)c->ix->n + 1, 1);
    if (used == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: index", fn);
    dt_status st = DT_OK;
    for (int i = 0; i < l->n && st == DT_OK; i++) {
        const dt_ck_param *p = &l->p[i];
        dt_tensor *t = p->t;
        const dt_ck_entry *e = dt__ck_index_find(c->ix, p->fqn);
        if (e == NULL) {
            st = DT_ERR(DT_ERR_INVALID_ARG, "%s: parameter '%s' is missing from %s/index.json", fn,
                        p->fqn, c->dir);
            break;
        }
        used[e - c->ix->entries] = 1;
        bool same = e->dtype == dt_tensor_dtype(t) && e->ndim == dt_tensor_ndim(t);
        for (int d = 0; same && d < e->ndim; d++)
            same = e->shape[d] == dt_tensor_shape(t)[d];
        if (!same) {
            char a[128], b[128];
            st = DT_ERR(DT_ERR_INVALID_ARG,
                        "%s: parameter '%s' is %s %s in the model, %s %s in the checkpoint", fn,
                        p->fqn, dt_dtype_name(dt_tensor_dtype(t)),
                        dt__shape_str(dt_tensor_ndim(t), dt_tensor_shape(t), a, sizeof(a)),
                        dt_dtype_name(e->dtype), dt__shape_str(e->ndim, e->shape, b, sizeof(b)));
            break;
        }
        st = dt__ck_check_not_partial(fn, p);
        if (st == DT_OK)
            st = sl_plan_boxes(c, e, t);
    }
    for (int i = 0; i < c->ix->n && st == DT_OK; i++)
        if (!used[i] && !sl_may_skip(c, &c->ix->entries[i], with_optim))
            st = DT_ERR(DT_ERR_INVALID_ARG,
                        "%s: the checkpoint holds '%s', which the model does not have", fn,
                        c->ix->entries[i].name);
    free(used);
    return st;
}

/* The checkpoint must hold the state of an optimizer of @p o's kind. */
static dt_status sl_check_optim(const sl_ctx *c, const char *fn, const dt_optim *o)
{
    if (c->ix->optim_name == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: %s/index.json holds no optimizer state (saved with "
                      "optim NULL); load it with optim NULL",
                      fn, c->dir);
    if (strcmp(c->ix->optim_name, dt_optim_name(o)) != 0)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: %s/index.json holds %.32s optimizer state, the "
                      "optimizer is %s",
                      fn, c->dir, c->ix->optim_name, dt_optim_name(o));
    return DT_OK;
}

/* Read index.json and plan every read, checking every file on the way. */
static dt_status sl_prepare(sl_ctx *c, const char *fn, dt_ck_params *l, dt_optim *optim)
{
    DT_CHECK(dt__ck_index_read(c->dir, &c->ix));
    if (optim != NULL) {
        DT_CHECK(sl_check_optim(c, fn, optim));
        DT_CHECK(dt__ck_params_add_optim(fn, l, optim));
    }
    return sl_plan(c, fn, l, optim != NULL);
}

static dt_status sl_read_all(sl_ctx *c, dt_optim *optim)
{
    for (int i = 0; i < c->n_reads; i++) {
        const sl_read *r = &c->reads[i];
        DT_CHECK(dt_safetensors_read_box(c->files[r->file], r->tensor, r->src_off, r->dst));
    }
    return optim != NULL ? dt_optim_set_step_count(optim, c->ix->optim_step) : DT_OK;
}

dt_status dt_checkpoint_load(dt_module *root, dt_optim *optim, const char *dir)
{
    static const char *fn = "dt_checkpoint_load";
    DT_ARG_NOT_NULL(root);
    DT_ARG_NOT_NULL(dir);
    sl_ctx c = {.dir = dir, .with_optim = optim != NULL};
    dt_ck_params l = {0};
    dt_status st = dt__ck_params_collect(fn, root, &l);
    if (st != DT_OK) { /* the same module everywhere: every rank fails here alike */
        dt__ck_params_free(&l);
        return st;
    }
    st = sl_prepare(&c, fn, &l, optim);
    /* Every rank checks its own files, without communicating; then all agree:
     * one that failed (a corrupt shard) stops the others here, before anything
     * is written, instead of leaving them to train alone. */
    st = dt__ck_agree_step(fn, l.mesh, st, "checking the files");
    if (st == DT_OK) /* a read failing after the checks (I/O) fails everyone too */
        st = dt__ck_agree_step(fn, l.mesh, sl_read_all(&c, optim), "reading the shards");
    sl_free(&c);
    dt__ck_params_free(&l);
    return st;
}
