/*
 * Split-factor strided shards (dt_strided_shard_split, PyTorch's
 * _StridedShard(dim, split_factor)): tensor dim d of size L over n ranks is
 * cut into sf*n equal runs of r = L/(sf*n); coordinate c holds runs c, c+n,
 * ..., c+(sf-1)n. Viewed as [outer, sf, n, r, inner], a shard is the slice
 * [:, :, c] and an all-gather in rank order is the permutation (n, sf) ->
 * (sf, n). Kept simple by the spec's rules: even, alone on its dim, one per
 * spec.
 */
#include "core/error.h"
#include "placement/placement_impl.h"

int dt__split_mesh_dim(int n, const dt_placement *pl)
{
    for (int k = 0; k < n; k++)
        if (pl[k].kind == DT_PLACEMENT_SHARD && pl[k].split_factor > 1)
            return k;
    return -1;
}

dt_status dt__split_check(const dt_mesh *mesh, int n, const dt_placement *pl, int ndim,
                          const int64_t *shape)
{
    int k = dt__split_mesh_dim(n, pl);
    if (k < 0)
        return DT_OK;
    char txt[160];
    dt_placements_format(n, pl, ",", txt, sizeof(txt));
    int d = pl[k].dim, sf = pl[k].split_factor, size = mesh->shape[k];
    for (int j = 0; j < n; j++) {
        if (j == k || pl[j].kind != DT_PLACEMENT_SHARD)
            continue;
        if (pl[j].split_factor > 1)
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_spec_create: \"%s\" has two split-factor shards (mesh dims %d and "
                          "%d): at most one is supported",
                          txt, k, j);
        if (pl[j].dim == d)
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_spec_create: \"%s\": mesh dim %d also shards tensor dim %d, which "
                          "the split-factor shard of mesh dim %d splits (it must be alone)",
                          txt, j, d, k);
    }
    int64_t pieces = (int64_t)size * sf;
    if (d < 0 || d >= ndim || shape[d] % pieces != 0)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_spec_create: \"%s\": tensor dim %d of size %lld does not split into "
                      "sf*n = %d*%d = %lld equal pieces (split-factor shards are even, as "
                      "PyTorch's _StridedShard)",
                      txt, d, d >= 0 && d < ndim ? (long long)shape[d] : -1LL, sf, size,
                      (long long)pieces);
    return DT_OK;
}

/* @p x (contiguous) viewed as [outer, a, b, r, inner] around dim d, where
 * a*b*r is its size along d. */
static dt_status view5(dt_tensor *x, int d, int64_t a, int64_t b, dt_tensor **out)
{
    const int64_t *s = dt_tensor_shape(x);
    int nd = dt_tensor_ndim(x);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < d; i++)
        outer *= s[i];
    for (int i = d + 1; i < nd; i++)
        inner *= s[i];
    int64_t shape[5] = {outer, a, b, a * b > 0 ? s[d] / (a * b) : 0, inner};
    return dt_tensor_view(x, 5, shape, out);
}

/* Copy the 5-d view @p v into a new contiguous tensor of @p ndim dims
 * @p shape: always a copy (as exec_slice's), never an alias of the input. */
static dt_status materialize(dt_tensor *v, int ndim, const int64_t *shape, dt_tensor **out)
{
    dt_tensor *c = NULL;
    DT_CHECK(dt_tensor_clone(v, &c));
    dt_status s = dt_tensor_view(c, ndim, shape, out);
    dt_tensor_release(c);
    return s;
}

dt_status dt__split_gathered(dt_tensor *y, int d, int n, int sf, dt_tensor **out)
{
    static const int perm[5] = {0, 2, 1, 3, 4};
    dt_tensor *yc = NULL, *v = NULL, *p = NULL;
    dt_status s;
    DT_CHECK(dt_tensor_contiguous(y, &yc));
    DT_CHECK_GOTO(view5(yc, d, n, sf, &v), s, out_release);
    DT_CHECK_GOTO(dt_tensor_permute(v, perm, &p), s, out_release);
    s = materialize(p, dt_tensor_ndim(y), dt_tensor_shape(y), out);
out_release:
    dt_tensor_release(p);
    dt_tensor_release(v);
    dt_tensor_release(yc);
    return s;
}

dt_status dt__split_slice(dt_tensor *x, int d, int n, int me, int sf, dt_tensor **out)
{
    dt_tensor *xc = NULL, *v = NULL, *p = NULL;
    int64_t shape[DT_MAX_DIMS];
    int nd = dt_tensor_ndim(x);
    dt_status s;
    for (int i = 0; i < nd; i++)
        shape[i] = dt_tensor_dim(x, i);
    shape[d] /= n;
    DT_CHECK(dt_tensor_contiguous(x, &xc));
    DT_CHECK_GOTO(view5(xc, d, sf, n, &v), s, out_release);
    DT_CHECK_GOTO(dt_tensor_narrow(v, 2, me, 1, &p), s, out_release);
    s = materialize(p, nd, shape, out);
out_release:
    dt_tensor_release(p);
    dt_tensor_release(v);
    dt_tensor_release(xc);
    return s;
}

dt_status dt_spec_local_boxes(const dt_spec *s, const int *coord, dt_box *boxes, int max, int *n)
{
    DT_ARG_NOT_NULL(s);
    DT_ARG_NOT_NULL(boxes);
    DT_ARG_NOT_NULL(n);
    int64_t ls[DT_MAX_DIMS], off[DT_MAX_DIMS];
    DT_CHECK(dt_spec_local_shape(s, coord, ls, off));
    const int *c = coord != NULL ? coord : s->mesh->coord;
    int k = dt__split_mesh_dim(s->mesh_ndim, s->pl);
    int count = k < 0 ? 1 : s->pl[k].split_factor;
    if (max < count)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_spec_local_boxes: the shard has %d boxes, room for %d", count, max);
    for (int b = 0; b < count; b++) {
        dt_box *x = &boxes[b];
        for (int i = 0; i < s->ndim; i++) {
            x->offset[i] = off[i];
            x->local_offset[i] = 0;
            x->shape[i] = ls[i];
        }
        if (k < 0)
            continue;
        /* the dim's other mesh dims do not shard it: runs of the whole size */
        int d = s->pl[k].dim;
        int64_t L = s->shape[d], r = L / ((int64_t)s->mesh->shape[k] * count);
        x->offset[d] = b * (L / count) + c[k] * r;
        x->local_offset[d] = b * r;
        x->shape[d] = r;
    }
    *n = count;
    return DT_OK;
}
