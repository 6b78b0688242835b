/*
 * Gradients in flight that are distributed (autograd/dist_hooks.h): a shard whose
 * spec says how it must still be combined, Partial(sum) on the mesh dims where
 * each rank holds only its part (made by the rules' gradient node for a
 * Replicate input of a sharded or Partial output). Adding keeps them pending;
 * one collective brings the sum to the tensor's own layout when it is needed.
 */
#include "placement/rules/rules.h"

/* This rank's share of a gradient laid out @p local_layout (Replicate on the
 * Partial dims of @p pending): kept on coordinate 0 of those dims, 0 elsewhere,
 * so that adding it to the pending shard and summing gives it exactly once. */
static dt_status share_of(const dt_spec *pending, dt_tensor *g, dt_tensor **out)
{
    bool mine = true;
    for (int k = 0; k < pending->mesh_ndim; k++)
        if (pending->pl[k].kind == DT_PLACEMENT_PARTIAL && pending->mesh->coord[k] != 0)
            mine = false;
    if (mine) {
        *out = dt_tensor_retain(g);
        return DT_OK;
    }
    return dt__kt_unary_raw(DT_UNARY_SCALE, g, 0.0f, out);
}

static dt_status grad_materialize(dt_tensor *g, dt_tensor **out)
{
    dt_spec *dst = NULL;
    dt__plan plan;
    dt_status s;
    DT_CHECK(dt__check_dist("dt_backward", "gradient", g));
    DT_CHECK(dt__spec_normalize_grad(g->dist, &dst));
    DT_CHECK_GOTO(dt__redist_plan(g->dist, dst, &plan), s, out);
    s = dt__redist_exec(&plan, g->dist, g->local, out);
out:
    dt_spec_release(dst);
    return s;
}

static dt_status grad_add(dt_tensor *a, dt_tensor *b, dt_tensor **out)
{
    dt_tensor *la = NULL, *lb = NULL, *sum = NULL;
    const dt_spec *spec = NULL;
    dt_status s;
    if (a->dist != NULL && b->dist != NULL && !dt_spec_equal(a->dist, b->dist)) {
        /* two layouts (rare): reduce both, add locally */
        DT_CHECK(grad_materialize(a, &la));
        DT_CHECK_GOTO(grad_materialize(b, &lb), s, out);
        s = dt__kt_binary_raw(DT_BINARY_ADD, la, lb, out);
        goto out;
    }
    spec = a->dist != NULL ? a->dist : b->dist;
    if (a->dist != NULL)
        la = dt_tensor_retain(a->local);
    else
        DT_CHECK(share_of(spec, a, &la));
    if (b->dist != NULL)
        lb = dt_tensor_retain(b->local);
    else
        DT_CHECK_GOTO(share_of(spec, b, &lb), s, out);
    DT_CHECK_GOTO(dt__kt_binary_raw(DT_BINARY_ADD, la, lb, &sum), s, out);
    s = dt__dist_wrap((dt_spec *)spec, sum, out);
out:
    dt_tensor_release(sum);
    dt_tensor_release(la);
    dt_tensor_release(lb);
    return s;
}

dt_status dt__rl_grad_redistribute(dt_tensor *g, const dt_spec *dst, dt_tensor **out)
{
    dt__plan plan;
    DT_CHECK(dt__check_dist("dt_backward", "gradient", g));
    DT_CHECK(dt__redist_check("dt_backward", g->dist, dst));
    DT_CHECK(dt__redist_plan(g->dist, dst, &plan));
    return dt__redist_exec(&plan, g->dist, g->local, out);
}

dt_status dt__rl_grad_add(dt_tensor *a, dt_tensor *b, dt_tensor **out)
{
    return grad_add(a, b, out);
}

dt_status dt__rl_grad_materialize(dt_tensor *g, dt_tensor **out)
{
    return grad_materialize(g, out);
}
