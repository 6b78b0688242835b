/*
 * Activation checkpointing (dt_module_checkpoint_matching) under every kind
 * of parallelism: the same model trained with and without checkpointed
 * modules, in one process, gives bit-identical losses, gradients (the last
 * step's, every rank's local shards) and weights. 1 rank: blocks, their
 * attention and MLP, and nested marks. 2 ranks: tp=2, tp=2 with sequence
 * parallelism, dp=2 DDP and ZeRO-3. 3 ranks: tp=3, dp=3 ZeRO-2 (uneven
 * shards). 4 ranks: dp=2 x tp=2 with DDP and ZeRO-1/2/3, sequence
 * parallelism with ZeRO-3, and tp=4. The checkpointed run's peak activation
 * bytes must be below the plain run's. Dropout inside a checkpointed module
 * (1 to 4 ranks, tp over all of them) gives the plain run's gradients: the
 * recompute replays the forward random stream.
 */
#include "dp_util.h"

#define STEPS 3
#define BATCH 8
#define SEQ   16

static dt_token_data *data;
static dt_gpt_config cfg;

/* the tiny preset with 12 heads (tp 2, 3 and 4 hold whole heads) and 4
 * blocks, so that the blocks' activations dominate */
static int setup(void **state)
{
    int rc = mr_setup_gpt(state, SEQ, &data, &cfg);
    cfg.dim = 48;
    cfg.n_heads = 12;
    cfg.ffn_dim = 96;
    cfg.n_layers = 4;
    return rc;
}

static int teardown(void **state)
{
    dt_token_data_close(data);
    return mr_teardown(state);
}

/* tp (the default plan, sequence parallel or not), then dp at @p stage (-1: none) */
static void parallelize(dt_module *m, dt_mesh *mesh, bool sp, int stage)
{
    if (mesh == NULL)
        return;
    if (dt_mesh_dim_size(mesh, 1) > 1) {
        dt_plan *plan = NULL;
        DP_OK(dt_plan_gpt_default(sp, &plan));
        DP_OK(dt_parallelize_module(m, mesh, plan, "tp"));
        dt_plan_destroy(plan);
    }
    if (stage >= 0) {
        dt_fsdp_params p = {.field_mask = DT_FSDP_PARAM_FIELD_STAGE, .stage = (dt_dp_stage)stage};
        DP_OK(dt_fully_shard(m, mesh, "dp", &p));
    }
}

/* Train a fresh model; @p patterns (NULL-terminated, may be NULL) are checkpointed. */
static dt_module *train(dt_mesh *mesh, bool sp, int stage, const char *const *patterns,
                        double *loss, int64_t *act_peak)
{
    dt_module *m = NULL;
    mr_gpt_create(&cfg, 1234, &m);
    parallelize(m, mesh, sp, stage);
    for (int i = 0; patterns != NULL && patterns[i] != NULL; i++)
        DP_OK(dt_module_checkpoint_matching(m, patterns[i], NULL));
    dt_comm *dpc = NULL;
    if (mesh != NULL && stage >= 0)
        dpc = dt_mesh_dim_comm(mesh, 0);
    dt_memory_stats end;
    dt_memory_reset_peak(dt_runtime_device(mr_rt));
    mr_train(m, MR_ADAMW, dpc, 0.0, data, STEPS, BATCH, SEQ, loss, &end);
    *act_peak = end.peak[DT_MEM_ACTIVATION];
    return m;
}

typedef struct same_ctx {
    dt_module *ref;
    int n;
} same_ctx;

/* Bytes of two tensors' local data (host copies) are equal. */
static void expect_same_bytes(const char *what, const char *fqn, dt_tensor *a, dt_tensor *b)
{
    if (a == NULL || b == NULL) {
        if (a != b)
            fail_msg("%s of %s: one run has none", what, fqn);
        return;
    }
    dt_tensor *ha = mr_host(a), *hb = mr_host(b);
    size_t n = (size_t)dt_tensor_numel(ha) * dt_dtype_size(dt_tensor_dtype(ha));
    assert_int_equal(dt_tensor_numel(ha), dt_tensor_numel(hb));
    if (memcmp(dt_tensor_data(ha), dt_tensor_data(hb), n) != 0)
        fail_msg("%s of %s differs from the plain run's", what, fqn);
    dt_tensor_release(ha);
    dt_tensor_release(hb);
}

static dt_status same_param(const char *fqn, dt_module *owner, const char *name, dt_tensor *p,
                            void *user)
{
    (void)owner, (void)name;
    same_ctx *c = user;
    dt_tensor *r = mr_param_at(c->ref, fqn);
    dt_tensor *pl = dt_tensor_is_distributed(p) ? dt_to_local(p) : p;
    dt_tensor *rl = dt_tensor_is_distributed(r) ? dt_to_local(r) : r;
    expect_same_bytes("gradient", fqn, dt_tensor_grad(p), dt_tensor_grad(r));
    expect_same_bytes("weight", fqn, pl, rl);
    c->n++;
    return DT_OK;
}

static void run_case(const char *what, int dp, int tp, bool sp, int stage,
                     const char *const *patterns)
{
    dt_mesh *mesh = dp * tp > 1 ? mr_dp_tp_mesh(dp, tp) : NULL;
    double lp[STEPS], lc[STEPS];
    int64_t peak_plain = 0, peak_ck = 0;
    dt_module *plain = train(mesh, sp, stage, NULL, lp, &peak_plain);
    dt_module *ck = train(mesh, sp, stage, patterns, lc, &peak_ck);
    for (int s = 0; s < STEPS; s++)
        if (lp[s] != lc[s])
            fail_msg("%s: step %d loss %.9g, plain %.9g", what, s, lc[s], lp[s]);
    same_ctx c = {.ref = plain};
    DP_OK(dt_module_foreach_param(ck, same_param, &c));
    print_message("%s: %d parameters' gradients and weights identical; peak activation "
                  "%lld B checkpointed, %lld B plain\n",
                  what, c.n, (long long)peak_ck, (long long)peak_plain);
    assert_true(peak_ck < peak_plain);
    dt_module_destroy(ck);
    dt_module_destroy(plain);
    dt_mesh_release(mesh);
}

static const char *const blocks[] = {"layers.*", NULL};
static const char *const inner[] = {"layers.*.attention", "layers.*.feed_forward", NULL};
static const char *const nested[] = {"layers.*", "layers.0.attention", NULL};

static int world(void)
{
    return dt_runtime_size(mr_rt);
}

static void test_single_rank(void **state)
{
    (void)state;
    if (world() != 1)
        skip();
    run_case("1 rank, blocks", 1, 1, false, -1, blocks);
    run_case("1 rank, attention and MLP", 1, 1, false, -1, inner);
    run_case("1 rank, nested marks", 1, 1, false, -1, nested);
}

static void test_tensor_parallel(void **state)
{
    (void)state;
    int w = world();
    if (w == 1)
        skip();
    char what[64];
    snprintf(what, sizeof(what), "tp=%d", w);
    run_case(what, 1, w, false, -1, blocks);
    snprintf(what, sizeof(what), "tp=%d, attention and MLP", w);
    run_case(what, 1, w, false, -1, inner);
}

static void test_sequence_parallel(void **state)
{
    (void)state;
    int w = world();
    if (w == 1 || w == 3)
        skip();
    char what[64];
    snprintf(what, sizeof(what), "tp=%d sequence parallel", w);
    run_case(what, 1, w, true, -1, blocks);
    if (w == 4)
        run_case("dp=2 x tp=2 sequence parallel, zero3", 2, 2, true, DT_DP_ZERO3, blocks);
}

static void test_data_parallel(void **state)
{
    (void)state;
    int w = world();
    if (w == 1)
        skip();
    int dp = w == 4 ? 2 : w, tp = w / dp;
    for (int st = DT_DP_DDP; st <= DT_DP_ZERO3; st++) {
        if (w == 2 && st != DT_DP_DDP && st != DT_DP_ZERO3)
            continue;
        if (w == 3 && st != DT_DP_ZERO2)
            continue;
        char what[64];
        snprintf(what, sizeof(what), "dp=%d x tp=%d %s", dp, tp, dt_dp_stage_name(st));
        run_case(what, dp, tp, false, st, blocks);
    }
}

/* A ZeRO-3 unit (a block) strictly inside a checkpointed module ("layers"):
 * its gathers and gradient nodes would run a second time in the recompute,
 * so backward fails on every rank naming the unit; the next step, with the
 * mark moved to the units, trains. */
static void test_zero3_unit_inside(void **state)
{
    (void)state;
    if (world() != 2)
        skip();
    dt_mesh *mesh = mr_dp_tp_mesh(2, 1);
    dt_module *m = NULL;
    mr_gpt_create(&cfg, 1234, &m);
    parallelize(m, mesh, false, DT_DP_ZERO3);
    DP_OK(dt_module_checkpoint_matching(m, "layers", NULL));
    int64_t lo = 0, hi = 0;
    DP_OK(dt_dp_rows(mesh, "dp", BATCH, &lo, &hi));
    dt_tensor *x = NULL, *y = NULL, *logits = NULL, *loss = NULL;
    DP_OK(dt_token_data_batch(data, 0, BATCH, SEQ, lo, hi, &x, &y));
    x = mr_on_device(x);
    y = mr_on_device(y);
    DP_OK(dt_module_call(m, x, &logits));
    DP_OK(dt_nn_cross_entropy(logits, y, &loss));
    dt_status st = dt_backward(loss, NULL);
    assert_int_equal(st, DT_ERR_UNSUPPORTED);
    assert_non_null(strstr(dt_last_error(), "unit 'layers.0'"));
    dt_tensor_release(loss);
    dt_tensor_release(logits);
    DP_OK(dt_module_checkpoint_matching(m, "layers", NULL)); /* still marked: unmark */
    dt_module *layers = NULL;
    DP_OK(dt_module_find(m, "layers", &layers));
    DP_OK(dt_module_checkpoint(layers, false));
    DP_OK(dt_module_checkpoint_matching(m, "layers.*", NULL));
    DP_OK(dt_module_call(m, x, &logits));
    DP_OK(dt_nn_cross_entropy(logits, y, &loss));
    DP_OK(dt_backward(loss, NULL));
    dt_tensor_release(loss);
    dt_tensor_release(logits);
    dt_tensor_release(x);
    dt_tensor_release(y);
    dt_module_destroy(m);
    dt_mesh_release(mesh);
}

/* ---------------------------------------------------------------- dropout */

/* Linear(8,24), a "body" [Linear(24,48), Dropout(0.5), Linear(48,24)] that
 * tp shards colwise/rowwise, Dropout(0.25), Linear(24,4); body checkpointed
 * when @p ck. */
static dt_module *dropout_model(dt_mesh *mesh, bool ck)
{
    dt_module *root = NULL, *body = NULL, *l = NULL;
    dt_nn_manual_seed(77);
    DP_OK(dt_sequential_create(&root));
    DP_OK(dt_linear_create(8, 24, true, &l));
    DP_OK(dt_sequential_append(root, l));
    DP_OK(dt_sequential_create(&body));
    DP_OK(dt_linear_create(24, 48, true, &l));
    DP_OK(dt_sequential_append(body, l));
    DP_OK(dt_dropout_create(0.5, &l));
    DP_OK(dt_sequential_append(body, l));
    DP_OK(dt_linear_create(48, 24, true, &l));
    DP_OK(dt_sequential_append(body, l));
    DP_OK(dt_sequential_append(root, body));
    DP_OK(dt_dropout_create(0.25, &l));
    DP_OK(dt_sequential_append(root, l));
    DP_OK(dt_linear_create(24, 4, true, &l));
    DP_OK(dt_sequential_append(root, l));
    DP_OK(dt_module_to(root, dt_runtime_device(mr_rt)));
    if (mesh != NULL) {
        dt_plan *plan = NULL;
        DP_OK(dt_plan_parse("1.0 = colwise\n1.2 = rowwise\n", &plan));
        DP_OK(dt_parallelize_module(root, mesh, plan, "tp"));
        dt_plan_destroy(plan);
    }
    if (ck)
        DP_OK(dt_module_checkpoint(body, true));
    return root;
}

/* Two forward/backward passes from the same random stream seed; the stream's
 * state after them in @p after. */
static void dropout_run(dt_module *m, dt_rng_state *after)
{
    int64_t shape[2] = {6, 8};
    dt_rng_manual_seed(2024);
    for (int pass = 0; pass < 2; pass++) {
        dt_tensor *x = NULL, *y = NULL, *loss = NULL;
        DP_OK(dt_tensor_empty(2, shape, DT_DTYPE_F32, dt_device_cpu(), &x));
        DP_OK(dt_tensor_fill_uniform(x, -1.0, 1.0, 99 + (uint64_t)pass, NULL, NULL));
        x = mr_on_device(x);
        DP_OK(dt_module_call(m, x, &y));
        DP_OK(dt_sum_all(y, &loss));
        DP_OK(dt_backward(loss, NULL));
        dt_tensor_release(loss);
        dt_tensor_release(y);
        dt_tensor_release(x);
    }
    *after = dt_rng_get_state();
}

/* Dropout inside a checkpointed module: the recompute replays the random
 * stream, so the masks and the gradients are the plain run's, and the
 * stream ends where the plain run's does; under tp the masks of the
 * column-parallel activation are slices of the full one. */
static void test_dropout_replayed(void **state)
{
    (void)state;
    int w = world();
    dt_mesh *mesh = w > 1 ? mr_world_mesh("tp") : NULL;
    dt_module *plain = dropout_model(mesh, false), *ck = dropout_model(mesh, true);
    dt_rng_state sp, sc;
    dropout_run(plain, &sp);
    dropout_run(ck, &sc);
    assert_true(sp.seed == sc.seed && sp.offset == sc.offset);
    assert_int_equal(sp.offset, 4); /* two dropouts, two passes */
    same_ctx c = {.ref = plain};
    DP_OK(dt_module_foreach_param(ck, same_param, &c));
    print_message("tp=%d dropout in a checkpointed module: %d parameters' gradients identical\n", w,
                  c.n);
    dt_module_destroy(ck);
    dt_module_destroy(plain);
    dt_mesh_release(mesh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_rank),       cmocka_unit_test(test_tensor_parallel),
        cmocka_unit_test(test_sequence_parallel), cmocka_unit_test(test_data_parallel),
        cmocka_unit_test(test_zero3_unit_inside), cmocka_unit_test(test_dropout_replayed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
