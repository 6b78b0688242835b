/* Masked fill: out = mask ? value : x, mask u8 broadcastable to x; the gradient skips masked
 * positions. */
#include <string.h>

#include "dtensor/autograd.h"
#include "dtensor/ops.h"
#include "ops/ops_internal.h"

/* out = mask ? value : x, with mask expanded to x's shape. */
static dt_status masked_fill_raw(dt_tensor *x, dt_tensor *mask, float value, dt_tensor **out)
{
    const dt_kernel_ops *k = NULL;
    dt_tensor *m = NULL, *y = NULL;
    dt_status s;
    DT_CHECK(dt__kt_kernels("dt_masked_fill", x->device, DT_KOP_MASKED_FILL, &k));
    DT_CHECK(dt_tensor_expand(mask, x->ndim, x->shape, &m));
    DT_CHECK_GOTO(dt__kt_empty(x->ndim, x->shape, x->device, &y), s, err);
    DT_CHECK_GOTO(k->masked_fill(x, m, value, y), s, err);
    dt_tensor_release(m);
    *out = y;
    return DT_OK;
err:
    dt_tensor_release(y);
    dt_tensor_release(m);
    return s;
}

static dt_status masked_fill_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    return masked_fill_raw(gy[0], node->saved[0], 0.0f, &gx[0]);
}

dt_status dt_masked_fill(dt_tensor *x, dt_tensor *mask, double value, dt_tensor **out)
{
    const char *name = "dt_masked_fill";
    dt_tensor *ins[2] = {x, mask}, *y = NULL;
    dt_ag_node *node = NULL;
    dt_status s;
    int ndim;
    int64_t shape[DT_MAX_DIMS];
    DT_CHECK(dt__kt_check_f32(name, "x", x));
    DT_CHECK(dt__kt_check_not_null(name, "mask", mask));
    if (out == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'out' is NULL", name);
    DT__DIST_DISPATCH(name, 2, ins, masked_fill, x, mask, value, out);
    if (mask->dtype != DT_DTYPE_U8)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: mask has dtype %s, expected u8", name,
                      dt_dtype_name(mask->dtype));
    DT_CHECK(dt__ops_check_same_device(name, x, mask));
    DT_CHECK(dt__kt_broadcast_shape(name, x, mask, &ndim, shape));
    if (ndim != x->ndim || memcmp(shape, x->shape, sizeof(shape[0]) * (size_t)ndim) != 0) {
        char sm[96], sx[96];
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: mask shape %s does not broadcast to x shape %s",
                      name, dt__shape_str(mask->ndim, mask->shape, sm, sizeof(sm)),
                      dt__shape_str(x->ndim, x->shape, sx, sizeof(sx)));
    }
    DT_CHECK(masked_fill_raw(x, mask, (float)value, &y));
    if (dt__ag_should_record(1, &x)) {
        DT_CHECK_GOTO(dt__ag_node_create(name, masked_fill_backward, 1, &x, &node), s, err_y);
        DT_CHECK_GOTO(dt__ag_save(node, mask), s, err_node);
        DT_CHECK_GOTO(dt__ag_attach(node, 1, &y), s, err_y);
    }
    *out = y;
    return DT_OK;
err_node:
    dt__ag_node_release(node);
err_y:
    dt_tensor_release(y);
    return s;
}
