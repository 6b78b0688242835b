/* Helpers of the data-parallel tests: the GPT parallelized and trained by a
 * single rank or on a (dp, tp) mesh (the comparison of the final full weights
 * is common/multirank.h's). */
#ifndef DT_TEST_DP_UTIL_H
#define DT_TEST_DP_UTIL_H

#include "common/multirank.h"

#define DP_OK(call) MR_OK(call)

/* A run on a (dp, tp) mesh, or single-rank when mesh is NULL. */
typedef struct dp_run {
    dt_mesh *mesh;        /* (dp, tp) */
    int stage;            /* dt_dp_stage, -1: no data parallelism */
    dt_fsdp_params *fsdp; /* extra options (stage is set from .stage) */
    double clip;          /* > 0: dt_clip_grad_norm to this norm at every step */
    dt_memory_stats end;  /* after the last step, optimizer and gradients alive */
} dp_run;

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

/* mr_train on @p run's "dp" comm (none without a mesh) with its clipping;
 * run->end gets the memory stats after the last step. */
static inline void dp_train(dt_module *model, dp_run *run, mr_optim which,
                            const dt_token_data *data, int steps, int64_t batch, int64_t seq,
                            double *losses)
{
    dt_comm *dpc = NULL;
    if (run->mesh != NULL) {
        int d = 0;
        DP_OK(dt_mesh_dim_index(run->mesh, "dp", &d));
        dpc = dt_mesh_dim_comm(run->mesh, d);
    }
    mr_train(model, which, dpc, run->clip, data, steps, batch, seq, losses, &run->end);
}

#endif
