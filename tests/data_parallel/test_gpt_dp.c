/*
 * The reference GPT trained with data parallelism (DDP, ZeRO-1, ZeRO-2,
 * ZeRO-3), SGD and AdamW, gives the loss of the global batch at every step and
 * the final full weights of the single-rank run (within 1e-5 relative, norm-wise
 * per model; per parameter 1e-5 under SGD, 1e-4 under AdamW, whose first steps
 * turn rounding noise in near-zero gradients into visible steps: see
 * tests/styles/test_gpt_tp.c). Every rank runs the single-rank reference
 * itself. The mesh follows the world: 2 ranks dp=2; 3 ranks dp=3 (uneven dp
 * shards: 64 rows -> 22, 22, 20); 4 ranks dp=2 x tp=2 (tensor parallelism
 * with the spec's plan, then data parallelism over the other dim; under ZeRO
 * every parameter, the colwise biases too, is sharded over dp). One case
 * takes uneven local batches (5 rows over dp) with grad_scale = rows / B.
 */
#include "dp_util.h"

#define STEPS   5
#define BATCH   6
#define SEQ     16
#define REL_TOL 1e-5

static dt_token_data *data;
static dt_gpt_config cfg;
static dt_module *ref[2];
static size_t bucket_bytes; /* 0: the default */
static double ref_loss[2][STEPS];

static int setup(void **state)
{
    return mr_setup_gpt(state, SEQ, &data, &cfg);
}

static int teardown(void **state)
{
    for (int i = 0; i < 2; i++)
        dt_module_destroy(ref[i]);
    dt_token_data_close(data);
    return mr_teardown(state);
}

static dt_mesh *dp_tp_mesh(void)
{
    int w = dt_runtime_size(mr_rt);
    return mr_dp_tp_mesh(w == 4 ? 2 : w, w == 4 ? 2 : 1);
}

static dt_module *reference(mr_optim which, int64_t batch, double clip, double *loss)
{
    dt_module *m = NULL;
    dp_run run = {.stage = -1, .clip = clip};
    mr_gpt_create(&cfg, 1234, &m);
    dp_train(m, &run, which, data, STEPS, batch, SEQ, loss);
    return m;
}

/* ZeRO: every parameter is a shard over dp (a colwise bias, which tp already
 * shards on its only dim, as a strided shard _S(0)), so each rank holds
 * 1/(dp*tp) of the model up to torch.chunk rounding. */
static dt_status expect_dp_shard(const char *fqn, dt_module *o, const char *n, dt_tensor *p,
                                 void *u)
{
    (void)o, (void)n, (void)u;
    char pl[64];
    assert_true(dt_tensor_is_distributed(p));
    dt_placements_format(dt_mesh_ndim(dt_tensor_mesh(p)), dt_tensor_placements(p), ",", pl,
                         sizeof(pl));
    if (dt_tensor_placements(p)[0].kind != DT_PLACEMENT_SHARD)
        fail_msg("%s is %s: replicated over dp", fqn, pl);
    return DT_OK;
}

static void check_zero_shards(dt_module *m, const dt_mesh *mesh)
{
    DP_OK(dt_module_foreach_param(m, expect_dp_shard, NULL));
    int64_t full = 4 * dt_module_param_numel(m), local = dt_module_param_bytes_local(m);
    int64_t world = dt_mesh_size(mesh);
    if (local * world > full + full / 10) /* uneven chunks: at most 10% over */
        fail_msg("a rank holds %lld of %lld parameter bytes over %lld ranks", (long long)local,
                 (long long)full, (long long)world);
}

static void run_case(dt_dp_stage stage, mr_optim which, int64_t batch, double clip)
{
    double rl_uneven[STEPS], *rl = ref_loss[which];
    dt_module *r = NULL;
    if (batch == BATCH && clip == 0.0) {
        if (ref[which] == NULL)
            ref[which] = reference(which, BATCH, 0.0, ref_loss[which]);
        r = ref[which];
    } else {
        r = reference(which, batch, clip, rl_uneven);
        rl = rl_uneven;
    }
    dt_mesh *mesh = dp_tp_mesh();
    int R = dt_mesh_dim_size(mesh, 0), dpr = 0, coord[2];
    dt_mesh_coordinate(mesh, coord);
    dpr = coord[0];
    dt_fsdp_params fp = {0};
    if (batch % R != 0) { /* uneven local batches: weight by the local rows */
        fp.field_mask = DT_FSDP_PARAM_FIELD_GRAD_SCALE;
        fp.grad_scale = (double)((dpr + 1) * batch / R - dpr * batch / R) / (double)batch;
    }
    if (bucket_bytes > 0) {
        fp.field_mask |= DT_FSDP_PARAM_FIELD_BUCKET_BYTES;
        fp.bucket_bytes = bucket_bytes;
    }
    dp_run run = {.mesh = mesh, .stage = (int)stage, .fsdp = &fp, .clip = clip};
    dt_module *m = NULL;
    double loss[STEPS];
    mr_gpt_create(&cfg, 1234, &m);
    dp_parallelize(m, &run);
    if (stage != DT_DP_DDP)
        check_zero_shards(m, mesh);
    dp_train(m, &run, which, data, STEPS, batch, SEQ, loss);
    mr_cmp c = mr_compare_weights(m, r, 0.0);
    char what[64];
    snprintf(what, sizeof(what), "dp=%d tp=%d %s %s B=%d clip %g", R, dt_mesh_dim_size(mesh, 1),
             dt_dp_stage_name(stage), which == MR_SGD ? "sgd" : "adamw", (int)batch, clip);
    print_message(
        "%s: final loss %.6f (single %.6f); weights rel %.3g, worst parameter %.3g (%s)\n", what,
        loss[STEPS - 1], rl[STEPS - 1], c.rel, c.worst, c.worst_fqn);
    mr_expect_same_run(what, loss, rl, STEPS, &c, REL_TOL,
                       which == MR_SGD ? REL_TOL : 10 * REL_TOL);
    dt_module_destroy(m);
    dt_mesh_release(mesh);
    if (r != ref[which])
        dt_module_destroy(r);
}

#define CASE(name, stage, opt, batch, clip)                                                        \
    static void name(void **state)                                                                 \
    {                                                                                              \
        (void)state;                                                                               \
        run_case(stage, opt, batch, clip);                                                         \
    }
CASE(test_ddp_sgd, DT_DP_DDP, MR_SGD, BATCH, 0.0)
CASE(test_ddp_adamw, DT_DP_DDP, MR_ADAMW, BATCH, 0.0)
CASE(test_zero1_sgd, DT_DP_ZERO1, MR_SGD, BATCH, 0.0)
CASE(test_zero1_adamw, DT_DP_ZERO1, MR_ADAMW, BATCH, 0.0)
CASE(test_zero2_sgd, DT_DP_ZERO2, MR_SGD, BATCH, 0.0)
CASE(test_zero2_adamw, DT_DP_ZERO2, MR_ADAMW, BATCH, 0.0)
CASE(test_zero3_sgd, DT_DP_ZERO3, MR_SGD, BATCH, 0.0)
CASE(test_zero3_adamw, DT_DP_ZERO3, MR_ADAMW, BATCH, 0.0)
CASE(test_zero3_uneven_batch, DT_DP_ZERO3, MR_SGD, 5, 0.0)
CASE(test_ddp_uneven_batch, DT_DP_DDP, MR_SGD, 5, 0.0)
/* clipping by the global norm over shards (dp x tp): 0.5 clips every step here */
CASE(test_zero3_clip, DT_DP_ZERO3, MR_ADAMW, BATCH, 0.5)
CASE(test_ddp_clip, DT_DP_DDP, MR_SGD, BATCH, 0.5)

/* DDP with 16 KiB buckets: many all-reduces posted while backward goes on */
static void test_ddp_small_buckets(void **state)
{
    (void)state;
    bucket_bytes = 16 << 10;
    run_case(DT_DP_DDP, MR_ADAMW, BATCH, 0.0);
    bucket_bytes = 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ddp_sgd),
        cmocka_unit_test(test_ddp_adamw),
        cmocka_unit_test(test_zero1_sgd),
        cmocka_unit_test(test_zero1_adamw),
        cmocka_unit_test(test_zero2_sgd),
        cmocka_unit_test(test_zero2_adamw),
        cmocka_unit_test(test_zero3_sgd),
        cmocka_unit_test(test_zero3_adamw),
        cmocka_unit_test(test_zero3_uneven_batch),
        cmocka_unit_test(test_ddp_uneven_batch),
        cmocka_unit_test(test_zero3_clip),
        cmocka_unit_test(test_ddp_clip),
        cmocka_unit_test(test_ddp_small_buckets),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
