/* LayerNorm over the last dim with optional affine weight and bias. */
#include "dtensor/autograd.h"
#include "dtensor/ops.h"
#include "ops/ops_internal.h"

static dt_status layer_norm_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    const dt_kernel_ops *k = NULL;
    dt_tensor *x = node->saved[0], *w = node->saved[1], *gxx = NULL, *gw = NULL, *gb = NULL;
    int64_t c = x->shape[x->ndim - 1];
    dt_status s;
    DT_CHECK(dt__kt_kernels(node->name, x->device, DT_KOP_LAYER_NORM, &k));
    DT_CHECK_GOTO(dt__kt_empty(x->ndim, x->shape, x->device, &gxx), s, err);
    if (dt__ag_input_needs_grad(node, 1))
        DT_CHECK_GOTO(dt__kt_zeros(1, &c, x->device, &gw), s, err);
    if (dt__ag_input_needs_grad(node, 2))
        DT_CHECK_GOTO(dt__kt_zeros(1, &c, x->device, &gb), s, err);
    DT_CHECK_GOTO(k->layer_norm_backward(x, w, node->saved[2], node->saved[3], gy[0], gxx, gw, gb),
                  s, err);
    gx[0] = gxx;
    gx[1] = gw;
    gx[2] = gb;
    return DT_OK;
err:
    dt_tensor_release(gxx);
    dt_tensor_release(gw);
    dt_tensor_release(gb);
    return s;
}

static dt_status layer_norm_check(const char *name, dt_tensor *x, dt_tensor *w, dt_tensor *b,
                                  double eps)
{
    char sx[96], sp[96];
    DT_CHECK(dt__kt_check_f32(name, "x", x));
    if (x->ndim < 1)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: x is a scalar; it needs a last dim", name);
    int64_t c = x->shape[x->ndim - 1];
    dt_tensor *params[2] = {w, b};
    const char *pname[2] = {"weight", "bias"};
    for (int i = 0; i < 2; i++) {
        dt_tensor *p = params[i];
        if (p == NULL)
            continue;
        DT_CHECK(dt__kt_check_f32(name, pname[i], p));
        DT_CHECK(dt__ops_check_same_device(name, x, p));
        if (p->ndim != 1 || p->shape[0] != c)
            return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s shape %s does not match x %s (want [%lld])",
                          name, pname[i], dt__shape_str(p->ndim, p->shape, sp, sizeof(sp)),
                          dt__shape_str(x->ndim, x->shape, sx, sizeof(sx)), (long long)c);
    }
    if (!(eps >= 0.0))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: eps %g must be >= 0", name, eps);
    return DT_OK;
}

dt_status dt_layer_norm(dt_tensor *x, dt_tensor *weight, dt_tensor *bias, double eps,
                        dt_tensor **out)
{
    const char *name = "dt_layer_norm";
    const dt_kernel_ops *k = NULL;
    dt_tensor *ins[3] = {x, weight, bias}, *xc = NULL, *y = NULL, *mean = NULL, *rstd = NULL;
    dt_ag_node *node = NULL;
    dt_status s;
    DT_CHECK(layer_norm_check(name, x, weight, bias, eps));
    if (out == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'out' is NULL", name);
    DT__DIST_DISPATCH(name, 3, ins, layer_norm, x, weight, bias, eps, out);
    DT_CHECK(dt__kt_kernels(name, x->device, DT_KOP_LAYER_NORM, &k));
    int64_t c = x->shape[x->ndim - 1], rows = c ? dt_tensor_numel(x) / c : 0;
    DT_CHECK(dt__kt_contiguous(x, &xc));
    DT_CHECK_GOTO(dt__kt_empty(x->ndim, x->shape, x->device, &y), s, err);
    DT_CHECK_GOTO(dt__kt_empty(1, &rows, x->device, &mean), s, err);
    DT_CHECK_GOTO(dt__kt_empty(1, &rows, x->device, &rstd), s, err);
    DT_CHECK_GOTO(k->layer_norm(xc, weight, bias, (float)eps, y, mean, rstd), s, err);
    if (dt__ag_should_record(3, ins)) {
        DT_CHECK_GOTO(dt__ag_node_create(name, layer_norm_backward, 3, ins, &node), s, err);
        DT_CHECK_GOTO(dt__ag_save(node, xc), s, err_node);
        DT_CHECK_GOTO(dt__ag_save(node, weight), s, err_node);
        DT_CHECK_GOTO(dt__ag_save(node, mean), s, err_node);
        DT_CHECK_GOTO(dt__ag_save(node, rstd), s, err_node);
        DT_CHECK_GOTO(dt__ag_attach(node, 1, &y), s, err);
    }
    dt_tensor_release(xc);
    dt_tensor_release(mean);
    dt_tensor_release(rstd);
    *out = y;
    return DT_OK;
err_node:
    dt__ag_node_release(node);
err:
    dt_tensor_release(xc);
    dt_tensor_release(mean);
    dt_tensor_release(rstd);
    dt_tensor_release(y);
    return s;
}
