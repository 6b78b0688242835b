/*
 * SGD with PyTorch's semantics (dampening 0, no Nesterov):
 *   d = g + wd * p;  buf = momentum * buf + d (buf starts at zero, so the first
 *   step gives buf = d as PyTorch's clone);  p -= lr * (momentum ? buf : d).
 */
#include "core/error.h"
#include "kernels/kernel_ops.h"
#include "nn/optim_impl.h"

static dt_status sgd_update(const dt_optim_hparams *h, int64_t step, dt_tensor *p,
                            const dt_tensor *g, dt_tensor *const *state)
{
    dt_tensor *buf = h->momentum != 0.0 ? state[0] : NULL;
    const dt_kernel_ops *k = dt__kernels_for(p->device);
    if (k == NULL || k->sgd_step == NULL || !k->supports(DT_KOP_OPTIM, DT_DTYPE_F32))
        return DT_ERR(DT_ERR_UNSUPPORTED, "sgd: the %s device has no sgd_step kernel",
                      dt_device_type_name(p->device.type));
    return k->sgd_step(p, g, buf, (float)h->lr, (float)h->momentum, (float)h->weight_decay);
}

static bool sgd_needs_state(const dt_optim_hparams *h)
{
    return h->momentum != 0.0;
}

const dt_optim_kind dt__optim_sgd = {
    .name = "sgd",
    .n_states = 1,
    .state_names = {"momentum_buffer"},
    .update = sgd_update,
    .needs_state = sgd_needs_state,
};

dt_status dt_optim_sgd_create(dt_module *root, const dt_sgd_params *p, dt_optim **out)
{
    dt_optim_hparams h = {
        .lr = DT_PARAM_VALUE(p, lr, DT_SGD_PARAM_FIELD_LR, 0.01),
        .momentum = DT_PARAM_VALUE(p, momentum, DT_SGD_PARAM_FIELD_MOMENTUM, 0.0),
        .weight_decay = DT_PARAM_VALUE(p, weight_decay, DT_SGD_PARAM_FIELD_WEIGHT_DECAY, 0.0),
    };
    if (!(h.lr >= 0.0) || !(h.momentum >= 0.0) || !(h.weight_decay >= 0.0))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_optim_sgd_create: lr %g, momentum %g, weight_decay %g must be >= 0", h.lr,
                      h.momentum, h.weight_decay);
    return dt__optim_create(root, &dt__optim_sgd, &h, out);
}
