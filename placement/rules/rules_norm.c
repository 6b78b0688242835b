/*
 * Softmax, LayerNorm and reduction rules, per mesh dim.
 *   softmax / log_softmax over dim d: Shard(d) and Partial are replicated
 *     first; other Shards pass through. causal_softmax: the two last dims
 *     (queries, keys) must be whole (the mask depends on both positions).
 *   layer_norm over the last dim: Shard(-1) and Partial of x are replicated
 *     first, other Shards pass; weight and bias are replicated (their
 *     gradients are all-reduced over the mesh dims where x is sharded).
 *   sum / mean over d: Shard(d) -> Partial(sum) (mean divides the local sum by
 *     the GLOBAL size, so uneven shards stay exact); Partial(sum) stays
 *     Partial(sum) (linear); other Shards pass, renumbered when d goes.
 *   max over d: Shard(d) and Partial are replicated first (the gradient must
 *     reach only the global arg-max).
 *   sum_all: Shard -> Partial(sum); Partial(sum) stays; others reduced first.
 */
#include "placement/rules/rules.h"

dt_status dt__rl_softmax(dt_dist_softmax_kind kind, dt_tensor *x, int dim, double scale,
                         dt_tensor **out)
{
    static const char *const names[] = {"dt_softmax", "dt_log_softmax", "dt_causal_softmax"};
    const char *name = names[kind];
    dt_placement w[DT__RL_MAX_MESH];
    dt_tensor *lx = NULL, *y = NULL;
    dt_mesh *mesh = NULL;
    dt_status s;
    int d = 0;
    DT_CHECK(dt__rl_mesh(name, 1, &x, &mesh));
    if (kind == DT_DIST_CAUSAL_SOFTMAX && x->ndim < 2)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: x needs >= 2 dims, has %d", name, x->ndim);
    DT_CHECK(dt__ops_wrap_dim(name, kind == DT_DIST_CAUSAL_SOFTMAX ? -1 : dim, x->ndim, &d));
    dt__rl_placements(x, mesh, w);
    for (int k = 0; k < mesh->ndim; k++) {
        bool whole = w[k].kind == DT_PLACEMENT_SHARD &&
                     (w[k].dim == d || (kind == DT_DIST_CAUSAL_SOFTMAX && w[k].dim == d - 1));
        if (whole || w[k].kind == DT_PLACEMENT_PARTIAL)
            w[k] = dt_replicate();
    }
    DT_CHECK(dt__rl_prepare(name, x, mesh, w, w, &lx));
    if (kind == DT_DIST_SOFTMAX)
        s = dt_softmax(lx, d, &y);
    else if (kind == DT_DIST_LOG_SOFTMAX)
        s = dt_log_softmax(lx, d, &y);
    else
        s = dt_causal_softmax(lx, scale, &y);
    if (s == DT_OK)
        s = dt__rl_wrap(name, mesh, w, x->ndim, x->shape, DT_DTYPE_F32, y, out);
    dt_tensor_release(y);
    dt_tensor_release(lx);
    return s;
}

dt_status dt__rl_layer_norm(dt_tensor *x, dt_tensor *w, dt_tensor *b, double eps, dt_tensor **out)
{
    const char *name = "dt_layer_norm";
    dt_tensor *ins[3] = {x, w, b}, *lx = NULL, *lw = NULL, *lb = NULL, *y = NULL;
    dt_placement wx[DT__RL_MAX_MESH], r[DT__RL_MAX_MESH];
    dt_mesh *mesh = NULL;
    dt_status s;
    DT_CHECK(dt__rl_mesh(name, 3, ins, &mesh));
    dt__rl_placements(x, mesh, wx);
    for (int k = 0; k < mesh->ndim; k++) {
        r[k] = dt_replicate();
        if (wx[k].kind == DT_PLACEMENT_PARTIAL ||
            (wx[k].kind == DT_PLACEMENT_SHARD && wx[k].dim == x->ndim - 1))
            wx[k] = dt_replicate();
    }
    DT_CHECK_GOTO(dt__rl_prepare(name, x, mesh, wx, wx, &lx), s, out);
    DT_CHECK_GOTO(dt__rl_prepare(name, w, mesh, r, wx, &lw), s, out);
    DT_CHECK_GOTO(dt__rl_prepare(name, b, mesh, r, wx, &lb), s, out);
    DT_CHECK_GOTO(dt_layer_norm(lx, lw, lb, eps, &y), s, out);
    s = dt__rl_wrap(name, mesh, wx, x->ndim, x->shape, DT_DTYPE_F32, y, out);
out:
    dt_tensor_release(y);
    dt_tensor_release(lx);
    dt_tensor_release(lw);
    dt_tensor_release(lb);
    return s;
}

dt_status dt__rl_reduce(dt_reduce_kind kind, dt_tensor *x, int dim, bool keepdim, dt_tensor **out)
{
    static const char *const names[] = {"dt_sum", "dt_mean", "dt_max"};
    const char *name = names[kind];
    dt_placement w[DT__RL_MAX_MESH], wo[DT__RL_MAX_MESH];
    int64_t oshape[DT_MAX_DIMS];
    dt_tensor *lx = NULL, *y = NULL, *t = NULL;
    dt_mesh *mesh = NULL;
    bool split_dim = false;
    int d = 0, n = 0;
    dt_status s;
    DT_CHECK(dt__rl_mesh(name, 1, &x, &mesh));
    DT_CHECK(dt__ops_wrap_dim(name, dim, x->ndim, &d));
    for (int i = 0; i < x->ndim; i++)
        if (i != d || keepdim)
            oshape[n++] = i == d ? 1 : x->shape[i];
    dt__rl_placements(x, mesh, w);
    for (int k = 0; k < mesh->ndim; k++) {
        dt_placement p = w[k];
        if (kind == DT_REDUCE_KIND_MAX &&
            (p.kind == DT_PLACEMENT_PARTIAL || dt_placement_is_shard(p, d)))
            p = w[k] = dt_replicate();
        if (p.kind == DT_PLACEMENT_PARTIAL && !dt__rl_is_psum(p))
            p = w[k] = dt_replicate();
        if (dt_placement_is_shard(p, d)) {
            wo[k] = dt__rl_psum();
            split_dim = true;
        } else if (p.kind == DT_PLACEMENT_SHARD) {
            wo[k] = dt_shard(keepdim || p.dim < d ? p.dim : p.dim - 1);
        } else {
            wo[k] = p;
        }
    }
    DT_CHECK(dt__rl_prepare(name, x, mesh, w, wo, &lx));
    if (kind == DT_REDUCE_KIND_SUM)
        s = dt_sum(lx, d, keepdim, &y);
    else if (kind == DT_REDUCE_KIND_MAX)
        s = dt_max(lx, d, keepdim, &y);
    else if (!split_dim)
        s = dt_mean(lx, d, keepdim, &y);
    else { /* local sum / global size: the shards' results add up to the mean */
        s = dt_sum(lx, d, keepdim, &t);
        if (s == DT_OK)
            s = dt_scale(t, x->shape[d] > 0 ? 1.0 / (double)x->shape[d] : 0.0, &y);
        dt_tensor_release(t);
    }
    if (s == DT_OK)
        s = dt__rl_wrap(name, mesh, wo, n, oshape, DT_DTYPE_F32, y, out);
    dt_tensor_release(y);
    dt_tensor_release(lx);
    return s;
}

dt_status dt__rl_sum_all(dt_tensor *x, dt_tensor **out)
{
    const char *name = "dt_sum_all";
    dt_placement w[DT__RL_MAX_MESH], wo[DT__RL_MAX_MESH];
    dt_tensor *lx = NULL, *y = NULL;
    dt_mesh *mesh = NULL;
    dt_status s;
    DT_CHECK(dt__rl_mesh(name, 1, &x, &mesh));
    dt__rl_placements(x, mesh, w);
    for (int k = 0; k < mesh->ndim; k++) {
        if (w[k].kind == DT_PLACEMENT_PARTIAL && !dt__rl_is_psum(w[k]))
            w[k] = dt_replicate();
        wo[k] = w[k].kind == DT_PLACEMENT_SHARD ? dt__rl_psum() : w[k];
    }
    DT_CHECK(dt__rl_prepare(name, x, mesh, w, wo, &lx));
    s = dt_sum_all(lx, &y);
    if (s == DT_OK)
        s = dt__rl_wrap(name, mesh, wo, 0, x->shape, DT_DTYPE_F32, y, out);
    dt_tensor_release(y);
    dt_tensor_release(lx);
    return s;
}
