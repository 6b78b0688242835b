/* train_gpt's data parallelism and memory report (see data_parallel.h). */
#include <inttypes.h>

#include "data_parallel.h"

const char *train_dp_dim(const train_parallel *p)
{
    int d = -1;
    if (p->mesh == NULL || dt_mesh_dim_index(p->mesh, "dp", &d) != DT_OK)
        return NULL;
    return "dp";
}

/* The dp comm of the mesh, or NULL when there is no mesh or no "dp" dim. */
static dt_comm *dp_comm(const train_parallel *p)
{
    int d = -1;
    if (p->mesh == NULL || dt_mesh_dim_index(p->mesh, "dp", &d) != DT_OK)
        return NULL;
    return dt_mesh_dim_comm(p->mesh, d);
}

dt_status train_dp_apply(train_parallel *p, const char *style, bool cpu_offload,
                         dt_dtype reduce_dtype, dt_dtype param_dtype, int64_t batch,
                         dt_module *model)
{
    dt_comm *c = dp_comm(p);
    if (c == NULL) {
        if (style != NULL)
            return dt_set_error(DT_ERR_INVALID_ARG,
                                "train_gpt: --data-parallel %s needs a 'dp' dim in --mesh "
                                "(e.g. dp=2,tp=2)",
                                style);
        return DT_OK;
    }
    if (style == NULL && dt_comm_size(c) == 1)
        return DT_OK; /* dp=1 and nothing asked: plain tensor parallelism */
    dt_fsdp_params fp = {.field_mask = DT_FSDP_PARAM_FIELD_STAGE | DT_FSDP_PARAM_FIELD_GRAD_SCALE |
                                       DT_FSDP_PARAM_FIELD_CPU_OFFLOAD |
                                       DT_FSDP_PARAM_FIELD_REDUCE_DTYPE |
                                       DT_FSDP_PARAM_FIELD_PARAM_DTYPE,
                         .cpu_offload = cpu_offload,
                         .reduce_dtype = reduce_dtype,
                         .param_dtype = param_dtype};
    CHECK(dt_dp_stage_parse(style != NULL ? style : "zero2", &fp.stage));
    int64_t lo = 0, hi = 0;
    CHECK(dt_dp_rows(p->mesh, "dp", batch, &lo, &hi));
    if (hi <= lo)
        return dt_set_error(DT_ERR_INVALID_ARG,
                            "train_gpt: --batch %" PRId64 " leaves dp rank %d of %d without rows",
                            batch, dt_comm_rank(c), dt_comm_size(c));
    fp.grad_scale = (double)(hi - lo) / (double)batch; /* the mean over the global batch */
    CHECK(dt_fully_shard(model, p->mesh, "dp", &fp));
    p->data_parallel = true;
    printf("data parallel: %s over dp=%d (rows %" PRId64 "..%" PRId64 " of %" PRId64
           " on rank 0)%s%s%s\n",
           dt_dp_stage_name(fp.stage), dt_comm_size(c), lo, hi, batch,
           param_dtype == DT_DTYPE_BF16 ? ", parameters gathered in bf16" : "",
           reduce_dtype == DT_DTYPE_BF16 ? ", gradients reduced in bf16" : "",
           cpu_offload ? ", master weights and optimizer offloaded to the host" : "");
    return DT_OK;
}

/* The largest total peak over the ranks of @p world on @p device. */
static dt_status max_peak(dt_comm *world, dt_device device, int64_t *out)
{
    dt_memory_stats ms;
    CHECK(dt_memory_stats_get(device, &ms));
    *out = ms.total_peak;
    if (world == NULL)
        return DT_OK;
    return dt_comm_allreduce(world, out, out, 1, DT_DTYPE_I64, DT_REDUCE_OP_MAX, NULL);
}

dt_status train_dp_memory_report(const train_parallel *p, bool table, FILE *f)
{
    dt_comm *world = p->rt != NULL ? dt_runtime_world(p->rt) : NULL;
    if (table)
        return dt_memory_report(world, "memory report per rank", f, NULL);
    int64_t host = 0, dev = 0;
    CHECK(max_peak(world, dt_device_cpu(), &host));
    if (p->device.type != DT_DEVICE_CPU)
        CHECK(max_peak(world, p->device, &dev));
    if (p->rank != 0)
        return DT_OK;
    fprintf(f, "peak memory per rank: host %.2f MiB", (double)host / 1048576.0);
    if (p->device.type != DT_DEVICE_CPU)
        fprintf(f, ", %s %.2f MiB", dt_device_type_name(p->device.type), (double)dev / 1048576.0);
    fprintf(f, " (the largest rank's; --memory-report shows each)\n");
    return DT_OK;
}
