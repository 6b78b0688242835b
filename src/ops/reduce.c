/* Reductions along one dim (sum, mean, max with keepdim) and the sum of all elements. */
#include <string.h>

#include "dtensor/autograd.h"
#include "dtensor/ops.h"
#include "ops/ops_internal.h"

enum { RED_DIM, RED_KEEP, RED_KIND };

/* gy (reduced shape) broadcast back to the input shape, times @p factor. */
static dt_status expand_back(dt_ag_node *node, dt_tensor *gy, double factor, dt_tensor **out)
{
    dt_ag_meta *m = &node->inputs[0].meta;
    dt_tensor *u = NULL, *g = NULL;
    dt_status s;
    if (node->iv[RED_KEEP] || m->ndim == 0 || gy->ndim == m->ndim)
        u = dt_tensor_retain(gy);
    else
        DT_CHECK(dt_tensor_unsqueeze(gy, (int)node->iv[RED_DIM], &u));
    if (factor != 1.0)
        DT_CHECK_GOTO(dt__kt_unary_raw(DT_UNARY_SCALE, u, (float)factor, &g), s, out);
    else
        g = dt_tensor_retain(u);
    s = dt_tensor_expand(g, m->ndim, m->shape, out);
out:
    dt_tensor_release(g);
    dt_tensor_release(u);
    return s;
}

/* Max: scatter gy to the arg-max positions (flat indices built on the host). */
static dt_status max_backward(dt_ag_node *node, dt_tensor *gy, dt_tensor **out)
{
    const dt_kernel_ops *k = NULL;
    dt_ag_meta *m = &node->inputs[0].meta;
    dt_tensor *am = node->saved[0], *ids = NULL, *gw = NULL, *g2 = NULL, *ah = NULL;
    dt_tensor *ids_dev = NULL;
    int d = (int)node->iv[RED_DIM];
    int64_t outer = 1, len = m->shape[d], inner = 1, numel, st[DT_MAX_DIMS];
    dt_status s;
    for (int i = 0; i < d; i++)
        outer *= m->shape[i];
    for (int i = d + 1; i < m->ndim; i++)
        inner *= m->shape[i];
    numel = outer * len * inner;
    int64_t n = outer * inner, wshape[2] = {numel, 1}, gshape[2] = {n, 1}, gst[2] = {1, 1};
    DT_CHECK(dt__kt_kernels("dt_max", gy->device, DT_KOP_EMBEDDING, &k));
    /* flat indices are built on the host (a host copy of a device arg-max) */
    DT_CHECK(dt__kt_empty_as(1, &n, DT_DTYPE_I64, dt_device_cpu(), DT_MEM_ACTIVATION, &ids));
    DT_CHECK_GOTO(dt_tensor_to_device(am, dt_device_cpu(), &ah), s, err);
    const int64_t *a = dt_tensor_data(ah);
    int64_t *p = dt_tensor_data(ids);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++)
            p[o * inner + i] = o * len * inner + a[o * inner + i] * inner + i;
    DT_CHECK_GOTO(dt_tensor_to_device(ids, gy->device, &ids_dev), s, err);
    DT_CHECK_GOTO(dt__kt_zeros(2, wshape, gy->device, &gw), s, err);
    DT_CHECK_GOTO(dt__tensor_make_view(gy, 2, gshape, gst, gy->offset, &g2), s, err);
    DT_CHECK_GOTO(k->embedding_backward(ids_dev, g2, 0, gw), s, err);
    dt__contiguous_strides(m->ndim, m->shape, st);
    DT_CHECK_GOTO(dt__tensor_make_view(gw, m->ndim, m->shape, st, 0, out), s, err);
err:
    dt_tensor_release(g2);
    dt_tensor_release(gw);
    dt_tensor_release(ids);
    dt_tensor_release(ids_dev);
    dt_tensor_release(ah);
    return s;
}

static dt_status reduce_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    switch ((dt_reduce_kind)node->iv[RED_KIND]) {
    case DT_REDUCE_KIND_SUM:
        return expand_back(node, gy[0], 1.0, &gx[0]);
    case DT_REDUCE_KIND_MEAN:
        return expand_back(node, gy[0], node->dv[0], &gx[0]);
    case DT_REDUCE_KIND_MAX:
        return max_backward(node, gy[0], &gx[0]);
    }
    return DT_ERR(DT_ERR_INTERNAL, "%s: unknown reduce kind", node->name);
}

static dt_status reduce_common(const char *name, dt_reduce_kind kind, dt_tensor *x, int dim,
                               bool keepdim, dt_tensor **out)
{
    const dt_kernel_ops *k = NULL;
    dt_tensor *y = NULL, *am = NULL;
    dt_ag_node *node = NULL;
    int64_t shape[DT_MAX_DIMS];
    int d = 0, n = 0;
    dt_status s;
    DT_CHECK(dt__kt_check_f32(name, "x", x));
    if (out == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'out' is NULL", name);
    DT__DIST_DISPATCH(name, 1, &x, reduce, kind, x, dim, keepdim, out);
    DT_CHECK(dt__ops_wrap_dim(name, dim, x->ndim, &d));
    if (kind == DT_REDUCE_KIND_MAX && x->shape[d] == 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: dim %d is empty; max has no value", name, dim);
    DT_CHECK(dt__kt_kernels(name, x->device, DT_KOP_REDUCE, &k));
    for (int i = 0; i < x->ndim; i++) {
        if (i == d && !keepdim)
            continue;
        shape[n++] = i == d ? 1 : x->shape[i];
    }
    DT_CHECK(dt__kt_empty(n, shape, x->device, &y));
    bool record = dt__ag_should_record(1, &x);
    if (kind == DT_REDUCE_KIND_MAX && record)
        DT_CHECK_GOTO(dt__kt_empty_as(n, shape, DT_DTYPE_I64, x->device, DT_MEM_ACTIVATION, &am), s,
                      err);
    DT_CHECK_GOTO(k->reduce(kind, x, d, y, am), s, err);
    if (record) {
        DT_CHECK_GOTO(dt__ag_node_create(name, reduce_backward, 1, &x, &node), s, err);
        node->iv[RED_DIM] = d;
        node->iv[RED_KEEP] = keepdim;
        node->iv[RED_KIND] = kind;
        node->dv[0] = x->shape[d] > 0 ? 1.0 / (double)x->shape[d] : 0.0;
        DT_CHECK_GOTO(dt__ag_save(node, am), s, err_node);
        DT_CHECK_GOTO(dt__ag_attach(node, 1, &y), s, err);
    }
    dt_tensor_release(am);
    *out = y;
    return DT_OK;
err_node:
    dt__ag_node_release(node);
err:
    dt_tensor_release(am);
    dt_tensor_release(y);
    return s;
}

dt_status dt_sum(dt_tensor *x, int dim, bool keepdim, dt_tensor **out)
{
    return reduce_common("dt_sum", DT_REDUCE_KIND_SUM, x, dim, keepdim, out);
}

dt_status dt_mean(dt_tensor *x, int dim, bool keepdim, dt_tensor **out)
{
    return reduce_common("dt_mean", DT_REDUCE_KIND_MEAN, x, dim, keepdim, out);
}

dt_status dt_max(dt_tensor *x, int dim, bool keepdim, dt_tensor **out)
{
    return reduce_common("dt_max", DT_REDUCE_KIND_MAX, x, dim, keepdim, out);
}

/* ------------------------------------------------------------ sum of all elements */

static dt_status sum_all_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    dt_ag_meta *m = &node->inputs[0].meta;
    return dt_tensor_expand(gy[0], m->ndim, m->shape, &gx[0]);
}

dt_status dt_sum_all(dt_tensor *x, dt_tensor **out)
{
    const char *name = "dt_sum_all";
    const dt_kernel_ops *k = NULL;
    dt_tensor *xc = NULL, *flat = NULL, *y = NULL;
    dt_ag_node *node = NULL;
    int64_t n, st = 1;
    dt_status s;
    DT_CHECK(dt__kt_check_f32(name, "x", x));
    if (out == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'out' is NULL", name);
    DT__DIST_DISPATCH(name, 1, &x, sum_all, x, out);
    DT_CHECK(dt__kt_kernels(name, x->device, DT_KOP_REDUCE, &k));
    n = dt_tensor_numel(x);
    DT_CHECK(dt__kt_contiguous(x, &xc));
    DT_CHECK_GOTO(dt__tensor_make_view(xc, 1, &n, &st, xc->offset, &flat), s, err);
    DT_CHECK_GOTO(dt__kt_empty(0, NULL, x->device, &y), s, err);
    DT_CHECK_GOTO(k->reduce(DT_REDUCE_KIND_SUM, flat, 0, y, NULL), s, err);
    if (dt__ag_should_record(1, &x)) {
        DT_CHECK_GOTO(dt__ag_node_create(name, sum_all_backward, 1, &x, &node), s, err);
        DT_CHECK_GOTO(dt__ag_attach(node, 1, &y), s, err);
    }
    dt_tensor_release(flat);
    dt_tensor_release(xc);
    *out = y;
    return DT_OK;
err:
    dt_tensor_release(y);
    dt_tensor_release(flat);
    dt_tensor_release(xc);
    return s;
}
