/* Element-wise ops with broadcasting: add/sub/mul/div, scalar ops, activations. */
#include "dtensor/autograd.h"
#include "dtensor/ops.h"
#include "ops/ops_internal.h"

static const char *const binary_names[] = {"dt_add", "dt_sub", "dt_mul", "dt_div"};

/* ------------------------------------------------------------ binary */

static dt_status binary_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    dt_binary_op op = (dt_binary_op)node->iv[0];
    dt_tensor *a = node->saved[0], *b = node->saved[1], *t = NULL, *u = NULL;
    dt_status s = DT_OK;
    bool need_a = dt__ag_input_needs_grad(node, 0), need_b = dt__ag_input_needs_grad(node, 1);
    switch (op) {
    case DT_BINARY_ADD:
    case DT_BINARY_SUB:
        if (need_a)
            gx[0] = dt_tensor_retain(gy[0]);
        if (need_b && op == DT_BINARY_ADD)
            gx[1] = dt_tensor_retain(gy[0]);
        else if (need_b)
            DT_CHECK(dt__kt_unary_raw(DT_UNARY_NEG, gy[0], 0.0f, &gx[1]));
        return DT_OK;
    case DT_BINARY_MUL:
        if (need_a)
            DT_CHECK(dt__kt_binary_raw(DT_BINARY_MUL, gy[0], b, &gx[0]));
        if (need_b)
            DT_CHECK(dt__kt_binary_raw(DT_BINARY_MUL, gy[0], a, &gx[1]));
        return DT_OK;
    case DT_BINARY_DIV:
        if (need_a)
            DT_CHECK(dt__kt_binary_raw(DT_BINARY_DIV, gy[0], b, &gx[0]));
        if (need_b) { /* d(a/b)/db = -a / b^2 */
            DT_CHECK(dt__kt_binary_raw(DT_BINARY_MUL, gy[0], a, &t));
            DT_CHECK_GOTO(dt__kt_binary_raw(DT_BINARY_DIV, t, b, &u), s, out);
            dt_tensor_release(t);
            t = NULL;
            DT_CHECK_GOTO(dt__kt_binary_raw(DT_BINARY_DIV, u, b, &t), s, out);
            DT_CHECK_GOTO(dt__kt_unary_raw(DT_UNARY_NEG, t, 0.0f, &gx[1]), s, out);
        }
        break;
    }
out:
    dt_tensor_release(t);
    dt_tensor_release(u);
    return s;
}

static dt_status binary_op(dt_binary_op op, dt_tensor *a, dt_tensor *b, dt_tensor **out)
{
    const char *name = binary_names[op];
    dt_tensor *ins[2] = {a, b}, *y = NULL;
    dt_ag_node *node = NULL;
    dt_status s;
    DT_CHECK(dt__kt_check_f32(name, "a", a));
    DT_CHECK(dt__kt_check_f32(name, "b", b));
    if (out == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'out' is NULL", name);
    DT__DIST_DISPATCH(name, 2, ins, binary, op, a, b, out);
    DT_CHECK(dt__ops_check_same_device(name, a, b));
    int ndim;
    int64_t shape[DT_MAX_DIMS];
    DT_CHECK(dt__kt_broadcast_shape(name, a, b, &ndim, shape));
    DT_CHECK(dt__kt_binary_raw(op, a, b, &y));
    if (dt__ag_should_record(2, ins)) {
        DT_CHECK_GOTO(dt__ag_node_create(name, binary_backward, 2, ins, &node), s, err_y);
        node->iv[0] = op;
        bool keep_a = op == DT_BINARY_MUL || op == DT_BINARY_DIV;
        bool keep_b = keep_a;
        keep_a = keep_a && dt__ag_input_needs_grad(node, 1);
        keep_b = (op == DT_BINARY_DIV) || (keep_b && dt__ag_input_needs_grad(node, 0));
        DT_CHECK_GOTO(dt__ag_save(node, keep_a ? a : NULL), s, err_node);
        DT_CHECK_GOTO(dt__ag_save(node, keep_b ? b : NULL), s, err_node);
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

dt_status dt_add(dt_tensor *a, dt_tensor *b, dt_tensor **out)
{
    return binary_op(DT_BINARY_ADD, a, b, out);
}

dt_status dt_sub(dt_tensor *a, dt_tensor *b, dt_tensor **out)
{
    return binary_op(DT_BINARY_SUB, a, b, out);
}

dt_status dt_mul(dt_tensor *a, dt_tensor *b, dt_tensor **out)
{
    return binary_op(DT_BINARY_MUL, a, b, out);
}

dt_status dt_div(dt_tensor *a, dt_tensor *b, dt_tensor **out)
{
    return binary_op(DT_BINARY_DIV, a, b, out);
}

/* ------------------------------------------------------------ unary */

static dt_status unary_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    dt_unary_op op = (dt_unary_op)node->iv[0];
    const dt_kernel_ops *k = NULL;
    dt_tensor *g = NULL;
    dt_status s;
    if (op == DT_UNARY_ADD_SCALAR) {
        gx[0] = dt_tensor_retain(gy[0]);
        return DT_OK;
    }
    if (op == DT_UNARY_SCALE)
        return dt__kt_unary_raw(DT_UNARY_SCALE, gy[0], (float)node->dv[0], &gx[0]);
    if (op == DT_UNARY_ROUND_BF16) /* the gradient of a bf16 tensor is bf16 */
        return dt__kt_unary_raw(DT_UNARY_ROUND_BF16, gy[0], 0.0f, &gx[0]);
    DT_CHECK(dt__kt_kernels(node->name, gy[0]->device, DT_KOP_UNARY_BACKWARD, &k));
    DT_CHECK(dt__kt_empty(gy[0]->ndim, gy[0]->shape, gy[0]->device, &g));
    DT_CHECK_GOTO(k->unary_backward(op, node->saved[0], gy[0], g), s, err_release);
    gx[0] = g;
    return DT_OK;
err_release:
    dt_tensor_release(g);
    return s;
}

static dt_status unary_op(const char *name, dt_unary_op op, dt_tensor *x, double alpha,
                          dt_tensor **out)
{
    dt_tensor *y = NULL;
    dt_ag_node *node = NULL;
    dt_status s;
    DT_CHECK(dt__kt_check_f32(name, "x", x));
    if (out == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'out' is NULL", name);
    DT__DIST_DISPATCH(name, 1, &x, unary, op, x, alpha, out);
    DT_CHECK(dt__kt_unary_raw(op, x, (float)alpha, &y));
    if (dt__ag_should_record(1, &x)) {
        DT_CHECK_GOTO(dt__ag_node_create(name, unary_backward, 1, &x, &node), s, err_y);
        node->iv[0] = op;
        node->dv[0] = alpha;
        bool keep_x = op == DT_UNARY_GELU_TANH || op == DT_UNARY_RELU;
        DT_CHECK_GOTO(dt__ag_save(node, keep_x ? x : NULL), s, err_node);
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

dt_status dt_scale(dt_tensor *a, double s, dt_tensor **out)
{
    return unary_op("dt_scale", DT_UNARY_SCALE, a, s, out);
}

dt_status dt_add_scalar(dt_tensor *a, double s, dt_tensor **out)
{
    return unary_op("dt_add_scalar", DT_UNARY_ADD_SCALAR, a, s, out);
}

dt_status dt_gelu_tanh(dt_tensor *x, dt_tensor **out)
{
    return unary_op("dt_gelu_tanh", DT_UNARY_GELU_TANH, x, 0.0, out);
}

dt_status dt_relu(dt_tensor *x, dt_tensor **out)
{
    return unary_op("dt_relu", DT_UNARY_RELU, x, 0.0, out);
}

dt_status dt_round_to_dtype(dt_tensor *x, dt_dtype dtype, dt_tensor **out)
{
    DT_CHECK(dt__kt_check_f32("dt_round_to_dtype", "x", x));
    if (out == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_round_to_dtype: argument 'out' is NULL");
    if (dtype == DT_DTYPE_F32) {
        *out = dt_tensor_retain(x);
        return DT_OK;
    }
    if (dtype != DT_DTYPE_BF16)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_round_to_dtype: dtype %s, expected bf16 or f32",
                      dt_dtype_name(dtype));
    return unary_op("dt_round_to_dtype", DT_UNARY_ROUND_BF16, x, 0.0, out);
}
