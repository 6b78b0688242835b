/*
 * Shape op rules, per mesh dim. Replicate and Partial pass through every
 * shape op (they are linear and keep every element).
 *   reshape/view: a Shard(d) maps to the output dim o that d's elements
 *     become when the shards line up: d is the outermost non-1 dim of its
 *     reshape group, o the outermost non-1 of the output group, and
 *     ceil(n/k) * inner_in == ceil(m/k) * inner_out (so [B,T,D] Shard(2) ->
 *     [B,T,H,hd] Shard(2) when the heads split evenly over the ranks, and
 *     back). Otherwise (or when two mesh dims shard d) it is replicated first.
 *   permute/transpose: Shard(d) -> Shard(position of d).
 *   narrow, split, concat along a sharded dim: that dim is replicated first;
 *     concat brings every input to the first input's placement.
 */
#include <stdlib.h>
#include <string.h>

#include "placement/rules/rules.h"

static int64_t ceil_div(int64_t a, int64_t b)
{
    return b > 0 ? (a + b - 1) / b : 0;
}

/* Output dim a Shard(d) over k ranks maps to, or -1. */
static int reshape_map(int nin, const int64_t *in, int nout, const int64_t *out, int d, int k)
{
    int i = 0, j = 0;
    while (i < nin || j < nout) {
        int gi = i, go = j;
        int64_t pin = i < nin ? in[i++] : 1, pout = j < nout ? out[j++] : 1;
        while (pin != pout) {
            if (pin < pout && i < nin)
                pin *= in[i++];
            else if (pout < pin && j < nout)
                pout *= out[j++];
            else
                return -1;
        }
        if (d >= i)
            continue;
        for (int q = gi; q < d; q++) /* d must be the outermost non-1 dim of its group */
            if (in[q] != 1)
                return -1;
        int o = go;
        while (o < j - 1 && out[o] == 1)
            o++;
        if (o >= nout)
            return -1;
        int64_t ci = ceil_div(in[d], k) * dt__shape_prod(in, d + 1, i);
        int64_t co = ceil_div(out[o], k) * dt__shape_prod(out, o + 1, j);
        return ci == co ? o : -1;
    }
    return -1;
}

/* Resolve one -1 in @p shape against @p numel. */
static dt_status resolve_shape(int ndim, const int64_t *shape, int64_t numel, int64_t *out)
{
    int neg = -1;
    int64_t known = 1;
    for (int i = 0; i < ndim; i++) {
        out[i] = shape[i];
        if (shape[i] == -1 && neg < 0)
            neg = i;
        else if (shape[i] < 0)
            return DT_ERR(DT_ERR_INVALID_ARG, "dt_reshape: bad size %lld at dim %d",
                          (long long)shape[i], i);
        else
            known *= shape[i];
    }
    if (neg >= 0)
        out[neg] = known > 0 ? numel / known : 0;
    if (dt__shape_prod(out, 0, ndim) != numel)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_reshape: shape has %lld elements, x has %lld",
                      (long long)dt__shape_prod(out, 0, ndim), (long long)numel);
    return DT_OK;
}

dt_status dt__rl_reshape(dt_tensor *x, int ndim, const int64_t *shape, dt_tensor **out)
{
    const char *name = "dt_reshape";
    dt_placement w[DT__RL_MAX_MESH], wo[DT__RL_MAX_MESH];
    int64_t oshape[DT_MAX_DIMS], lshape[DT_MAX_DIMS];
    dt_tensor *lx = NULL, *y = NULL;
    dt_spec *ospec = NULL;
    dt_mesh *mesh = NULL;
    dt_status s;
    DT_CHECK(dt__rl_mesh(name, 1, &x, &mesh));
    if (ndim < 0 || ndim > DT_MAX_DIMS)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: ndim %d out of range", name, ndim);
    DT_CHECK(resolve_shape(ndim, shape, dt_tensor_numel(x), oshape));
    dt__rl_placements(x, mesh, w);
    for (int k = 0; k < mesh->ndim; k++) {
        wo[k] = w[k];
        if (w[k].kind != DT_PLACEMENT_SHARD)
            continue;
        int users = 0;
        for (int q = 0; q < mesh->ndim; q++)
            users += dt_placement_is_shard(w[q], w[k].dim);
        int o = users == 1 && dt_tensor_numel(x) > 0
                    ? reshape_map(x->ndim, x->shape, ndim, oshape, w[k].dim, mesh->shape[k])
                    : -1;
        if (o < 0)
            w[k] = wo[k] = dt_replicate();
        else
            wo[k] = dt_shard(o);
    }
    DT_CHECK(dt__rl_prepare(name, x, mesh, w, wo, &lx));
    DT_CHECK_GOTO(dt_spec_create(mesh, mesh->ndim, wo, ndim, oshape, DT_DTYPE_F32, &ospec), s, out);
    DT_CHECK_GOTO(dt_spec_local_shape(ospec, NULL, lshape, NULL), s, out);
    DT_CHECK_GOTO(dt_reshape(lx, ndim, lshape, &y), s, out);
    s = dt__dist_wrap(ospec, y, out);
out:
    dt_spec_release(ospec);
    dt_tensor_release(y);
    dt_tensor_release(lx);
    return s;
}

dt_status dt__rl_permute(dt_tensor *x, const int *perm, dt_tensor **out)
{
    const char *name = "dt_permute";
    dt_placement w[DT__RL_MAX_MESH], wo[DT__RL_MAX_MESH];
    int64_t oshape[DT_MAX_DIMS];
    int p[DT_MAX_DIMS];
    dt_tensor *lx = NULL, *y = NULL;
    dt_mesh *mesh = NULL;
    dt_status s;
    DT_CHECK(dt__rl_mesh(name, 1, &x, &mesh));
    for (int i = 0; i < x->ndim; i++) {
        DT_CHECK(dt__ops_wrap_dim(name, perm[i], x->ndim, &p[i]));
        oshape[i] = x->shape[p[i]];
    }
    dt__rl_placements(x, mesh, w);
    for (int k = 0; k < mesh->ndim; k++) {
        wo[k] = w[k];
        for (int i = 0; i < x->ndim && w[k].kind == DT_PLACEMENT_SHARD; i++)
            if (p[i] == w[k].dim)
                wo[k] = dt_shard(i);
    }
    DT_CHECK(dt__rl_prepare(name, x, mesh, w, wo, &lx));
    s = dt_permute(lx, p, &y);
    if (s == DT_OK)
        s = dt__rl_wrap(name, mesh, wo, x->ndim, oshape, DT_DTYPE_F32, y, out);
    dt_tensor_release(y);
    dt_tensor_release(lx);
    return s;
}

/* Placements of x with any Shard(d) replaced by Replicate. */
static void unshard_dim(dt_mesh *mesh, const dt_tensor *x, int d, dt_placement *w)
{
    dt__rl_placements(x, mesh, w);
    for (int k = 0; k < mesh->ndim; k++)
        if (dt_placement_is_shard(w[k], d))
            w[k] = dt_replicate();
}

dt_status dt__rl_narrow(dt_tensor *x, int dim, int64_t start, int64_t length, dt_tensor **out)
{
    const char *name = "dt_narrow";
    dt_placement w[DT__RL_MAX_MESH];
    int64_t oshape[DT_MAX_DIMS];
    dt_tensor *lx = NULL, *y = NULL;
    dt_mesh *mesh = NULL;
    int d = 0;
    dt_status s;
    DT_CHECK(dt__rl_mesh(name, 1, &x, &mesh));
    DT_CHECK(dt__ops_wrap_dim(name, dim, x->ndim, &d));
    unshard_dim(mesh, x, d, w);
    memcpy(oshape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    oshape[d] = length;
    DT_CHECK(dt__rl_prepare(name, x, mesh, w, w, &lx));
    s = dt_narrow(lx, d, start, length, &y);
    if (s == DT_OK)
        s = dt__rl_wrap(name, mesh, w, x->ndim, oshape, DT_DTYPE_F32, y, out);
    dt_tensor_release(y);
    dt_tensor_release(lx);
    return s;
}

dt_status dt__rl_contiguous(dt_tensor *x, dt_tensor **out)
{
    dt_tensor *y = NULL;
    dt_status s;
    DT_CHECK(dt_contiguous(x->local, &y));
    s = dt__dist_wrap(x->dist, y, out);
    dt_tensor_release(y);
    return s;
}

dt_status dt__rl_concat(int n, dt_tensor *const *xs, int dim, dt_tensor **out)
{
    const char *name = "dt_concat";
    dt_placement w[DT__RL_MAX_MESH];
    int64_t oshape[DT_MAX_DIMS];
    dt_tensor **ls = NULL, *y = NULL;
    dt_mesh *mesh = NULL;
    int d = 0;
    dt_status s = DT_OK;
    DT_CHECK(dt__rl_mesh(name, n, xs, &mesh));
    DT_CHECK(dt__ops_wrap_dim(name, dim, xs[0]->ndim, &d));
    unshard_dim(mesh, xs[0], d, w);
    for (int k = 0; k < mesh->ndim; k++)
        if (w[k].kind == DT_PLACEMENT_PARTIAL && !dt__rl_is_psum(w[k]))
            w[k] = dt_replicate();
    memcpy(oshape, xs[0]->shape, sizeof(int64_t) * (size_t)xs[0]->ndim);
    oshape[d] = 0;
    ls = calloc((size_t)n, sizeof(*ls));
    if (ls == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: %d inputs", name, n);
    for (int i = 0; i < n; i++) {
        oshape[d] += xs[i]->shape[d];
        DT_CHECK_GOTO(dt__rl_prepare(name, xs[i], mesh, w, w, &ls[i]), s, out);
    }
    DT_CHECK_GOTO(dt_concat(n, ls, d, &y), s, out);
    s = dt__rl_wrap(name, mesh, w, xs[0]->ndim, oshape, DT_DTYPE_F32, y, out);
out:
    dt_tensor_release(y);
    dt__kt_release_all(n, ls);
    free(ls);
    return s;
}

dt_status dt__rl_split(dt_tensor *x, int dim, int n, const int64_t *sizes, dt_tensor **outs)
{
    const char *name = "dt_split";
    dt_placement w[DT__RL_MAX_MESH];
    int64_t oshape[DT_MAX_DIMS];
    dt_tensor *lx = NULL, **ls = NULL, **ys = NULL;
    dt_mesh *mesh = NULL;
    int d = 0, made = 0;
    dt_status s = DT_OK;
    DT_CHECK(dt__rl_mesh(name, 1, &x, &mesh));
    DT_CHECK(dt__ops_wrap_dim(name, dim, x->ndim, &d));
    unshard_dim(mesh, x, d, w);
    ls = calloc((size_t)n * 2, sizeof(*ls));
    if (ls == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: %d outputs", name, n);
    ys = ls + n;
    DT_CHECK_GOTO(dt__rl_prepare(name, x, mesh, w, w, &lx), s, out);
    DT_CHECK_GOTO(dt_split(lx, d, n, sizes, ls), s, out);
    memcpy(oshape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    for (; made < n; made++) {
        oshape[d] = sizes[made];
        DT_CHECK_GOTO(
            dt__rl_wrap(name, mesh, w, x->ndim, oshape, DT_DTYPE_F32, ls[made], &ys[made]), s, out);
    }
    for (int i = 0; i < n; i++)
        outs[i] = ys[i];
    made = 0; /* handed over */
out:
    dt__kt_release_all(made, ys);
    dt__kt_release_all(n, ls);
    free(ls);
    dt_tensor_release(lx);
    return s;
}
