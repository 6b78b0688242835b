/*
 * AdamW with PyTorch's semantics (torch.optim.AdamW, amsgrad off), step t >= 1:
 *   p *= 1 - lr * wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
 *   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
 * The update itself is the device's fused adamw_step kernel.
 */
#include "core/error.h"
#include "kernels/kernel_ops.h"
#include "nn/optim_impl.h"

static dt_status adamw_update(const dt_optim_hparams *h, int64_t step, dt_tensor *p,
                              const dt_tensor *g, dt_tensor *const *state)
{
    const dt_kernel_ops *k = dt__kernels_for(p->device);
    if (k == NULL || k->adamw_step == NULL || !k->supports(DT_KOP_OPTIM, DT_DTYPE_F32))
        return DT_ERR(DT_ERR_UNSUPPORTED, "adamw: the %s device has no adamw_step kernel",
                      dt_device_type_name(p->device.type));
    return k->adamw_step(p, g, state[0], state[1], (float)h->lr, (float)h->beta1, (float)h->beta2,
                         (float)h->eps, (float)h->weight_decay, step);
}

const dt_optim_kind dt__optim_adamw = {
    .name = "adamw",
    .n_states = 2,
    .state_names = {"exp_avg", "exp_avg_sq"},
    .update = adamw_update,
};

dt_status dt_optim_adamw_create(dt_module *root, const dt_adamw_params *p, dt_optim **out)
{
    dt_optim_hparams h = {
        .lr = DT_PARAM_VALUE(p, lr, DT_ADAMW_PARAM_FIELD_LR, 1e-3),
        .beta1 = DT_PARAM_VALUE(p, beta1, DT_ADAMW_PARAM_FIELD_BETA1, 0.9),
        .beta2 = DT_PARAM_VALUE(p, beta2, DT_ADAMW_PARAM_FIELD_BETA2, 0.95),
        .eps = DT_PARAM_VALUE(p, eps, DT_ADAMW_PARAM_FIELD_EPS, 1e-8),
        .weight_decay = DT_PARAM_VALUE(p, weight_decay, DT_ADAMW_PARAM_FIELD_WEIGHT_DECAY, 0.1),
    };
    if (!(h.lr >= 0.0) || !(h.eps >= 0.0) || !(h.weight_decay >= 0.0))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_optim_adamw_create: lr %g, eps %g, weight_decay %g must be >= 0", h.lr,
                      h.eps, h.weight_decay);
    if (!(h.beta1 >= 0.0 && h.beta1 < 1.0) || !(h.beta2 >= 0.0 && h.beta2 < 1.0))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_optim_adamw_create: betas (%g, %g) must lie in [0, 1)", h.beta1, h.beta2);
    return dt__optim_create(root, &dt__optim_adamw, &h, out);
}
