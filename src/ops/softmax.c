/* Softmax, causal (masked, scaled) softmax and log-softmax over one dim. */
#include "dtensor/autograd.h"
#include "dtensor/ops.h"
#include "ops/ops_internal.h"

/* @p t with dims d and last swapped, contiguous (t itself when d is last). */
static dt_status to_last(dt_tensor *t, int d, dt_tensor **out)
{
    dt_tensor *v = NULL;
    dt_status s;
    if (d == t->ndim - 1)
        return dt__kt_contiguous(t, out);
    DT_CHECK(dt_tensor_transpose(t, d, t->ndim - 1, &v));
    s = dt__kt_contiguous(v, out);
    dt_tensor_release(v);
    return s;
}

static dt_status softmax_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    const dt_kernel_ops *k = NULL;
    dt_tensor *yt = node->saved[0], *gyt = NULL, *gxt = NULL;
    int d = (int)node->iv[0];
    bool log = node->iv[1] != 0;
    dt_status s;
    DT_CHECK(dt__kt_kernels(node->name, gy[0]->device, DT_KOP_SOFTMAX, &k));
    DT_CHECK(to_last(gy[0], d, &gyt));
    DT_CHECK_GOTO(dt__kt_empty(yt->ndim, yt->shape, yt->device, &gxt), s, out);
    DT_CHECK_GOTO(k->softmax_backward(yt, gyt, (float)node->dv[0], log, gxt), s, out);
    if (d == gxt->ndim - 1)
        gx[0] = dt_tensor_retain(gxt);
    else
        DT_CHECK_GOTO(dt_tensor_transpose(gxt, d, gxt->ndim - 1, &gx[0]), s, out);
out:
    dt_tensor_release(gxt);
    dt_tensor_release(gyt);
    return s;
}

static dt_status softmax_common(const char *name, dt_tensor *x, int dim, double scale, bool causal,
                                bool log, dt_tensor **out)
{
    const dt_kernel_ops *k = NULL;
    dt_tensor *xt = NULL, *yt = NULL, *v = NULL, *y = NULL;
    dt_ag_node *node = NULL;
    dt_status s;
    int d = 0;
    DT_CHECK(dt__kt_check_f32(name, "x", x));
    if (out == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'out' is NULL", name);
    DT__DIST_DISPATCH(name, 1, &x, softmax,
                      causal ? DT_DIST_CAUSAL_SOFTMAX
                             : (log ? DT_DIST_LOG_SOFTMAX : DT_DIST_SOFTMAX),
                      x, dim, scale, out);
    if (causal && x->ndim < 2)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: x needs >= 2 dims [..., Tq, Tk], has %d", name,
                      x->ndim);
    DT_CHECK(dt__ops_wrap_dim(name, dim, x->ndim, &d));
    if (causal && x->shape[x->ndim - 2] > x->shape[x->ndim - 1])
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: Tq %lld > Tk %lld leaves rows fully masked", name,
                      (long long)x->shape[x->ndim - 2], (long long)x->shape[x->ndim - 1]);
    DT_CHECK(dt__kt_kernels(name, x->device, DT_KOP_SOFTMAX, &k));
    DT_CHECK(to_last(x, d, &xt));
    DT_CHECK_GOTO(dt__kt_empty(xt->ndim, xt->shape, xt->device, &yt), s, err);
    DT_CHECK_GOTO(k->softmax(xt, (float)scale, causal, log, yt), s, err);
    if (d == x->ndim - 1) {
        y = dt_tensor_retain(yt);
    } else {
        DT_CHECK_GOTO(dt_tensor_transpose(yt, d, x->ndim - 1, &v), s, err);
        DT_CHECK_GOTO(dt__kt_contiguous(v, &y), s, err);
        if (y == v) { /* never hand out a handle we also keep */
            dt_tensor_release(y);
            y = NULL;
            DT_CHECK_GOTO(dt__kt_alias(v, &y), s, err);
        }
    }
    if (dt__ag_should_record(1, &x)) {
        DT_CHECK_GOTO(dt__ag_node_create(name, softmax_backward, 1, &x, &node), s, err);
        node->iv[0] = d;
        node->iv[1] = log;
        node->dv[0] = scale;
        DT_CHECK_GOTO(dt__ag_save(node, yt), s, err_node);
        DT_CHECK_GOTO(dt__ag_attach(node, 1, &y), s, err);
    }
    dt_tensor_release(v);
    dt_tensor_release(yt);
    dt_tensor_release(xt);
    *out = y;
    return DT_OK;
err_node:
    dt__ag_node_release(node);
err:
    dt_tensor_release(y);
    dt_tensor_release(v);
    dt_tensor_release(yt);
    dt_tensor_release(xt);
    return s;
}

dt_status dt_softmax(dt_tensor *x, int dim, dt_tensor **out)
{
    return softmax_common("dt_softmax", x, dim, 1.0, false, false, out);
}

dt_status dt_causal_softmax(dt_tensor *x, double scale, dt_tensor **out)
{
    return softmax_common("dt_causal_softmax", x, -1, scale, true, false, out);
}

dt_status dt_log_softmax(dt_tensor *x, int dim, dt_tensor **out)
{
    return softmax_common("dt_log_softmax", x, dim, 1.0, false, true, out);
}
