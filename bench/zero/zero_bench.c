/*
 * zero_bench: the GPT trained with each data-parallel style on the same
 * (dp, tp) mesh in one run, the styles' steps interleaved (round r runs one
 * step of every style) so they see the same machine load. Prints per style
 * the mean and best step time after warm-up, held parameter / gradient /
 * optimizer MiB, and each style's time relative to DDP.
 *
 *   dtrun -n 4 zero_bench --mesh 2x2 --config small --layers 2 --steps 6
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dtensor.h"

#include "../common/bench_util.h"

#define TRY(call)                                                                                  \
    do {                                                                                           \
        dt_status try_s_ = (call);                                                                 \
        if (try_s_ != DT_OK) {                                                                     \
            fprintf(stderr, "zero_bench: %s: %s\n", dt_status_str(try_s_), dt_last_error());       \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

#define N_STYLES 4

typedef struct bench_style {
    dt_dp_stage stage;
    dt_module *model;
    dt_optim *opt;
    double total, best;
    int64_t held; /* parameter + gradient + optimizer bytes after a step */
} bench_style;

static int64_t held_bytes(void)
{
    dt_memory_stats s;
    if (dt_memory_stats_get(dt_device_cpu(), &s) != DT_OK)
        return -1;
    return s.current[DT_MEM_PARAMETER] + s.current[DT_MEM_GRADIENT] + s.current[DT_MEM_OPTIMIZER];
}

static dt_status one_step(bench_style *b, dt_tensor *x, dt_tensor *y)
{
    dt_tensor *logits = NULL, *loss = NULL;
    dt_optim_zero_grad(b->opt);
    dt_status s = dt_module_call(b->model, x, &logits);
    if (s == DT_OK)
        s = dt_nn_cross_entropy(logits, y, &loss);
    dt_tensor_release(logits);
    if (s == DT_OK)
        s = dt_backward(loss, NULL);
    if (s == DT_OK)
        s = dt_optim_step(b->opt);
    dt_tensor_release(loss);
    return s;
}

int main(int argc, char **argv)
{
    const char *config = "small";
    int dp = 2, tp = 2, steps = 6, layers = 2;
    int64_t batch = 8, seq = 64;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--config") == 0)
            config = argv[i + 1];
        else if (strcmp(argv[i], "--mesh") == 0 && sscanf(argv[i + 1], "%dx%d", &dp, &tp) == 2)
            ;
        else if (strcmp(argv[i], "--steps") == 0)
            steps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--layers") == 0)
            layers = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--batch") == 0)
            batch = atoll(argv[i + 1]);
        else if (strcmp(argv[i], "--seq") == 0)
            seq = atoll(argv[i + 1]);
        else {
            fprintf(stderr,
                    "usage: %s [--mesh DPxTP] [--config tiny|small] [--layers L] "
                    "[--steps S] [--batch B] [--seq T]\n",
                    argv[0]);
            return 2;
        }
    }
    int rc = 1, rank = 0;
    dt_runtime *rt = NULL;
    dt_mesh *mesh = NULL;
    dt_plan *plan = NULL;
    dt_token_data *data = NULL;
    dt_tensor *x = NULL, *y = NULL;
    bench_style st[N_STYLES] = {{.stage = DT_DP_DDP},
                                {.stage = DT_DP_ZERO1},
                                {.stage = DT_DP_ZERO2},
                                {.stage = DT_DP_ZERO3}};
    dt_gpt_config cfg;
    TRY(dt_init(NULL, &rt));
    rank = dt_runtime_rank(rt);
    int shape[2] = {dp, tp};
    const char *names[2] = {"dp", "tp"};
    TRY(dt_mesh_create(rt, 2, shape, names, &mesh));
    TRY(dt_gpt_config_preset(config, &cfg));
    cfg.n_layers = layers;
    if (seq > cfg.max_seq_len)
        seq = cfg.max_seq_len;
    TRY(dt_plan_gpt_default(false, &plan));
    int coord[2];
    dt_mesh_coordinate(mesh, coord);
    int64_t lo = coord[0] * batch / dp, hi = (coord[0] + 1) * batch / dp;
    uint16_t *tok = malloc(sizeof(uint16_t) * 65536);
    for (int i = 0; i < 65536; i++)
        tok[i] = (uint16_t)((7 * i + i / 3) % cfg.vocab_size);
    dt_status ds = dt_token_data_from_buffer(tok, 65536, &data);
    free(tok);
    TRY(ds);
    TRY(dt_token_data_batch(data, 0, batch, seq, lo, hi, &x, &y));
    for (int k = 0; k < N_STYLES; k++) {
        int64_t before = held_bytes();
        dt_fsdp_params fp = {.field_mask = DT_FSDP_PARAM_FIELD_STAGE, .stage = st[k].stage};
        TRY(dt_gpt_create(&cfg, 1234, &st[k].model));
        if (tp > 1)
            TRY(dt_parallelize_module(st[k].model, mesh, plan, "tp"));
        TRY(dt_fully_shard(st[k].model, mesh, "dp", &fp));
        dt_adamw_params ap = {.field_mask = 0};
        TRY(dt_optim_adamw_create(st[k].model, &ap, &st[k].opt));
        TRY(one_step(&st[k], x, y)); /* warm-up: optimizer state, caches */
        st[k].held = held_bytes() - before;
        st[k].best = 1e30;
    }
    for (int s = 0; s < steps; s++)
        for (int k = 0; k < N_STYLES; k++) {
            TRY(dt_comm_barrier(dt_runtime_world(rt), NULL));
            double t0 = now_s();
            TRY(one_step(&st[k], x, y));
            double dt = now_s() - t0;
            TRY(dt_comm_allreduce(dt_runtime_world(rt), &dt, &dt, 1, DT_DTYPE_F64, DT_REDUCE_OP_MAX,
                                  NULL));
            st[k].total += dt;
            if (dt < st[k].best)
                st[k].best = dt;
        }
    if (rank == 0) {
        printf("zero_bench: GPT %s (%d layers, %" PRId64 " parameters) batch %" PRId64
               " x seq %" PRId64 ", AdamW, mesh dp=%d x tp=%d, %d interleaved steps\n",
               config, layers, dt_module_param_numel(st[0].model), batch, seq, dp, tp, steps);
        printf("%-6s %10s %10s %12s %10s\n", "style", "mean ms", "best ms", "P+G+O MiB", "vs ddp");
        for (int k = 0; k < N_STYLES; k++)
            printf("%-6s %10.1f %10.1f %12.2f %10.3f\n", dt_dp_stage_name(st[k].stage),
                   1e3 * st[k].total / steps, 1e3 * st[k].best, st[k].held / 1048576.0,
                   st[k].total / st[0].total);
    }
    rc = 0;
out:
    for (int k = 0; k < N_STYLES; k++) {
        dt_optim_destroy(st[k].opt);
        dt_module_destroy(st[k].model);
    }
    dt_tensor_release(x);
    dt_tensor_release(y);
    dt_token_data_close(data);
    dt_plan_destroy(plan);
    if (rt != NULL)
        dt_comm_barrier(dt_runtime_world(rt), NULL);
    dt_mesh_release(mesh);
    dt_runtime_destroy(rt);
    return rc;
}
