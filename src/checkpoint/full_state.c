/*
 * Full state dicts: dt_save_full gathers one parameter at a time (rank 0 of
 * the parameters' mesh writes it), dt_load_full reads each rank's own shard
 * boxes straight from the mapped file.
 */
#include <stdlib.h>
#include <string.h>

#include "checkpoint/ck_params.h"
#include "checkpoint/st_impl.h"
#include "core/error.h"
#include "core/tensor_impl.h"
#include "dtensor/placement.h"

typedef dt_ck_param fs_param;
typedef dt_ck_params fs_list;

#define FS_WRITING "writing the file (on mesh rank 0)"

/* Gather every parameter in file order; @p w (rank 0 only) writes them. */
static dt_status fs_stream(fs_list *l, dt_safetensors_writer *w, const int *order,
                           dt_status *write_st)
{
    for (int k = 0; k < l->n; k++) {
        dt_tensor *t = l->p[order[k]].t, *full = NULL;
        if (dt_tensor_is_distributed(t)) {
            DT_CHECK(dt_full_tensor(t, &full)); /* collective: a failure here is everyone's */
        } else {
            full = dt_tensor_retain(t);
        }
        if (w != NULL && *write_st == DT_OK)
            *write_st = dt_safetensors_writer_write(w, full);
        dt_tensor_release(full);
    }
    return DT_OK;
}

dt_status dt_save_full(dt_module *root, const char *path)
{
    static const char *fn = "dt_save_full";
    DT_ARG_NOT_NULL(root);
    DT_ARG_NOT_NULL(path);
    fs_list l = {0};
    dt_mesh *mesh = NULL;
    dt_safetensors_entry *e = NULL;
    int *order = NULL;
    dt_safetensors_writer *w = NULL;
    dt_status st = DT_OK, wst = DT_OK;
    DT_CHECK_GOTO(dt__ck_params_collect(fn, root, &l), st, out);
    mesh = l.mesh;
    e = calloc((size_t)l.n, sizeof(*e));
    order = calloc((size_t)l.n, sizeof(int));
    if (e == NULL || order == NULL) {
        st = DT_ERR(DT_ERR_NO_MEMORY, "%s: %d parameters", fn, l.n);
        goto out;
    }
    for (int i = 0; i < l.n; i++)
        e[i] = (dt_safetensors_entry){l.p[i].fqn, dt_tensor_dtype(l.p[i].t),
                                      dt_tensor_ndim(l.p[i].t), dt_tensor_shape(l.p[i].t)};
    dt__st_write_order(l.n, e, order);
    bool writer = mesh == NULL || dt_mesh_rank(mesh) == 0;
    static const char *const meta[2] = {"format", "pt"};
    if (writer)
        wst = dt_safetensors_writer_create(path, l.n, e, 1, meta, &w);
    /* a writer that cannot start stops everyone before any gather */
    DT_CHECK_GOTO(dt__ck_agree_step(fn, mesh, wst, FS_WRITING), st, out);
    DT_CHECK_GOTO(fs_stream(&l, w, order, &wst), st, out);
    if (w != NULL) {
        dt_safetensors_writer *tmp = w;
        w = NULL;
        if (wst == DT_OK)
            wst = dt_safetensors_writer_commit(tmp);
        else
            dt_safetensors_writer_abort(tmp);
    }
    st = dt__ck_agree_step(fn, mesh, wst, FS_WRITING);
out:
    dt_safetensors_writer_abort(w);
    free(order);
    free(e);
    dt__ck_params_free(&l);
    return st;
}

/* ------------------------------------------------------------ load */

typedef struct fs_target {
    int index;        /* in the file */
    dt_tensor *param; /* the parameter (its boxes, when distributed) */
    dt_tensor *local; /* where the box goes */
    int64_t off[DT_MAX_DIMS];
} fs_target;

/* Read @p tg's part of file tensor tg->index: the whole, or each box of its shard. */
static dt_status fs_read(const dt_safetensors *f, const fs_target *tg)
{
    if (!dt_tensor_is_distributed(tg->param))
        return dt_safetensors_read_box(f, tg->index, tg->off, tg->local);
    dt_box boxes[DT_PLACEMENT_MAX_SPLIT];
    int n = 0;
    DT_CHECK(dt__ck_boxes(tg->param, NULL, boxes, &n));
    for (int b = 0; b < n; b++) {
        dt_tensor *v = NULL;
        DT_CHECK(dt__ck_box_view(tg->local, &boxes[b], &v));
        dt_status st = dt_safetensors_read_box(f, tg->index, boxes[b].offset, v);
        dt_tensor_release(v);
        DT_CHECK(st);
    }
    return DT_OK;
}

static dt_status fs_plan_one(const char *fn, const dt_safetensors *f, const fs_param *p,
                             fs_target *tg, unsigned char *used)
{
    dt_tensor *t = p->t;
    if (dt_safetensors_find(f, p->fqn, &tg->index) != DT_OK)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: parameter '%s' is missing from %s", fn, p->fqn,
                      f->path);
    used[tg->index] = 1;
    const dt_st_tensor *ft = &f->tensors[tg->index];
    bool same = ft->dt->dtype == t->dtype && ft->ndim == t->ndim;
    for (int d = 0; same && d < t->ndim; d++)
        same = ft->shape[d] == t->shape[d];
    if (!same) {
        char a[128], b[128];
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: parameter '%s' is %s %s in the model, %s %s in %s",
                      fn, p->fqn, dt_dtype_name(t->dtype),
                      dt__shape_str(t->ndim, t->shape, a, sizeof(a)), ft->dt->name,
                      dt__shape_str(ft->ndim, ft->shape, b, sizeof(b)), f->path);
    }
    memset(tg->off, 0, sizeof(tg->off));
    tg->local = t;
    tg->param = t;
    if (dt_tensor_is_distributed(t)) {
        const dt_spec *s = dt_tensor_spec(t);
        DT_CHECK(dt__ck_check_not_partial(fn, p));
        DT_CHECK(dt_spec_local_shape(s, NULL, NULL, tg->off));
        tg->local = dt_to_local(t);
    }
    return DT_OK;
}

dt_status dt_load_full(dt_module *root, const char *path)
{
    static const char *fn = "dt_load_full";
    DT_ARG_NOT_NULL(root);
    DT_ARG_NOT_NULL(path);
    fs_list l = {0};
    dt_safetensors *f = NULL;
    fs_target *tg = NULL;
    unsigned char *used = NULL;
    dt_status st = dt__ck_params_collect(fn, root, &l);
    if (st != DT_OK) { /* the same module everywhere: every rank fails here alike */
        dt__ck_params_free(&l);
        return st;
    }
    DT_CHECK_GOTO(dt_safetensors_open(path, &f), st, out);
    tg = calloc((size_t)l.n, sizeof(*tg));
    used = calloc((size_t)f->n + 1, 1);
    if (tg == NULL || used == NULL) {
        st = DT_ERR(DT_ERR_NO_MEMORY, "%s: %d parameters", fn, l.n);
        goto out;
    }
    /* validate everything first: on error nothing has been written */
    for (int i = 0; i < l.n; i++)
        DT_CHECK_GOTO(fs_plan_one(fn, f, &l.p[i], &tg[i], used), st, out);
    for (int i = 0; i < f->n; i++)
        if (!used[i]) {
            st = DT_ERR(DT_ERR_INVALID_ARG, "%s: %s holds '%s', which the model does not have", fn,
                        path, f->tensors[i].name);
            goto out;
        }
    for (int i = 0; i < l.n; i++)
        DT_CHECK_GOTO(fs_read(f, &tg[i]), st, out);
out:
    /* a rank that could not read the file stops the others (all or none) */
    st = dt__ck_agree_step(fn, l.mesh, st, "loading");
    free(used);
    free(tg);
    dt_safetensors_close(f);
    dt__ck_params_free(&l);
    return st;
}
