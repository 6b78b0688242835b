/* Distributed tensors: wrapping, distribute (local or scattered), from_local,
 * to_local, accessors, redistribute and full_tensor entry points. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "placement/placement_impl.h"

dt_status dt__dist_wrap(dt_spec *spec, dt_tensor *local, dt_tensor **out)
{
    dt_tensor *t = NULL;
    dt_device dev = local != NULL ? dt_tensor_device(local) : dt_device_cpu();
    dt__dist_rules_install(); /* before any op or backward can meet this tensor */
    DT_CHECK(dt__tensor_alloc_handle(spec->ndim, spec->shape, spec->dtype, dev, &t));
    t->dist = dt_spec_retain(spec);
    t->local = dt_tensor_retain(local);
    *out = t;
    return DT_OK;
}

dt_status dt__check_dist(const char *fn, const char *what, const dt_tensor *t)
{
    if (t == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument '%s' is NULL", fn, what);
    const char *dead = dt__handle_problem(t, DT__MAGIC_TENSOR);
    if (dead != NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument '%s' is %s tensor", fn, what, dead);
    if (t->dist == NULL || t->local == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: '%s' is a local tensor, not a distributed one", fn,
                      what);
    return DT_OK;
}

static dt_status check_full(const char *fn, const dt_tensor *full)
{
    if (full == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'full' is NULL", fn);
    if (full->dist != NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: 'full' is already distributed; use dt_redistribute",
                      fn);
    return DT_OK;
}

bool dt__partial_zero(const dt_spec *s)
{
    for (int k = 0; k < s->mesh_ndim; k++)
        if (s->pl[k].kind == DT_PLACEMENT_PARTIAL && s->pl[k].op == DT_REDUCE_OP_SUM &&
            s->mesh->coord[k] != 0)
            return true;
    return false;
}

/* This rank's shard of @p full under @p spec: a new contiguous tensor. */
static dt_status local_of_full(const dt_spec *spec, dt_tensor *full, dt_tensor **out)
{
    int64_t ls[DT_MAX_DIMS], off[DT_MAX_DIMS];
    dt_tensor *cur = dt_tensor_retain(full), *next = NULL;
    dt_status s;
    dt__local_shape(spec->ndim, spec->shape, spec->mesh_ndim, spec->mesh->shape, spec->pl,
                    spec->mesh->coord, ls, off);
    if (dt__partial_zero(spec)) {
        dt_tensor_release(cur);
        return dt_tensor_zeros(spec->ndim, ls, spec->dtype, dt_tensor_device(full), out);
    }
    int k = dt__split_mesh_dim(spec->mesh_ndim, spec->pl), sd = k >= 0 ? spec->pl[k].dim : -1;
    for (int d = 0; d < spec->ndim; d++) {
        if (ls[d] == spec->shape[d] || d == sd)
            continue;
        s = dt_tensor_narrow(cur, d, off[d], ls[d], &next);
        dt_tensor_release(cur);
        DT_CHECK(s);
        cur = next;
    }
    if (k >= 0) { /* its runs, alone on their dim (split_layout.c) */
        s = dt__split_slice(cur, sd, spec->mesh->shape[k], spec->mesh->coord[k],
                            spec->pl[k].split_factor, out);
        dt_tensor_release(cur);
        return s;
    }
    s = dt_tensor_clone(cur, out);
    dt_tensor_release(cur);
    return s;
}

dt_status dt_distribute(dt_tensor *full, dt_mesh *mesh, int n, const dt_placement *pl,
                        dt_tensor **out)
{
    dt_spec *spec = NULL;
    dt_tensor *local = NULL;
    dt_status s;
    DT_ARG_NOT_NULL(out);
    DT_ARG_NOT_NULL(full);
    DT_ARG_NOT_NULL(mesh);
    DT_CHECK(check_full(__func__, full));
    DT_CHECK(dt_spec_create(mesh, n, pl, full->ndim, full->shape, full->dtype, &spec));
    DT_CHECK_GOTO(local_of_full(spec, full, &local), s, out);
    s = dt__dist_wrap(spec, local, out);
out:
    dt_tensor_release(local);
    dt_spec_release(spec);
    return s;
}

/* ------------------------------------------------------------ accessors */

dt_tensor *dt_to_local(dt_tensor *t)
{
    return t != NULL && t->dist != NULL ? t->local : NULL;
}

const dt_spec *dt_tensor_spec(const dt_tensor *t)
{
    return t != NULL ? t->dist : NULL;
}

dt_mesh *dt_tensor_mesh(const dt_tensor *t)
{
    return t != NULL && t->dist != NULL ? t->dist->mesh : NULL;
}

const dt_placement *dt_tensor_placements(const dt_tensor *t)
{
    return t != NULL && t->dist != NULL ? t->dist->pl : NULL;
}

/* ------------------------------------------------------------ redistribute */

dt_status dt_redistribute_to(dt_tensor *t, const dt_spec *dst, dt_tensor **out)
{
    dt_tensor *y = NULL;
    dt_status s;
    DT_ARG_NOT_NULL(out);
    DT_ARG_NOT_NULL(dst);
    DT_CHECK(dt__check_dist("dt_redistribute", "t", t));
    DT_CHECK(dt__redist_local(t->dist, dst, t->local, &y));
    s = dt__dist_wrap((dt_spec *)dst, y, out);
    dt_tensor_release(y);
    return s;
}

dt_status dt_redistribute(dt_tensor *t, int n, const dt_placement *pl, dt_tensor **out)
{
    dt_spec *dst = NULL;
    dt_status s;
    DT_ARG_NOT_NULL(out);
    DT_CHECK(dt__check_dist(__func__, "t", t));
    DT_CHECK(dt__spec_like(t->dist, n, pl, &dst));
    s = dt_redistribute_to(t, dst, out);
    dt_spec_release(dst);
    return s;
}

dt_status dt_full_tensor(dt_tensor *t, dt_tensor **out)
{
    dt_placement r[DT_MESH_MAX_DIMS];
    dt_spec *dst = NULL;
    dt_status s;
    DT_ARG_NOT_NULL(out);
    DT_CHECK(dt__check_dist(__func__, "t", t));
    for (int k = 0; k < t->dist->mesh_ndim; k++)
        r[k] = dt_replicate();
    DT_CHECK(dt__spec_like(t->dist, t->dist->mesh_ndim, r, &dst));
    s = dt__redist_local(t->dist, dst, t->local, out);
    dt_spec_release(dst);
    return s;
}
