/*
 * Non-differentiable tensor helpers over the kernel tables: argument checks
 * with messages, results allocated in a memory category, zeros, elementwise
 * ops and the sum of a broadcast gradient down to an input's shape. They sit
 * in the kernels layer because both the autograd engine and the ops use them
 * (kernel_tensor.h).
 */
#include <string.h>

#include "kernels/kernel_tensor.h"

dt_status dt__kt_reject_distributed(const char *op, int n, dt_tensor *const *xs)
{
    for (int i = 0; i < n; i++) {
        if (xs[i] != NULL && xs[i]->dist != NULL)
            return DT_ERR(DT_ERR_UNSUPPORTED,
                          "%s: input %d is a distributed tensor; this entry takes local tensors "
                          "only",
                          op, i);
    }
    return DT_OK;
}

dt_status dt__kt_check_not_null(const char *op, const char *what, const dt_tensor *t)
{
    if (t == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument '%s' is NULL", op, what);
    const char *dead = dt__handle_problem(t, DT__MAGIC_TENSOR);
    if (dead != NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument '%s' is %s tensor", op, what, dead);
    return DT_OK;
}

dt_status dt__kt_check_f32(const char *op, const char *what, const dt_tensor *t)
{
    DT_CHECK(dt__kt_check_not_null(op, what, t));
    if (t->dtype != DT_DTYPE_F32)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: '%s' has dtype %s, expected f32", op, what,
                      dt_dtype_name(t->dtype));
    return DT_OK;
}

dt_status dt__kt_kernels(const char *op, dt_device device, dt_kernel_op kop,
                         const dt_kernel_ops **out)
{
    const dt_kernel_ops *k = dt__kernels_for(device);
    if (k == NULL)
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: no kernels for device type %d", op,
                      (int)device.type);
    if (k->supports != NULL && !k->supports(kop, DT_DTYPE_F32))
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: device '%s' lacks kernel %d for f32", op, k->name,
                      (int)kop);
    *out = k;
    return DT_OK;
}

dt_status dt__kt_empty_as(int ndim, const int64_t *shape, dt_dtype dtype, dt_device device,
                          dt_mem_category cat, dt_tensor **out)
{
    dt_mem_category prev = dt_memory_set_default_category(cat);
    dt_status s = dt_tensor_empty(ndim, shape, dtype, device, out);
    dt_memory_set_default_category(prev);
    return s;
}

dt_status dt__kt_empty(int ndim, const int64_t *shape, dt_device device, dt_tensor **out)
{
    return dt__kt_empty_as(ndim, shape, DT_DTYPE_F32, device, DT_MEM_ACTIVATION, out);
}

dt_status dt__kt_zeros(int ndim, const int64_t *shape, dt_device device, dt_tensor **out)
{
    const dt_kernel_ops *k = NULL;
    dt_tensor *t = NULL;
    dt_status s;
    DT_CHECK(dt__kt_kernels("zeros", device, DT_KOP_FILL, &k));
    DT_CHECK(dt__kt_empty(ndim, shape, device, &t));
    DT_CHECK_GOTO(k->fill(t, 0.0), s, err_release);
    *out = t;
    return DT_OK;
err_release:
    dt_tensor_release(t);
    return s;
}

dt_status dt__kt_contiguous(dt_tensor *t, dt_tensor **out)
{
    dt_mem_category prev = dt_memory_set_default_category(DT_MEM_ACTIVATION);
    dt_status s = dt_tensor_contiguous(t, out);
    dt_memory_set_default_category(prev);
    return s;
}

dt_status dt__kt_alias(dt_tensor *t, dt_tensor **out)
{
    return dt__tensor_make_view(t, t->ndim, t->shape, t->strides, t->offset, out);
}

static void shape_pair_str(const dt_tensor *a, const dt_tensor *b, char *sa, char *sb)
{
    dt__shape_str(a->ndim, a->shape, sa, 96);
    dt__shape_str(b->ndim, b->shape, sb, 96);
}

dt_status dt__kt_broadcast_shape(const char *op, const dt_tensor *a, const dt_tensor *b, int *ndim,
                                 int64_t *shape)
{
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < n; i++) {
        int ia = i - (n - a->ndim), ib = i - (n - b->ndim);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char sa[96], sb[96];
            shape_pair_str(a, b, sa, sb);
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "%s: shapes %s and %s do not broadcast (dim %d: %lld vs %lld)", op, sa,
                          sb, i, (long long)da, (long long)db);
        }
        shape[i] = da == 1 ? db : da;
    }
    *ndim = n;
    return DT_OK;
}

/* One reduction step: sum along dim (keepdim or not) into a new tensor. */
static dt_status sum_dim(const dt_kernel_ops *k, dt_tensor *x, int dim, bool keepdim,
                         dt_tensor **out)
{
    int64_t shape[DT_MAX_DIMS];
    int n = 0;
    dt_tensor *y = NULL;
    dt_status s;
    for (int i = 0; i < x->ndim; i++) {
        if (i == dim && !keepdim)
            continue;
        shape[n++] = i == dim ? 1 : x->shape[i];
    }
    DT_CHECK(dt__kt_empty(n, shape, x->device, &y));
    DT_CHECK_GOTO(k->reduce(DT_REDUCE_KIND_SUM, x, dim, y, NULL), s, err_release);
    *out = y;
    return DT_OK;
err_release:
    dt_tensor_release(y);
    return s;
}

dt_status dt__kt_reduce_to_shape(dt_tensor *g, int ndim, const int64_t *shape, dt_tensor **out)
{
    const dt_kernel_ops *k = NULL;
    dt_tensor *cur = dt_tensor_retain(g), *next = NULL;
    dt_status s = DT_OK;
    DT_CHECK_GOTO(dt__kt_kernels("reduce_to_shape", g->device, DT_KOP_REDUCE, &k), s, err);
    if (g->ndim < ndim) {
        s = DT_ERR(DT_ERR_INTERNAL, "reduce_to_shape: gradient has %d dims, input %d", g->ndim,
                   ndim);
        goto err;
    }
    while (cur->ndim > ndim) {
        DT_CHECK_GOTO(sum_dim(k, cur, 0, false, &next), s, err);
        dt_tensor_release(cur);
        cur = next;
    }
    for (int d = 0; d < ndim; d++) {
        if (cur->shape[d] == shape[d])
            continue;
        if (shape[d] != 1) {
            s = DT_ERR(DT_ERR_INTERNAL, "reduce_to_shape: dim %d is %lld, input has %lld", d,
                       (long long)cur->shape[d], (long long)shape[d]);
            goto err;
        }
        DT_CHECK_GOTO(sum_dim(k, cur, d, true, &next), s, err);
        dt_tensor_release(cur);
        cur = next;
    }
    *out = cur;
    return DT_OK;
err:
    dt_tensor_release(cur);
    return s;
}

dt_status dt__kt_binary_raw(dt_binary_op op, dt_tensor *a, dt_tensor *b, dt_tensor **out)
{
    const dt_kernel_ops *k = NULL;
    int ndim = 0;
    int64_t shape[DT_MAX_DIMS];
    dt_tensor *y = NULL;
    dt_status s;
    DT_CHECK(dt__kt_kernels("binary", a->device, DT_KOP_BINARY, &k));
    DT_CHECK(dt__kt_broadcast_shape("binary", a, b, &ndim, shape));
    DT_CHECK(dt__kt_empty(ndim, shape, a->device, &y));
    /* the kernel broadcasts a and b to y itself: no expanded views needed */
    DT_CHECK_GOTO(k->binary(op, a, b, y), s, err_release);
    *out = y;
    return DT_OK;
err_release:
    dt_tensor_release(y);
    return s;
}

dt_status dt__kt_unary_raw(dt_unary_op op, dt_tensor *x, float alpha, dt_tensor **out)
{
    const dt_kernel_ops *k = NULL;
    dt_tensor *y = NULL;
    dt_status s;
    DT_CHECK(dt__kt_kernels("unary", x->device, DT_KOP_UNARY, &k));
    DT_CHECK(dt__kt_empty(x->ndim, x->shape, x->device, &y));
    DT_CHECK_GOTO(k->unary(op, x, alpha, y), s, err_release);
    *out = y;
    return DT_OK;
err_release:
    dt_tensor_release(y);
    return s;
}

void dt__kt_release_all(int n, dt_tensor **ts)
{
    for (int i = 0; i < n; i++) {
        dt_tensor_release(ts[i]);
        ts[i] = NULL;
    }
}
