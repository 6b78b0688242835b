/* The steps shared by every sharding rule: the op's mesh, preparing inputs
 * (redistribute + gradient all-reduce), wrapping results, the fallback. */
#include <string.h>

#include "core/log.h"
#include "placement/rules/rules.h"

dt_status dt__rl_mesh(const char *op, int n, dt_tensor *const *xs, dt_mesh **out)
{
    dt_mesh *m = NULL;
    for (int i = 0; i < n; i++) {
        if (xs[i] == NULL || xs[i]->dist == NULL)
            continue;
        if (m == NULL)
            m = xs[i]->dist->mesh;
        else if (m != xs[i]->dist->mesh && !dt_mesh_equal(m, xs[i]->dist->mesh))
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "%s: input %d lives on a different mesh than the other inputs", op, i);
    }
    if (m == NULL)
        return DT_ERR(DT_ERR_INTERNAL, "%s: sharding rule called without distributed inputs", op);
    *out = m;
    return DT_OK;
}

void dt__rl_placements(const dt_tensor *x, const dt_mesh *mesh, dt_placement *pl)
{
    /* rules see a strided shard as the plain Shard of its dim; dt__rl_prepare
     * then moves the input to that layout (compared with the real one) */
    for (int k = 0; k < mesh->ndim; k++) {
        pl[k] = x->dist != NULL ? x->dist->pl[k] : dt_replicate();
        pl[k].strided = 0;
        pl[k].split_factor = 0;
    }
}

const char *dt__rl_fmt(int n, const dt_placement *pl, char *buf, size_t len)
{
    dt_placements_format(n, pl, ",", buf, len);
    return buf;
}

/* ------------------------------------------------------------ gradient all-reduce node */

/* saved[0]: a data-less handle whose spec is the gradient's pending layout:
 * the input's own layout (Partial read as Replicate) with Partial(sum) on the
 * mesh dims where this rank holds only its part. The engine sums such
 * gradients without communicating and reduces once (rules_grad.c). */
static dt_status grad_reduce_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    if (!dt__ag_input_needs_grad(node, 0))
        return DT_OK;
    return dt__dist_wrap(node->saved[0]->dist, gy[0], &gx[0]);
}

/* The pending layout of a gradient: @p spec's own (Partial read as Replicate)
 * with Partial(sum) on the mesh dims of @p mask (new reference). */
static dt_status pending_spec(const dt_spec *spec, const bool *mask, dt_spec **out)
{
    dt_placement pl[DT__RL_MAX_MESH];
    for (int k = 0; k < spec->mesh_ndim; k++) {
        pl[k] = spec->pl[k].kind == DT_PLACEMENT_PARTIAL ? dt_replicate() : spec->pl[k];
        if (mask[k])
            pl[k] = dt__rl_psum();
    }
    return dt__spec_like(spec, spec->mesh_ndim, pl, out);
}

/* Record @p node on @p x -> *y with saved handles over @p s0 (and @p s1). */
static dt_status record(const char *name, dt_ag_backward_fn fn, dt_tensor *x, dt_spec *s0,
                        dt_spec *s1, bool accepts, dt_tensor **y)
{
    dt_ag_node *node = NULL;
    dt_tensor *h[2] = {0};
    dt_status s;
    if (*y == x) { /* the output needs its own handle */
        dt_tensor *a = NULL;
        DT_CHECK(dt__kt_alias(x, &a));
        dt_tensor_release(*y);
        *y = a;
    }
    DT_CHECK(dt__dist_wrap(s0, NULL, &h[0])); /* data-less: keep the specs and mesh alive */
    if (s1 != NULL)
        DT_CHECK_GOTO(dt__dist_wrap(s1, NULL, &h[1]), s, err_release);
    DT_CHECK_GOTO(dt__ag_node_create(name, fn, 1, &x, &node), s, err_release);
    node->saved[0] = h[0];
    node->saved[1] = h[1];
    node->n_saved = s1 != NULL ? 2 : 1;
    node->accepts_dist_grad = accepts;
    return dt__ag_attach(node, 1, y);
err_release:
    dt_tensor_release(h[0]);
    dt_tensor_release(h[1]);
    return s;
}

/* y = x forward; backward hands on the gradient as pending Partial(sum)
 * (saved[0]'s spec) over the masked mesh dims. */
static dt_status grad_reduce(dt_spec *spec, const bool *mask, dt_tensor *x, dt_tensor **y)
{
    dt_spec *pending = NULL;
    dt_status s;
    DT_CHECK(pending_spec(spec, mask, &pending));
    *y = dt_tensor_retain(x);
    s = record("dist_grad_partial", grad_reduce_backward, x, pending, NULL, false, y);
    if (s != DT_OK) {
        dt_tensor_release(*y);
        *y = NULL;
    }
    dt_spec_release(pending);
    return s;
}

/* Backward of a redistribute whose output's gradient is partial on some mesh
 * dims: from the pending layout (saved[0]) straight to the input's gradient
 * layout (saved[1]) in one plan, so Partial -> Shard is one reduce-scatter. */
static dt_status redist_partial_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    const dt_spec *pending = node->saved[0]->dist, *gdst = node->saved[1]->dist;
    dt__plan plan;
    if (!dt__ag_input_needs_grad(node, 0))
        return DT_OK;
    if (gy[0]->dist != NULL) /* summed with other contributions upstream: its own layout */
        return dt__rl_grad_redistribute(gy[0], gdst, &gx[0]);
    DT_CHECK(dt__redist_plan(pending, gdst, &plan));
    return dt__redist_exec(&plan, pending, gy[0], &gx[0]);
}

/* Redistribute shard @p x of @p src to @p dst, recording one node whose
 * backward takes the gradient from its pending layout to src's. */
static dt_status redist_partial(const dt_spec *src, dt_spec *dst, const bool *mask, dt_tensor *x,
                                dt_tensor **y)
{
    dt_spec *pending = NULL, *gdst = NULL;
    dt__plan plan;
    dt_status s;
    DT_CHECK(dt__redist_check("dt_redistribute", src, dst));
    DT_CHECK(dt__redist_plan(src, dst, &plan));
    DT_CHECK(dt__redist_exec(&plan, src, x, y));
    DT_CHECK_GOTO(pending_spec(dst, mask, &pending), s, err_release);
    DT_CHECK_GOTO(dt__spec_normalize_grad(src, &gdst), s, err_release);
    DT_CHECK_GOTO(record("redistribute", redist_partial_backward, x, pending, gdst, true, y), s,
                  err_release);
    dt_spec_release(pending);
    dt_spec_release(gdst);
    return DT_OK;
err_release:
    dt_spec_release(pending);
    dt_spec_release(gdst);
    dt_tensor_release(*y);
    *y = NULL;
    return s;
}

/* ------------------------------------------------------------ prepare / wrap */

dt_status dt__rl_prepare(const char *op, dt_tensor *x, dt_mesh *mesh, const dt_placement *want,
                         const dt_placement *out_pl, dt_tensor **local)
{
    dt_placement cur[DT__RL_MAX_MESH];
    dt_spec *src = NULL, *dst = NULL;
    dt_tensor *y = NULL, *z = NULL, *xl = NULL;
    bool mask[DT__RL_MAX_MESH], any = false;
    dt_status s;
    (void)op;
    if (x == NULL) {
        *local = NULL;
        return DT_OK;
    }
    xl = x->dist != NULL ? x->local : x;
    dt__rl_placements(x, mesh, cur);
    bool same = true; /* the common case: nothing to move, no spec to build */
    for (int k = 0; k < mesh->ndim; k++) {
        same = same && dt_placement_equal(x->dist != NULL ? x->dist->pl[k] : cur[k], want[k]);
        mask[k] =
            dt__rl_is_r(want[k]) && out_pl != NULL && !dt__rl_is_r(out_pl[k]) && mesh->shape[k] > 1;
        any = any || mask[k];
    }
    if (x->dist != NULL)
        src = dt_spec_retain(x->dist);
    else
        DT_CHECK(dt_spec_create(mesh, mesh->ndim, cur, x->ndim, x->shape, x->dtype, &src));
    if (same) {
        dst = dt_spec_retain(src);
        y = dt_tensor_retain(xl);
        if (any && dt__ag_should_record(1, &y)) { /* summed over consumers, reduced once */
            DT_CHECK_GOTO(grad_reduce(dst, mask, y, &z), s, out);
            dt_tensor_release(y);
            y = z;
        }
    } else {
        DT_CHECK_GOTO(dt__spec_like(src, mesh->ndim, want, &dst), s, out);
        if (any && dt__ag_should_record(1, &xl)) /* one node: moved here, gradient back once */
            DT_CHECK_GOTO(redist_partial(src, dst, mask, xl, &y), s, out);
        else
            DT_CHECK_GOTO(dt__redist_local(src, dst, xl, &y), s, out);
    }
    *local = y;
    y = NULL;
    s = DT_OK;
out:
    dt_tensor_release(y);
    dt_spec_release(src);
    dt_spec_release(dst);
    return s;
}

static dt_status wrap(const char *op, dt_mesh *mesh, const dt_placement *pl, int ndim,
                      const int64_t *shape, dt_dtype dtype, dt_dtype wire, dt_tensor *local,
                      dt_tensor **out)
{
    dt_spec *spec = NULL;
    int64_t want[DT_MAX_DIMS];
    dt_status s;
    DT_CHECK(dt_spec_create(mesh, mesh->ndim, pl, ndim, shape, dtype, &spec));
    spec->wire = wire; /* not shared yet */
    DT_CHECK_GOTO(dt_spec_local_shape(spec, NULL, want, NULL), s, out);
    if (local->ndim != ndim || memcmp(local->shape, want, sizeof(int64_t) * (size_t)ndim) != 0) {
        char a[96], b[96], p[64];
        s = DT_ERR(DT_ERR_INTERNAL, "%s: rule gave a local result %s, spec %s wants %s", op,
                   dt__shape_str(local->ndim, local->shape, a, sizeof(a)),
                   dt__rl_fmt(mesh->ndim, pl, p, sizeof(p)),
                   dt__shape_str(ndim, want, b, sizeof(b)));
        goto out;
    }
    s = dt__dist_wrap(spec, local, out);
out:
    dt_spec_release(spec);
    return s;
}

dt_status dt__rl_wrap(const char *op, dt_mesh *mesh, const dt_placement *pl, int ndim,
                      const int64_t *shape, dt_dtype dtype, dt_tensor *local, dt_tensor **out)
{
    return wrap(op, mesh, pl, ndim, shape, dtype, dtype, local, out);
}

dt_status dt__rl_wrap_product(const char *op, dt_mesh *mesh, const dt_placement *pl, int ndim,
                              const int64_t *shape, dt_tensor *local, dt_tensor **out)
{
    dt_dtype wire = dt_autocast_get() == DT_DTYPE_BF16 ? DT_DTYPE_BF16 : DT_DTYPE_F32;
    return wrap(op, mesh, pl, ndim, shape, DT_DTYPE_F32, wire, local, out);
}

/* ------------------------------------------------------------ fallback */

#define DT__RL_FALLBACK_MAX 8

dt_status dt__rl_fallback(const char *op, int n, dt_tensor *const *xs, dt__rl_local_fn run,
                          void *ctx, dt_tensor **out)
{
    dt_placement r[DT__RL_MAX_MESH];
    dt_tensor *locals[DT__RL_FALLBACK_MAX] = {0}, *y = NULL;
    dt_mesh *mesh = NULL;
    dt_status s = DT_OK;
    if (n > DT__RL_FALLBACK_MAX)
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: fallback takes at most %d inputs", op,
                      DT__RL_FALLBACK_MAX);
    DT_CHECK(dt__rl_mesh(op, n, xs, &mesh));
    for (int k = 0; k < mesh->ndim; k++)
        r[k] = dt_replicate();
    for (int i = 0; i < n; i++) { /* say so when it costs a collective */
        dt_placement pl[DT__RL_MAX_MESH];
        bool all_r = true;
        if (xs[i] == NULL)
            continue;
        dt__rl_placements(xs[i], mesh, pl);
        for (int k = 0; k < mesh->ndim; k++)
            all_r = all_r && dt__rl_is_r(pl[k]);
        if (!all_r) {
            char buf[64];
            DT_LOG_WARN("redist", "%s: no sharding rule; replicating input %d (%s)", op, i,
                        dt__rl_fmt(mesh->ndim, pl, buf, sizeof(buf)));
            break;
        }
    }
    for (int i = 0; i < n; i++)
        DT_CHECK_GOTO(dt__rl_prepare(op, xs[i], mesh, r, r, &locals[i]), s, out);
    DT_CHECK_GOTO(run(ctx, locals, &y), s, out);
    s = dt__rl_wrap(op, mesh, r, y->ndim, y->shape, y->dtype, y, out);
    dt_tensor_release(y);
out:
    dt__kt_release_all(n, locals);
    return s;
}
