/*
 * Gradient clipping by the global 2-norm, PyTorch clip_grad_norm_ semantics:
 * norm = sqrt(sum over grads of sum(g^2)); coef = max_norm / (norm + 1e-6);
 * when coef < 1 every gradient is multiplied by it.
 */
#include <math.h>

#include "core/error.h"
#include "dtensor/autograd.h"
#include "kernels/kernel_ops.h"
#include "nn/module_impl.h"

typedef struct clip_ctx {
    double sum_sq;
    double coef;
} clip_ctx;

static dt_status check_grad(const char *fqn, const dt_tensor *g)
{
    if (g->dist != NULL)
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "dt_clip_grad_norm: the gradient of '%s' is distributed (its norm needs "
                      "the parallel styles' reduction)",
                      fqn);
    if (g->dtype != DT_DTYPE_F32 || !dt_tensor_is_contiguous(g))
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "dt_clip_grad_norm: the gradient of '%s' is not a contiguous f32 tensor", fqn);
    return DT_OK;
}

static dt_status add_sum_sq(const char *fqn, dt_module *owner, const char *name, dt_tensor *p,
                            void *user)
{
    clip_ctx *c = user;
    dt_tensor *g = dt_tensor_grad(p);
    if (g == NULL)
        return DT_OK;
    DT_CHECK(check_grad(fqn, g));
    const dt_kernel_ops *k = dt__kernels_for(g->device);
    if (k == NULL || k->sum_squares == NULL)
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "dt_clip_grad_norm: no sum_squares kernel for the device of '%s'", fqn);
    double s = 0.0;
    DT_CHECK(k->sum_squares(g, &s));
    c->sum_sq += s;
    return DT_OK;
}

static dt_status scale_grad(const char *fqn, dt_module *owner, const char *name, dt_tensor *p,
                            void *user)
{
    const clip_ctx *c = user;
    dt_tensor *g = dt_tensor_grad(p);
    if (g == NULL)
        return DT_OK;
    const dt_kernel_ops *k = dt__kernels_for(g->device);
    if (k == NULL)
        return DT_ERR(DT_ERR_UNSUPPORTED, "dt_clip_grad_norm: no kernels for the device of '%s'",
                      fqn);
    /* element-wise on identical layouts: in place is safe */
    return k->unary(DT_UNARY_SCALE, g, (float)c->coef, g);
}

dt_status dt_clip_grad_norm(dt_module *root, double max_norm, double *total_norm)
{
    DT_ARG_NOT_NULL(root);
    if (!(max_norm > 0.0))
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_clip_grad_norm: max_norm %g must be > 0", max_norm);
    clip_ctx c = {0.0, 1.0};
    DT_CHECK(dt_module_foreach_param(root, add_sum_sq, &c));
    double norm = sqrt(c.sum_sq);
    c.coef = max_norm / (norm + 1e-6);
    if (c.coef < 1.0)
        DT_CHECK(dt_module_foreach_param(root, scale_grad, &c));
    if (total_norm != NULL)
        *total_norm = norm;
    return DT_OK;
}
