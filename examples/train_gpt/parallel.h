/*
 * The parallel side of train_gpt: start-up (dt_init), the mesh of --mesh,
 * the plan (--plan FILE or the spec's default, --sequence-parallel),
 * parallelizing the model, and per-rank reports. The training loop itself
 * does not change: parallel styles only change parameter placements.
 */
#ifndef TRAIN_GPT_PARALLEL_H
#define TRAIN_GPT_PARALLEL_H

#include <stdbool.h>
#include <stdio.h>

#include <dtensor.h>

/* Propagate a failure without printing: main() reports it once (DT_TRY_RETURN
 * would print a line at every function on the way up). */
#define CHECK(call)                                                                                \
    do {                                                                                           \
        dt_status check_s_ = (call);                                                               \
        if (check_s_ != DT_OK)                                                                     \
            return check_s_;                                                                       \
    } while (0)

typedef struct train_parallel {
    dt_runtime *rt;
    dt_mesh *mesh;    /* NULL when not parallelized */
    dt_device device; /* of the model, its optimizer state and the batches */
    int rank, world, tp;
    bool data_parallel; /* dt_fully_shard applied (dt_dp_set_gradient_sync works) */
} train_parallel;

/*
 * dt_init (the launcher's environment: dtrun, torchrun-style variables, or
 * one process). Ranks other than 0 send stdout to /dev/null: rank 0 prints
 * the run, every rank's memory is gathered to it.
 */
dt_status train_parallel_init(train_parallel *p);

/*
 * Parse @p mesh_text ("tp=2", "dp=1,tp=4"; NULL: "tp=<world>" when the world
 * has more than one rank, else nothing to do), create the mesh, the plan
 * (dt_plan_load(@p plan_path) or dt_plan_gpt_default(@p sp)) and
 * parallelize @p model over the mesh dim "tp". A dim other than tp must have
 * size 1 (data parallelism is not available here). With @p explain rank 0
 * prints dt_plan_explain first. Errors name the bad value.
 */
dt_status train_parallel_apply(train_parallel *p, const char *mesh_text, bool sp,
                               const char *plan_path, bool explain, dt_module *model);

/* The sizes of the "dp" (1 and *has_dp false when absent) and "tp" dims of
 * @p mesh_text (NULL: tp=<world>), without creating anything. */
dt_status train_mesh_dims(const train_parallel *p, const char *mesh_text, int *dp, bool *has_dp,
                          int *tp);

/* Barrier, then release the mesh and the runtime. */
void train_parallel_destroy(train_parallel *p);

#endif
