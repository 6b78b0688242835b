/*
 * The data-parallel side of train_gpt: --data-parallel ddp|zero1|zero2|zero3
 * over the mesh's "dp" dim (default zero2), each dp rank's rows of the global
 * batch, the loss of the global batch, and --memory-report.
 */
#ifndef TRAIN_GPT_DATA_PARALLEL_H
#define TRAIN_GPT_DATA_PARALLEL_H

#include "parallel.h"

/*
 * After tensor parallelism: when the mesh has a "dp" dim, make @p model data
 * parallel over it with @p style (NULL: zero2, or nothing when dp has size 1),
 * each rank's gradient weighted
 * by its share of the global batch @p batch. A style without a dp dim (or
 * without a mesh) is an error naming it.
 */
dt_status train_dp_apply(train_parallel *p, const char *style, bool cpu_offload,
                         dt_dtype reduce_dtype, dt_dtype param_dtype, int64_t batch,
                         dt_module *model);

/* "dp" when the mesh has a dp dim, else NULL: the dp_dim argument of
 * dt_dp_rows and dt_dp_mean_loss (NULL: the whole batch on every rank). */
const char *train_dp_dim(const train_parallel *p);

/* Collective: with @p table one row per rank (current and peak MiB by
 * category, host and device apart), else one line with the largest peak;
 * rank 0 prints to @p f. */
dt_status train_dp_memory_report(const train_parallel *p, bool table, FILE *f);

#endif
