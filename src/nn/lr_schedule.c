/*
 * Learning-rate schedules (nn.h): linear warm-up from 0, then constant,
 * linear or cosine decay to a floor, as the GPT recipes and Hugging Face's
 * get_{linear,cosine}_schedule_with_warmup compute them, so a run can be
 * compared with a PyTorch one step for step.
 */
#include <math.h>

#include "core/error.h"
#include "dtensor/nn.h"

typedef struct schedule {
    dt_lr_schedule_kind kind;
    int64_t warmup, total;
    double floor; /* fraction of the base lr */
} schedule;

static dt_status read_params(const char *fn, const dt_lr_schedule_params *p, schedule *s)
{
    s->kind = DT_PARAM_VALUE(p, kind, DT_LR_SCHEDULE_PARAM_FIELD_KIND, DT_LR_COSINE);
    s->warmup = DT_PARAM_VALUE(p, warmup_steps, DT_LR_SCHEDULE_PARAM_FIELD_WARMUP_STEPS, 0);
    s->total = DT_PARAM_VALUE(p, total_steps, DT_LR_SCHEDULE_PARAM_FIELD_TOTAL_STEPS, 0);
    s->floor = DT_PARAM_VALUE(p, min_lr_ratio, DT_LR_SCHEDULE_PARAM_FIELD_MIN_LR_RATIO, 0.0);
    if ((int)s->kind < 0 || s->kind > DT_LR_COSINE)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: kind %d is not constant, linear or cosine", fn,
                      (int)s->kind);
    if (s->warmup < 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: warmup_steps %lld < 0", fn, (long long)s->warmup);
    if (s->kind != DT_LR_CONSTANT && s->total <= s->warmup)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: total_steps %lld must exceed warmup_steps %lld for a decay", fn,
                      (long long)s->total, (long long)s->warmup);
    if (!(s->floor >= 0.0 && s->floor <= 1.0))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: min_lr_ratio %g is not in [0, 1]", fn, s->floor);
    return DT_OK;
}

/* The multiplier of the base lr at @p step (from 0). */
static double factor(const schedule *s, int64_t step)
{
    if (step < s->warmup)
        return (double)step / (double)s->warmup;
    if (s->kind == DT_LR_CONSTANT)
        return 1.0;
    double progress = (double)(step - s->warmup) / (double)(s->total - s->warmup);
    progress = progress > 1.0 ? 1.0 : progress;
    double decay = s->kind == DT_LR_LINEAR ? 1.0 - progress : 0.5 * (1.0 + cos(M_PI * progress));
    return s->floor + (1.0 - s->floor) * decay;
}

dt_status dt_lr_schedule_value(const dt_lr_schedule_params *p, double base_lr, int64_t step,
                               double *lr)
{
    DT_ARG_NOT_NULL(lr);
    schedule s;
    DT_CHECK(read_params(__func__, p, &s));
    if (!(base_lr >= 0.0) || !isfinite(base_lr))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: base_lr %g is not a finite lr >= 0", __func__,
                      base_lr);
    if (step < 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: step %lld < 0", __func__, (long long)step);
    *lr = base_lr * factor(&s, step);
    return DT_OK;
}

dt_status dt_optim_schedule(dt_optim *o, const dt_lr_schedule_params *p, double base_lr)
{
    DT_ARG_NOT_NULL(o);
    double lr = 0.0;
    DT_CHECK(dt_lr_schedule_value(p, base_lr, dt_optim_step_count(o), &lr));
    dt_optim_set_lr(o, lr);
    return DT_OK;
}
