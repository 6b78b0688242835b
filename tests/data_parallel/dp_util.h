/* Helpers of the data-parallel tests: the GPT trained by a single rank or on
 * a (dp, tp) mesh, and the comparison of the final full weights. */
#ifndef DT_TEST_DP_UTIL_H
#define DT_TEST_DP_UTIL_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dtensor.h"

#define DP_OK(call)                                                                                \
    do {                                                                                           \
        dt_status dp_s_ = (call);                                                                  \
        if (dp_s_ != DT_OK)                                                                        \
            fail_msg("%s -> %s: %s", #call, dt_status_str(dp_s_), dt_last_error());                \
    } while (0)

typedef enum dp_optim { DP_SGD, DP_ADAMW } dp_optim;

/* A run on a (dp, tp) mesh, or single-rank when mesh is NULL. */
typedef struct dp_run {
    dt_mesh *mesh;        /* (dp, tp) */
    int stage;            /* dt_dp_stage, -1: no data parallelism */
    dt_fsdp_params *fsdp; /* extra options (stage is set from .stage) */
    double clip;          /* > 0: dt_clip_grad_norm to this norm at every step */
    dt_memory_stats end;  /* after the last step, optimizer and gradients alive */
} dp_run;

static inline double dp_loss_value(dt_tensor *loss)
{
    double v = 0.0;
    DP_OK(dt_tensor_item(dt_tensor_is_distributed(loss) ? dt_to_local(loss) : loss, &v));
    return v;
}

/* Parallelize @p model for @p run (tp plan on "tp" when tp > 1, then dp). */
static inline void dp_parallelize(dt_module *model, dp_run *run)
{
    if (run->mesh == NULL)
        return;
    int tpd = 0;
    DP_OK(dt_mesh_dim_index(run->mesh, "tp", &tpd));
    if (dt_mesh_dim_size(run->mesh, tpd) > 1) {
        dt_plan *plan = NULL;
        DP_OK(dt_plan_gpt_default(false, &plan));
        DP_OK(dt_parallelize_module(model, run->mesh, plan, "tp"));
        dt_plan_destroy(plan);
    }
    if (run->stage >= 0) {
        dt_fsdp_params p = {0};
        if (run->fsdp != NULL)
            p = *run->fsdp;
        p.field_mask |= DT_FSDP_PARAM_FIELD_STAGE;
        p.stage = (dt_dp_stage)run->stage;
        DP_OK(dt_fully_shard(model, run->mesh, "dp", &p));
    }
}

/*
 * Train @p steps steps with global batch @p batch; dp rank r takes rows
 * [r*B/R, (r+1)*B/R) and losses[s] gets the loss of the global batch (the
 * local means weighted by the local rows, summed over dp).
 */
static inline void dp_train(dt_module *model, dp_run *run, dp_optim which,
                            const dt_token_data *data, int steps, int64_t batch, int64_t seq,
                            double *losses)
{
    int R = 1, r = 0;
    dt_comm *dpc = NULL;
    if (run->mesh != NULL) {
        int d = 0;
        DP_OK(dt_mesh_dim_index(run->mesh, "dp", &d));
        dpc = dt_mesh_dim_comm(run->mesh, d);
        R = dt_comm_size(dpc), r = dt_comm_rank(dpc);
    }
    int64_t lo = r * batch / R, hi = (r + 1) * batch / R;
    dt_optim *opt = NULL;
    if (which == DP_SGD) {
        dt_sgd_params p = {.field_mask = DT_SGD_PARAM_FIELD_LR, .lr = 0.5};
        DP_OK(dt_optim_sgd_create(model, &p, &opt));
    } else {
        dt_adamw_params p = {.field_mask = DT_ADAMW_PARAM_FIELD_LR, .lr = 3e-3};
        DP_OK(dt_optim_adamw_create(model, &p, &opt));
    }
    for (int s = 0; s < steps; s++) {
        dt_tensor *x = NULL, *y = NULL, *logits = NULL, *loss = NULL;
        dt_optim_zero_grad(opt);
        DP_OK(dt_token_data_batch(data, s, batch, seq, lo, hi, &x, &y));
        DP_OK(dt_module_call(model, x, &logits));
        DP_OK(dt_nn_cross_entropy(logits, y, &loss));
        dt_tensor_release(logits);
        double l = dp_loss_value(loss) * (double)(hi - lo) / (double)batch;
        if (dpc != NULL)
            DP_OK(dt_comm_allreduce(dpc, &l, &l, 1, DT_DTYPE_F64, DT_REDUCE_OP_SUM, NULL));
        losses[s] = l;
        DP_OK(dt_backward(loss, NULL));
        if (run->clip > 0.0)
            DP_OK(dt_clip_grad_norm(model, run->clip, NULL));
        DP_OK(dt_optim_step(opt));
        dt_tensor_release(loss);
        dt_tensor_release(x);
        dt_tensor_release(y);
    }
    DP_OK(dt_memory_stats_get(dt_device_cpu(), &run->end));
    dt_optim_destroy(opt);
}

/* The parameter of @p root at @p fqn. */
static inline dt_tensor *dp_param_at(dt_module *root, const char *fqn)
{
    char mod[256];
    const char *dot = strrchr(fqn, '.');
    snprintf(mod, sizeof(mod), "%.*s", dot != NULL ? (int)(dot - fqn) : 0, fqn);
    dt_module *m = NULL;
    DP_OK(dt_module_find(root, mod, &m));
    return dt_module_param(m, dot != NULL ? dot + 1 : fqn);
}

typedef struct dp_cmp {
    dt_module *ref;
    double diff2, norm2, worst;
    char worst_fqn[128];
} dp_cmp;

/* attention.wk.bias has an exactly zero true gradient (softmax ignores a
 * constant added to every key): both runs only move it by rounding noise. */
static inline bool dp_zero_grad_param(const char *fqn)
{
    size_t n = strlen(fqn), k = strlen("attention.wk.bias");
    return n >= k && strcmp(fqn + n - k, "attention.wk.bias") == 0;
}

/* Norm-wise relative error of each full parameter against the reference. */
static inline dt_status dp_cmp_param(const char *fqn, dt_module *owner, const char *name,
                                     dt_tensor *p, void *user)
{
    (void)owner, (void)name;
    dp_cmp *c = user;
    dt_tensor *full = NULL;
    if (dt_tensor_is_distributed(p))
        DP_OK(dt_full_tensor(p, &full));
    else
        full = dt_tensor_retain(p);
    dt_tensor *r = dp_param_at(c->ref, fqn);
    assert_int_equal(dt_tensor_numel(full), dt_tensor_numel(r));
    assert_int_equal(dt_tensor_ndim(full), dt_tensor_ndim(r));
    const float *a = dt_tensor_data(full), *b = dt_tensor_data(r);
    double diff = 0.0, norm = 0.0;
    for (int64_t i = 0; i < dt_tensor_numel(r); i++) {
        double d = (double)a[i] - (double)b[i];
        diff += d * d;
        norm += (double)b[i] * (double)b[i];
    }
    double rel = norm > 0.0 ? sqrt(diff / norm) : sqrt(diff);
    c->diff2 += diff;
    c->norm2 += norm;
    if (!dp_zero_grad_param(fqn) && rel > c->worst) {
        c->worst = rel;
        snprintf(c->worst_fqn, sizeof(c->worst_fqn), "%s", fqn);
    }
    dt_tensor_release(full);
    return DT_OK;
}

#endif
