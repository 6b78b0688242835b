/*
 * The autograd node of dt_redistribute: the gradient of a redistributed
 * shard is redistributed back, from the target's layout (Partial read as
 * Replicate) to the source's.
 */
#include "autograd/node.h"
#include "core/error.h"
#include "placement/placement_impl.h"

/* saved[0] / saved[1]: handles carrying the source / target spec (no data):
 * released with the node, they keep the specs and the mesh alive.
 * gy[0] is the output shard's gradient laid out as the target with Partial
 * read as Replicate; if the engine hands over a distributed gradient instead
 * (a pending Partial), it is planned from its own spec, so P -> S(d) becomes
 * one reduce-scatter as in PyTorch. */
static dt_status redistribute_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    const dt_spec *src = node->saved[0]->dist, *dst = node->saved[1]->dist;
    dt_spec *gsrc = NULL, *gdst = NULL;
    dt_tensor *g = gy[0];
    dt__plan plan;
    dt_status s;
    if (!dt__ag_input_needs_grad(node, 0))
        return DT_OK;
    if (g->dist != NULL) {
        gsrc = dt_spec_retain(g->dist);
        g = g->local;
    } else {
        DT_CHECK(dt__spec_normalize_grad(dst, &gsrc));
    }
    DT_CHECK_GOTO(dt__spec_normalize_grad(src, &gdst), s, out);
    DT_CHECK_GOTO(dt__redist_check("dt_redistribute (backward)", gsrc, gdst), s, out);
    DT_CHECK_GOTO(dt__redist_plan(gsrc, gdst, &plan), s, out);
    s = dt__redist_exec(&plan, gsrc, g, &gx[0]);
out:
    dt_spec_release(gsrc);
    dt_spec_release(gdst);
    return s;
}

static dt_status record(const dt_spec *src, const dt_spec *dst, dt_tensor *x, dt_tensor **y)
{
    dt_ag_node *node = NULL;
    dt_tensor *h0 = NULL, *h1 = NULL, *alias = NULL;
    dt_status s;
    if (*y == x) { /* a no-op plan step kept the shard: the output needs its own handle */
        DT_CHECK(dt__tensor_make_view(x, x->ndim, x->shape, x->strides, x->offset, &alias));
        dt_tensor_release(*y);
        *y = alias;
    }
    DT_CHECK(dt__dist_wrap((dt_spec *)src, NULL, &h0));
    DT_CHECK_GOTO(dt__dist_wrap((dt_spec *)dst, NULL, &h1), s, err_release);
    DT_CHECK_GOTO(dt__ag_node_create("redistribute", redistribute_backward, 1, &x, &node), s,
                  err_release);
    node->saved[0] = h0;
    node->saved[1] = h1;
    node->n_saved = 2;
    /* a pending Partial gradient is planned from its own spec (above): P ->
     * S(d) is then one reduce-scatter instead of an all-reduce and a slice */
    node->accepts_dist_grad = true;
    return dt__ag_attach(node, 1, y);
err_release:
    dt_tensor_release(h0);
    dt_tensor_release(h1);
    return s;
}

dt_status dt__redist_local(const dt_spec *src, const dt_spec *dst, dt_tensor *local,
                           dt_tensor **out)
{
    dt__plan plan;
    dt_tensor *y = NULL;
    dt_status s;
    DT_CHECK(dt__redist_check("dt_redistribute", src, dst));
    if (dt_spec_equal(src, dst)) { /* the common no-op: skip the plan cache */
        *out = dt_tensor_retain(local);
        return DT_OK;
    }
    DT_CHECK(dt__redist_plan(src, dst, &plan));
    if (plan.n_steps == 0) {
        *out = dt_tensor_retain(local);
        return DT_OK;
    }
    DT_CHECK(dt__redist_exec(&plan, src, local, &y));
    if (dt__ag_should_record(1, &local))
        DT_CHECK_GOTO(record(src, dst, local, &y), s, err_release);
    *out = y;
    return DT_OK;
err_release:
    dt_tensor_release(y);
    return s;
}
