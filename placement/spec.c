/* The distributed tensor spec: mesh + placements + global shape + dtype. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "placement/placement_impl.h"

static void spec_release_hook(void *self)
{
    dt_spec_release((dt_spec *)self);
}

dt_status dt_spec_create(dt_mesh *mesh, int n, const dt_placement *pl, int ndim,
                         const int64_t *shape, dt_dtype dtype, dt_spec **out)
{
    DT_ARG_NOT_NULL(mesh);
    DT_ARG_NOT_NULL(out);
    if (n > 0)
        DT_ARG_NOT_NULL(pl);
    char txt[128];
    dt_placement norm[DT_MESH_MAX_DIMS];
    if (n != mesh->ndim) {
        dt_placements_format(n > 0 && n <= 16 ? n : 0, pl, ",", txt, sizeof(txt));
        return DT_ERR(
            DT_ERR_INVALID_ARG,
            "dt_spec_create: %d placements (\"%s\") for a %d-d mesh: give one per mesh dim", n, txt,
            mesh->ndim);
    }
    DT_CHECK(dt__check_shape(__func__, ndim, shape));
    DT_CHECK(dt__check_dtype(__func__, dtype));
    int partial_op = -1;
    for (int k = 0; k < n; k++) {
        if (pl[k].kind == DT_PLACEMENT_SHARD && (pl[k].dim < -ndim || pl[k].dim >= ndim)) {
            dt_placements_format(n, pl, ",", txt, sizeof(txt));
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_spec_create: placement %d S(%d) of \"%s\": shard dim %d is out of "
                          "range for a tensor of %d dims",
                          k, pl[k].dim, txt, pl[k].dim, ndim);
        }
        DT_CHECK(dt_placement_normalize(pl[k], ndim, &norm[k]));
        if (norm[k].kind == DT_PLACEMENT_PARTIAL) {
            if (partial_op >= 0 && partial_op != (int)norm[k].op) {
                dt_placements_format(n, pl, ",", txt, sizeof(txt));
                return DT_ERR(DT_ERR_INVALID_ARG,
                              "dt_spec_create: \"%s\" mixes Partial(%s) and Partial(%s): the "
                              "order of the reductions would be ambiguous",
                              txt, dt_reduce_op_name((dt_reduce_op)partial_op),
                              dt_reduce_op_name(norm[k].op));
            }
            partial_op = (int)norm[k].op;
        }
    }
    DT_CHECK(dt__split_check(mesh, n, norm, ndim, shape));
    dt_spec *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_spec_create: no memory for a spec");
    s->base.release = spec_release_hook;
    atomic_init(&s->refcount, 1);
    s->mesh = dt_mesh_retain(mesh);
    s->mesh_ndim = n;
    memcpy(s->pl, norm, sizeof(norm[0]) * (size_t)n);
    s->ndim = ndim;
    if (ndim > 0)
        memcpy(s->shape, shape, sizeof(int64_t) * (size_t)ndim);
    s->dtype = dtype;
    s->wire = dtype;
    *out = s;
    return DT_OK;
}

dt_spec *dt_spec_retain(dt_spec *s)
{
    if (s != NULL)
        atomic_fetch_add(&s->refcount, 1);
    return s;
}

void dt_spec_release(dt_spec *s)
{
    if (s == NULL || atomic_fetch_sub(&s->refcount, 1) != 1)
        return;
    dt_mesh_release(s->mesh);
    free(s);
}

dt_mesh *dt_spec_mesh(const dt_spec *s)
{
    return s ? s->mesh : NULL;
}
const dt_placement *dt_spec_placements(const dt_spec *s)
{
    return s ? s->pl : NULL;
}
int dt_spec_ndim(const dt_spec *s)
{
    return s ? s->ndim : 0;
}
const int64_t *dt_spec_shape(const dt_spec *s)
{
    return s ? s->shape : NULL;
}
dt_dtype dt_spec_dtype(const dt_spec *s)
{
    return s ? s->dtype : DT_DTYPE_COUNT;
}

dt_status dt_spec_local_shape(const dt_spec *s, const int *coord, int64_t *local_shape,
                              int64_t *global_offset)
{
    DT_ARG_NOT_NULL(s);
    const int *c = coord != NULL ? coord : s->mesh->coord;
    for (int k = 0; k < s->mesh_ndim; k++)
        if (c[k] < 0 || c[k] >= s->mesh->shape[k])
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_spec_local_shape: coordinate %d is outside mesh dim %d of size %d",
                          c[k], k, s->mesh->shape[k]);
    dt__local_shape(s->ndim, s->shape, s->mesh_ndim, s->mesh->shape, s->pl, c, local_shape,
                    global_offset);
    return DT_OK;
}

int dt_spec_num_shards(const dt_spec *s)
{
    int n = 1;
    for (int k = 0; s != NULL && k < s->mesh_ndim; k++)
        if (s->pl[k].kind == DT_PLACEMENT_SHARD)
            n *= s->mesh->shape[k];
    return n;
}

bool dt_spec_equal(const dt_spec *a, const dt_spec *b)
{
    if (a == b)
        return true;
    if (a == NULL || b == NULL || !dt_mesh_equal(a->mesh, b->mesh) || a->ndim != b->ndim ||
        a->dtype != b->dtype || a->mesh_ndim != b->mesh_ndim)
        return false;
    for (int k = 0; k < a->mesh_ndim; k++)
        if (!dt_placement_equal(a->pl[k], b->pl[k]))
            return false;
    return memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

int dt_spec_format(const dt_spec *s, char *buf, size_t len)
{
    char pl[128], sh[128], mesh[64];
    if (s == NULL)
        return snprintf(buf, len, "(null spec)");
    dt_placements_format(s->mesh_ndim, s->pl, ",", pl, sizeof(pl));
    dt__shape_str(s->ndim, s->shape, sh, sizeof(sh));
    dt__mesh_shape_str(s->mesh->ndim, s->mesh->shape, mesh, sizeof(mesh));
    return snprintf(buf, len, "%s %s %s on mesh %s", pl, sh, dt_dtype_name(s->dtype), mesh);
}

dt_status dt__spec_like(const dt_spec *like, int n, const dt_placement *pl, dt_spec **out)
{
    return dt_spec_create(like->mesh, n, pl, like->ndim, like->shape, like->dtype, out);
}

dt_status dt__spec_normalize_grad(const dt_spec *spec, dt_spec **out)
{
    dt_placement pl[DT_MESH_MAX_DIMS];
    for (int k = 0; k < spec->mesh_ndim; k++)
        pl[k] = spec->pl[k].kind == DT_PLACEMENT_PARTIAL ? dt_replicate() : spec->pl[k];
    return dt__spec_like(spec, spec->mesh_ndim, pl, out);
}
