/*
 * Deferred initialisation (nn.h): a model built without storage, parallelized
 * (tensor parallel plan, then DDP or ZeRO), then materialised, holds on every
 * rank exactly the bytes of the eager path (full model, then the same
 * parallelism), and trains to exactly the same losses and shards. Meshes by
 * world size: 2 ranks tp=2, dp=2 (ZeRO-2, DDP); 3 ranks tp=3 (uneven shards:
 * ffn 80 and vocab 64 over 3), dp=3 ZeRO-3; 4 ranks dp=2 x tp=2 (ZeRO-3,
 * ZeRO-1, DDP). Also: the default init of plain layers (uniform and normal
 * rules) on dp shards; a deferred model refuses to run or to get an optimizer,
 * naming the parameter; on 4 ranks the parameter peak of building the GPT
 * deferred is below half the eager one (about 1/4).
 */
#include "dp_util.h"

#define STEPS 3
#define BATCH 6
#define SEQ   16

static dt_token_data *data;
static dt_gpt_config cfg;

static int setup(void **state)
{
    if (mr_setup_gpt(state, SEQ, &data, &cfg) != 0)
        return -1;
    /* heads and widths that tp 2, 3, 4 divide, with uneven ffn/vocab shards at 3 */
    cfg.dim = 48, cfg.n_heads = 12, cfg.ffn_dim = 80, cfg.vocab_size = 64;
    return 0;
}

static int teardown(void **state)
{
    dt_token_data_close(data);
    return mr_teardown(state);
}

/* The GPT, eager or deferred, moved to the test's device. */
static dt_module *gpt(bool deferred)
{
    dt_module *m = NULL;
    if (deferred)
        dt_nn_deferred_begin();
    dt_status s = dt_gpt_create(&cfg, 1234, &m);
    if (deferred)
        dt_nn_deferred_end();
    DP_OK(s);
    assert_false(dt_nn_deferred_active());
    DP_OK(dt_module_to(m, dt_runtime_device(mr_rt)));
    return m;
}

/* The parameters of a model in the stable order, and their FQNs. */
typedef struct params {
    int n;
    dt_tensor *t[64];
    char fqn[64][96];
} params;

static dt_status collect(const char *fqn, dt_module *o, const char *nm, dt_tensor *t, void *u)
{
    (void)o, (void)nm;
    params *c = u;
    assert_true(c->n < 64);
    c->t[c->n] = t;
    snprintf(c->fqn[c->n], sizeof(c->fqn[0]), "%s", fqn);
    c->n++;
    return DT_OK;
}

/* Every parameter of @p a and @p b: same spec, bit-identical local shard. */
static void expect_same_shards(const char *what, dt_module *a, dt_module *b)
{
    static params pa, pb;
    pa.n = pb.n = 0;
    DP_OK(dt_module_foreach_param(a, collect, &pa));
    DP_OK(dt_module_foreach_param(b, collect, &pb));
    assert_int_equal(pa.n, pb.n);
    for (int i = 0; i < pa.n; i++) {
        bool da = dt_tensor_is_distributed(pa.t[i]);
        assert_int_equal(da, dt_tensor_is_distributed(pb.t[i]));
        if (da && !dt_spec_equal(dt_tensor_spec(pa.t[i]), dt_tensor_spec(pb.t[i])))
            fail_msg("%s: '%s' is placed differently", what, pa.fqn[i]);
        assert_false(dt_param_is_deferred(pa.t[i]) || dt_param_is_deferred(pb.t[i]));
        dt_tensor *la = mr_host(da ? dt_to_local(pa.t[i]) : pa.t[i]);
        dt_tensor *lb = mr_host(da ? dt_to_local(pb.t[i]) : pb.t[i]);
        assert_int_equal(dt_tensor_numel(la), dt_tensor_numel(lb));
        if (memcmp(dt_tensor_data(la), dt_tensor_data(lb), (size_t)dt_tensor_numel(la) * 4) != 0)
            fail_msg("%s: the shards of '%s' differ", what, pa.fqn[i]);
        dt_tensor_release(la), dt_tensor_release(lb);
    }
}

/* A deferred model refuses to run and to get an optimizer, naming the parameter. */
static void expect_refused(dt_module *m)
{
    dt_tensor *x = NULL, *y = NULL, *out = NULL;
    DP_OK(dt_token_data_batch(data, 0, 2, SEQ, 0, 2, &x, &y));
    x = mr_on_device(x);
    assert_int_equal(dt_module_call(m, x, &out), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "'tok_embeddings.weight' is deferred"));
    assert_null(out);
    dt_optim *opt = NULL;
    assert_int_equal(dt_optim_adamw_create(m, NULL, &opt), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "'tok_embeddings.weight' is deferred"));
    dt_module *blk = NULL;
    DP_OK(dt_module_find(m, "layers.1", &blk)); /* a child alone: the FQN from the root */
    assert_int_equal(dt_module_call(blk, x, &out), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "'layers.1.attention_norm.weight' is deferred"));
    dt_tensor_release(x), dt_tensor_release(y);
}

/* Apply tp (when > 1) and dp @p stage (when >= 0) to @p m on @p mesh. */
static void parallelize(dt_module *m, dt_mesh *mesh, int stage)
{
    dp_run run = {.mesh = mesh, .stage = stage};
    dp_parallelize(m, &run);
}

/*
 * Eager and deferred builds on a dp x tp mesh with @p stage: the same shards
 * after materialise, then STEPS steps of AdamW with the same losses (exactly)
 * and the same shards.
 */
static void run_case(int dp, int tp, int stage)
{
    char what[64];
    snprintf(what, sizeof(what), "dp=%d tp=%d %s", dp, tp,
             stage >= 0 ? dt_dp_stage_name(stage) : "-");
    dt_mesh *mesh = mr_dp_tp_mesh(dp, tp);
    dt_module *eager = gpt(false), *lazy = gpt(true);
    assert_int_equal(dt_module_num_deferred(eager), 0);
    assert_int_equal(dt_module_num_deferred(lazy), dt_module_param_count(lazy));
    parallelize(eager, mesh, stage);
    parallelize(lazy, mesh, stage);
    assert_int_equal(dt_module_num_deferred(lazy), dt_module_param_count(lazy));
    expect_refused(lazy);
    DP_OK(dt_module_materialize(lazy));
    assert_int_equal(dt_module_num_deferred(lazy), 0);
    DP_OK(dt_module_materialize(lazy)); /* nothing left: changes nothing */
    expect_same_shards(what, eager, lazy);
    double le[STEPS], ll[STEPS];
    dp_run run = {.mesh = mesh, .stage = stage};
    dp_train(eager, &run, MR_ADAMW, data, STEPS, BATCH, SEQ, le);
    dp_train(lazy, &run, MR_ADAMW, data, STEPS, BATCH, SEQ, ll);
    for (int s = 0; s < STEPS; s++)
        if (le[s] != ll[s])
            fail_msg("%s: step %d loss %.9g (eager) vs %.9g (deferred)", what, s, le[s], ll[s]);
    assert_true(ll[STEPS - 1] < ll[0]);
    expect_same_shards(what, eager, lazy);
    print_message("%s: deferred = eager, losses %.6f .. %.6f\n", what, ll[0], ll[STEPS - 1]);
    dt_module_destroy(eager), dt_module_destroy(lazy);
    dt_mesh_release(mesh);
}

static void test_parallel(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt);
    if (w == 2) {
        run_case(1, 2, -1);
        run_case(2, 1, DT_DP_ZERO2);
        run_case(2, 1, DT_DP_DDP);
    } else if (w == 3) {
        run_case(1, 3, -1);
        run_case(3, 1, DT_DP_ZERO3);
    } else {
        run_case(2, 2, DT_DP_ZERO3);
        run_case(2, 2, DT_DP_ZERO1);
        run_case(2, 2, DT_DP_DDP);
    }
}

/* Plain layers keep their default rules (Linear uniform, Embedding normal,
 * LayerNorm constants) until materialised on ZeRO-3 shards of the world. */
static dt_module *layers(bool deferred)
{
    dt_module *seq = NULL, *x = NULL;
    dt_nn_manual_seed(5);
    if (deferred)
        dt_nn_deferred_begin();
    DP_OK(dt_sequential_create(&seq));
    DP_OK(dt_embedding_create(50, 24, &x));
    DP_OK(dt_sequential_append(seq, x));
    DP_OK(dt_linear_create(24, 37, true, &x));
    DP_OK(dt_sequential_append(seq, x));
    DP_OK(dt_layer_norm_create(37, 1e-5, &x));
    DP_OK(dt_sequential_append(seq, x));
    DP_OK(dt_linear_create(37, 24, true, &x));
    DP_OK(dt_sequential_append(seq, x));
    if (deferred)
        dt_nn_deferred_end();
    DP_OK(dt_module_to(seq, dt_runtime_device(mr_rt)));
    return seq;
}

static void test_default_init(void **state)
{
    (void)state;
    dt_mesh *mesh = mr_dp_tp_mesh(dt_runtime_size(mr_rt), 1);
    dt_module *eager = layers(false), *lazy = layers(true);
    dt_tensor *w = dt_module_param(dt_module_child(lazy, "1"), "weight");
    assert_true(dt_param_is_deferred(w));
    /* dt_param_init cannot fill what has no storage; the slot's rule can be replaced */
    assert_int_equal(dt_param_init(w, "1.weight", 3, 0.5, 0.0), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "'1.weight' is deferred"));
    DP_OK(dt_module_param_init(dt_module_child(lazy, "1"), "weight", "1.weight", 3, 0.5, 0.0));
    DP_OK(dt_module_param_init(dt_module_child(eager, "1"), "weight", "1.weight", 3, 0.5, 0.0));
    parallelize(eager, mesh, DT_DP_ZERO3);
    parallelize(lazy, mesh, DT_DP_ZERO3);
    DP_OK(dt_module_materialize(lazy));
    expect_same_shards("layers zero3", eager, lazy);
    dt_module_destroy(eager), dt_module_destroy(lazy);
    dt_mesh_release(mesh);
}

/* Parameter bytes at the peak of building and sharding the GPT (ZeRO-3 on
 * dp=2 x tp=2), above what was live before. */
static int64_t build_peak(bool deferred, const dt_gpt_config *c, int64_t *full)
{
    dt_memory_stats before, after;
    dt_mesh *mesh = mr_dp_tp_mesh(2, 2);
    DP_OK(dt_memory_stats_get(dt_device_cpu(), &before));
    dt_memory_reset_peak(dt_device_cpu());
    dt_module *m = NULL;
    if (deferred)
        dt_nn_deferred_begin();
    DP_OK(dt_gpt_create(c, 1234, &m));
    if (deferred)
        dt_nn_deferred_end();
    parallelize(m, mesh, DT_DP_ZERO3);
    DP_OK(dt_module_materialize(m)); /* nothing to do for the eager one */
    DP_OK(dt_memory_stats_get(dt_device_cpu(), &after));
    *full = dt_module_param_numel(m) * 4;
    dt_module_destroy(m);
    dt_mesh_release(mesh);
    return after.peak[DT_MEM_PARAMETER] - before.current[DT_MEM_PARAMETER];
}

static void test_memory(void **state)
{
    (void)state;
    if (dt_runtime_size(mr_rt) != 4 || dt_runtime_device(mr_rt).type != DT_DEVICE_CPU)
        skip();
    dt_gpt_config c;
    DP_OK(dt_gpt_config_preset("tiny", &c));
    c.n_layers = 4;
    int64_t full = 0, eager = build_peak(false, &c, &full), lazy = build_peak(true, &c, &full);
    print_message("GPT tiny x4 layers (%lld B): parameter peak eager %lld B, deferred %lld B "
                  "(%.3fx)\n",
                  (long long)full, (long long)eager, (long long)lazy, (double)lazy / (double)eager);
    assert_true(eager >= full);
    assert_true(2 * lazy < eager);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parallel),
        cmocka_unit_test(test_default_init),
        cmocka_unit_test(test_memory),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
