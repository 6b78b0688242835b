/* Grad mode (per thread), requires_grad, .grad accessors and detach. */
#include <string.h>

#include "autograd/dist_hooks.h"
#include "autograd/node.h"
#include "dtensor/autograd.h"
#include "kernels/kernel_tensor.h"

/* Recording is on by default; a thread turns it off for its own scope only. */
static _Thread_local bool g_grad_disabled;

bool dt_grad_set_enabled(bool enabled)
{
    bool prev = !g_grad_disabled;
    g_grad_disabled = !enabled;
    return prev;
}

bool dt_grad_is_enabled(void)
{
    return !g_grad_disabled;
}

static bool dtype_is_float(dt_dtype d)
{
    return d == DT_DTYPE_F32 || d == DT_DTYPE_F64 || d == DT_DTYPE_F16 || d == DT_DTYPE_BF16;
}

dt_status dt_tensor_set_requires_grad(dt_tensor *t, bool requires_grad)
{
    DT_ARG_NOT_NULL(t);
    if (t->dist != NULL) /* autograd runs on the shard */
        return dt_tensor_set_requires_grad(t->local, requires_grad);
    if (t->grad_fn != NULL) {
        if (!requires_grad)
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_tensor_set_requires_grad: tensor is the output of '%s' (not a "
                          "leaf); detach it instead of clearing requires_grad",
                          t->grad_fn->name);
        return DT_OK;
    }
    if (requires_grad && !dtype_is_float(t->dtype))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_tensor_set_requires_grad: dtype %s cannot require grad (floats only)",
                      dt_dtype_name(t->dtype));
    t->requires_grad = requires_grad;
    return DT_OK;
}

bool dt_tensor_requires_grad(const dt_tensor *t)
{
    if (t != NULL && t->dist != NULL)
        return dt_tensor_requires_grad(t->local);
    return t != NULL && (t->requires_grad || t->grad_fn != NULL);
}

dt_tensor *dt_tensor_grad(const dt_tensor *t)
{
    if (t != NULL && t->dist != NULL)
        return t->local->grad;
    return t == NULL ? NULL : t->grad;
}

dt_status dt_tensor_set_grad(dt_tensor *t, dt_tensor *grad)
{
    DT_ARG_NOT_NULL(t);
    if (t->dist != NULL)
        return dt_tensor_set_grad(t->local,
                                  grad != NULL && grad->dist != NULL ? grad->local : grad);
    if (grad != NULL && grad->dist != NULL)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_tensor_set_grad: grad is distributed but the tensor is local");
    if (grad != NULL) {
        char sg[96], st[96];
        if (grad == t)
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_tensor_set_grad: a tensor cannot be its own grad");
        if (grad->dtype != t->dtype)
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_tensor_set_grad: grad dtype %s differs from tensor dtype %s",
                          dt_dtype_name(grad->dtype), dt_dtype_name(t->dtype));
        if (grad->ndim != t->ndim ||
            memcmp(grad->shape, t->shape, sizeof(t->shape[0]) * (size_t)t->ndim) != 0)
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_tensor_set_grad: grad shape %s differs from tensor shape %s",
                          dt__shape_str(grad->ndim, grad->shape, sg, sizeof(sg)),
                          dt__shape_str(t->ndim, t->shape, st, sizeof(st)));
    }
    dt_tensor *old = t->grad;
    t->grad = dt_tensor_retain(grad);
    dt_tensor_release(old);
    return DT_OK;
}

dt_status dt_tensor_detach(dt_tensor *t, dt_tensor **out)
{
    dt_tensor *y = NULL;
    DT_ARG_NOT_NULL(t);
    DT_ARG_NOT_NULL(out);
    if (t->dist != NULL) { /* detach the shard, keep the spec */
        const dt_ag_dist_hooks *tab = dt__ag_dist_hooks();
        dt_tensor *l = NULL;
        dt_status s;
        if (tab == NULL || tab->wrap_like == NULL)
            return DT_ERR(DT_ERR_UNSUPPORTED, "dt_tensor_detach: no distributed wrap available");
        DT_CHECK(dt__kt_alias(t->local, &l));
        s = tab->wrap_like(t, l, &y);
        dt_tensor_release(l);
        DT_CHECK(s);
        *out = y;
        return DT_OK;
    }
    DT_CHECK(dt__kt_alias(t, &y));
    *out = y;
    return DT_OK;
}
