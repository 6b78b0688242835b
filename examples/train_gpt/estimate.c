/* train_gpt's memory estimate and its comparison with the run (estimate.h). */
#include <stdlib.h>
#include <string.h>

#include "estimate.h"

dt_status train_estimate(const train_parallel *p, const train_args *a, const dt_gpt_config *cfg,
                         int64_t seq, dt_memory_estimate *out)
{
    dt_memory_estimate_config c = {.gpt = *cfg,
                                   .sequence_parallel = a->sequence_parallel,
                                   .cpu_offload = a->cpu_offload,
                                   .optim = a->optim,
                                   .momentum = a->momentum,
                                   .batch = a->batch,
                                   .seq = seq,
                                   .eager_init = a->eager_init,
                                   .activation_checkpointing = a->activation_checkpointing};
    bool has_dp = false;
    CHECK(train_mesh_dims(p, a->mesh, &c.dp, &has_dp, &c.tp));
    /* as train_dp_apply: a dp dim makes the model data parallel unless dp=1 and no style */
    c.data_parallel = has_dp && (a->data_parallel != NULL || c.dp > 1);
    c.stage = DT_DP_ZERO2;
    if (c.data_parallel && a->data_parallel != NULL)
        CHECK(dt_dp_stage_parse(a->data_parallel, &c.stage));
    return dt_gpt_memory_estimate(&c, out);
}

void train_estimate_print(const train_parallel *p, const dt_memory_estimate *e, FILE *f)
{
    dt_memory_stats now;
    if (p->rank != 0 || dt_memory_stats_get(dt_device_cpu(), &now) != DT_OK)
        return;
    fprintf(f, "memory estimate per rank (%lld tensor bytes allocated so far)\n",
            (long long)now.total_peak);
    dt_memory_estimate_print(e, NULL, f);
}

dt_status train_estimate_compare(const train_parallel *p, const dt_memory_estimate *e, FILE *f)
{
    dt_comm *world = p->rt != NULL ? dt_runtime_world(p->rt) : NULL;
    int n = world != NULL ? dt_comm_size(world) : 1;
    dt_memory_stats *rows = calloc((size_t)n, sizeof(*rows));
    if (rows == NULL)
        return dt_set_error(DT_ERR_NO_MEMORY, "train_gpt: no memory for %d rows", n);
    dt_status s = dt_memory_report(world, NULL, NULL, rows); /* gathers, prints nothing */
    if (s == DT_OK && p->rank == 0) {
        int big = 0;
        for (int r = 1; r < n; r++)
            big = rows[r].total_peak > rows[big].total_peak ? r : big;
        fprintf(f, "memory estimate vs measured (rank %d, the largest peak)\n", big);
        dt_memory_estimate_print(e, &rows[big], f);
        for (int r = 0; r < n; r++)
            fprintf(f, "rank %d: peak %.2f MiB, %.3f x the estimate\n", r,
                    (double)rows[r].total_peak / 1048576.0,
                    (double)rows[r].total_peak / (double)e->total_peak);
        fflush(f);
    }
    free(rows);
    return s;
}
