/*
 * The default initialisation of new Linear and Embedding modules (nn.h):
 * PyTorch's distributions (Linear U(-1/sqrt(in), 1/sqrt(in)), Embedding
 * N(0, 1)), the documented seed rule (layers of the same sizes apart, dt_nn_manual_seed),
 * dt_gpt_create's own init still winning, and the same values on 1 rank and under colwise / rowwise
 * plans on 2 and 3 dtrun ranks. The values are fixed by the seed, so the statistical bounds below
 * cannot flake; they are wide (many standard errors) so that they would hold for any seed too.
 */
#include "common/multirank.h"
#include "nn_test_util.h"

/* What the documented rule gives: the full tensor under the stand-in FQN @p key. */
static dt_tensor *by_rule_seeded(int ndim, const int64_t *shape, const char *key, double bound,
                                 uint64_t base)
{
    dt_tensor *t = NULL;
    NN_OK(dt_tensor_empty(ndim, shape, DT_DTYPE_F32, dt_device_cpu(), &t));
    uint64_t seed = dt_param_seed(base, key);
    if (bound > 0.0)
        NN_OK(dt_tensor_fill_uniform(t, -bound, bound, seed, NULL, NULL));
    else
        NN_OK(dt_tensor_fill_normal(t, 0.0, 1.0, seed, NULL, NULL));
    return t;
}

static dt_tensor *by_rule(int ndim, const int64_t *shape, const char *key, double bound)
{
    return by_rule_seeded(ndim, shape, key, bound, DT_NN_DEFAULT_INIT_SEED);
}

static void expect_equal(const char *what, const dt_tensor *got, const dt_tensor *want)
{
    assert_int_equal(dt_tensor_numel(got), dt_tensor_numel(want));
    for (int64_t i = 0; i < dt_tensor_numel(want); i++)
        if (dt_tensor_item_at(got, i) != dt_tensor_item_at(want, i))
            fail_msg("%s: element %lld is %.9g, expected %.9g", what, (long long)i,
                     dt_tensor_item_at(got, i), dt_tensor_item_at(want, i));
}

typedef struct stats {
    double mean, std, max_abs;
} stats;

static stats stats_of(const dt_tensor *t)
{
    int64_t n = dt_tensor_numel(t);
    double s = 0.0, s2 = 0.0, m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double v = dt_tensor_item_at(t, i);
        s += v;
        m = fmax(m, fabs(v));
    }
    double mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) {
        double d = dt_tensor_item_at(t, i) - mean;
        s2 += d * d;
    }
    return (stats){mean, sqrt(s2 / (double)n), m};
}

/* |cosine| of @p a and @p b as vectors: ~1/sqrt(n) for independent draws. */
static double cosine(const dt_tensor *a, const dt_tensor *b)
{
    double dot = 0.0, n1 = 0.0, n2 = 0.0;
    for (int64_t i = 0; i < dt_tensor_numel(a); i++) {
        double x = dt_tensor_item_at(a, i), y = dt_tensor_item_at(b, i);
        dot += x * y, n1 += x * x, n2 += y * y;
    }
    return fabs(dot) / sqrt(n1 * n2);
}

/* Uniform on [-b, b]: every value inside, both ends reached, mean 0, std b/sqrt(3). */
static void expect_uniform(const char *what, const dt_tensor *t, double b, double mean_tol,
                           double std_rtol, double reach)
{
    stats s = stats_of(t);
    if (!(s.max_abs <= b * (1.0 + 1e-7))) /* b itself rounded to f32 */
        fail_msg("%s: |value| %.9g above the bound %.9g", what, s.max_abs, b);
    if (!(s.max_abs >= reach * b))
        fail_msg("%s: largest |value| %.9g, expected near the bound %.9g", what, s.max_abs, b);
    if (!(fabs(s.mean) <= mean_tol * b))
        fail_msg("%s: mean %.9g, expected 0 within %.3g", what, s.mean, mean_tol * b);
    double want = b / sqrt(3.0);
    if (!(fabs(s.std - want) <= std_rtol * want))
        fail_msg("%s: std %.9g, expected %.9g within %g relative", what, s.std, want, std_rtol);
}

static void test_linear_default(void **state)
{
    (void)state;
    dt_module *m = NULL;
    dt_nn_manual_seed(DT_NN_DEFAULT_INIT_SEED);  /* counts from 0, whatever ran before */
    NN_OK(dt_linear_create(512, 256, true, &m)); /* weight [256, 512], fan_in 512 */
    dt_tensor *w = dt_module_param(m, "weight"), *b = dt_module_param(m, "bias");
    double bound = 1.0 / sqrt(512.0);
    /* 131072 values: the mean's standard error is 0.0016 b, the std's 0.1% */
    expect_uniform("Linear(512, 256).weight", w, bound, 0.02, 0.02, 0.99);
    /* 256 values: the std's standard error is ~3% */
    expect_uniform("Linear(512, 256).bias", b, bound, 0.25, 0.2, 0.9);
    assert_true(dt_tensor_requires_grad(w));
    assert_int_equal(dt_tensor_mem_category(w), DT_MEM_PARAMETER);
    /* the documented rule, exactly */
    dt_tensor *ww = by_rule(2, (int64_t[]){256, 512}, "Linear(512,256)#0.weight", bound);
    dt_tensor *bw = by_rule(1, (int64_t[]){256}, "Linear(512,256)#0.bias", bound);
    expect_equal("Linear weight by the rule", w, ww);
    expect_equal("Linear bias by the rule", b, bw);
    /* the transposed sizes draw other numbers (not the same draws rescaled) */
    dt_module *t = NULL;
    NN_OK(dt_linear_create(256, 512, false, &t));
    assert_null(dt_module_param(t, "bias"));
    dt_tensor *tw = dt_module_param(t, "weight");
    assert_true(cosine(w, tw) < 0.05); /* independent: ~0.003 */
    expect_uniform("Linear(256, 512).weight", tw, 1.0 / 16.0, 0.02, 0.02, 0.99);
    /* a second layer of the same sizes starts apart from the first (PyTorch's do) */
    dt_module *m2 = NULL;
    NN_OK(dt_linear_create(512, 256, true, &m2));
    assert_true(cosine(w, dt_module_param(m2, "weight")) < 0.05);
    dt_tensor *w2 = by_rule(2, (int64_t[]){256, 512}, "Linear(512,256)#1.weight", bound);
    expect_equal("second Linear weight by the rule", dt_module_param(m2, "weight"), w2);
    /* dt_nn_manual_seed restarts the counts: the first layer again, and other seeds differ */
    dt_module *again = NULL, *other = NULL;
    dt_nn_manual_seed(DT_NN_DEFAULT_INIT_SEED);
    NN_OK(dt_linear_create(512, 256, true, &again));
    expect_equal("Linear after dt_nn_manual_seed", dt_module_param(again, "weight"), ww);
    dt_nn_manual_seed(77);
    NN_OK(dt_linear_create(512, 256, true, &other));
    dt_tensor *w77 =
        by_rule_seeded(2, (int64_t[]){256, 512}, "Linear(512,256)#0.weight", bound, 77);
    expect_equal("Linear under seed 77", dt_module_param(other, "weight"), w77);
    assert_true(cosine(w, w77) < 0.05);
    dt_tensor_release(w2);
    dt_tensor_release(w77);
    dt_module_destroy(m2);
    dt_module_destroy(again);
    dt_module_destroy(other);
    dt_tensor_release(ww);
    dt_tensor_release(bw);
    dt_module_destroy(t);
    dt_module_destroy(m);
}

static void test_embedding_default(void **state)
{
    (void)state;
    dt_module *m = NULL;
    dt_nn_manual_seed(DT_NN_DEFAULT_INIT_SEED);
    NN_OK(dt_embedding_create(1000, 64, &m));
    dt_tensor *w = dt_module_param(m, "weight");
    stats s = stats_of(w);
    /* 64000 values: standard errors 0.004 (mean) and 0.3% (std) */
    if (!(fabs(s.mean) < 0.05 && fabs(s.std - 1.0) < 0.03))
        fail_msg("Embedding(1000, 64).weight: mean %.6g std %.6g, expected 0 and 1", s.mean, s.std);
    assert_true(s.max_abs > 3.0); /* not a bounded distribution */
    dt_tensor *want = by_rule(2, (int64_t[]){1000, 64}, "Embedding(1000,64)#0.weight", 0.0);
    expect_equal("Embedding weight by the rule", w, want);
    dt_tensor_release(want);
    dt_module_destroy(m);
}

/* LayerNorm keeps weight 1, bias 0; the Linears inside an Attention are initialised. */
static void test_composites(void **state)
{
    (void)state;
    dt_module *ln = NULL, *att = NULL;
    NN_OK(dt_layer_norm_create(8, 1e-5, &ln));
    stats w = stats_of(dt_module_param(ln, "weight")), b = stats_of(dt_module_param(ln, "bias"));
    assert_true(w.mean == 1.0 && w.std == 0.0 && b.max_abs == 0.0);
    NN_OK(dt_attention_create(16, 4, &att));
    dt_tensor *wo = mr_param_at(att, "wo.weight");
    expect_uniform("Attention wo.weight", wo, 0.25, 0.5, 0.5, 0.5);
    dt_module_destroy(ln);
    dt_module_destroy(att);
}

static dt_status expect_gpt_value(const char *fqn, dt_module *owner, const char *name, dt_tensor *p,
                                  void *user)
{
    (void)user;
    bool ln = strcmp(dt_module_type_name(owner), "LayerNorm") == 0;
    stats s = stats_of(p);
    if (strcmp(name, "bias") == 0 || ln) {
        double want = ln && strcmp(name, "weight") == 0 ? 1.0 : 0.0;
        if (s.mean != want || s.std != 0.0)
            fail_msg("GPT %s: mean %g std %g, expected the constant %g", fqn, s.mean, s.std, want);
    } else if (!(s.std < 0.03)) { /* dt_gpt_init's std 0.02, not the defaults */
        fail_msg("GPT %s: std %g, expected dt_gpt_init's 0.02", fqn, s.std);
    }
    return DT_OK;
}

/* dt_gpt_create's own initialisation overwrites the defaults of its layers. */
static void test_gpt_init_wins(void **state)
{
    (void)state;
    dt_gpt_config cfg;
    NN_OK(dt_gpt_config_preset("tiny", &cfg));
    dt_module *gpt = NULL;
    NN_OK(dt_gpt_create(&cfg, 1234, &gpt));
    NN_OK(dt_module_foreach_param(gpt, expect_gpt_value, NULL));
    dt_tensor *w = mr_param_at(gpt, "output.weight"), *want = NULL;
    NN_OK(dt_tensor_empty(2, dt_tensor_shape(w), DT_DTYPE_F32, dt_device_cpu(), &want));
    NN_OK(dt_param_init(want, "output.weight", 1234, 0.02, 0.0));
    expect_equal("GPT output.weight", w, want);
    dt_tensor_release(want);
    dt_module_destroy(gpt);
}

/* ---------------------------------------------------------------- sharded */

static dt_module *linear_pair(void)
{
    dt_module *seq = NULL, *a = NULL, *b = NULL;
    NN_OK(dt_sequential_create(&seq));
    NN_OK(dt_linear_create(13, 10, true, &a)); /* uneven shards: 10 rows over 3, 13 over 2 */
    NN_OK(dt_sequential_append(seq, a));
    NN_OK(dt_linear_create(10, 13, true, &b));
    NN_OK(dt_sequential_append(seq, b));
    return seq;
}

/* Every parameter of @p m, gathered, equals the one of @p ref at the same FQN; the
 * local shards are slices of it. */
static dt_status expect_same_param(const char *fqn, dt_module *owner, const char *name,
                                   dt_tensor *p, void *user)
{
    (void)owner, (void)name;
    dt_tensor *want = mr_param_at(user, fqn), *full = NULL;
    if (!dt_tensor_is_distributed(p)) {
        expect_equal(fqn, p, want);
        return DT_OK;
    }
    int64_t shape[DT_MAX_DIMS], off[DT_MAX_DIMS];
    NN_OK(dt_spec_local_shape(dt_tensor_spec(p), NULL, shape, off));
    dt_tensor *cur = dt_tensor_retain(want);
    for (int d = 0; d < dt_tensor_ndim(want); d++) {
        dt_tensor *next = NULL;
        NN_OK(dt_tensor_narrow(cur, d, off[d], shape[d], &next));
        dt_tensor_release(cur);
        cur = next;
    }
    char what[160];
    snprintf(what, sizeof(what), "%s (local shard)", fqn);
    expect_equal(what, dt_to_local(p), cur);
    dt_tensor_release(cur);
    NN_OK(dt_full_tensor(p, &full)); /* collective: every rank has the same parameters */
    snprintf(what, sizeof(what), "%s (gathered)", fqn);
    expect_equal(what, full, want);
    dt_tensor_release(full);
    return DT_OK;
}

/*
 * A user's model built on every rank, then a colwise / rowwise plan: the
 * shards are the single-process values, and so is the forward. Rank 0 first
 * builds an extra Linear of other sizes: values depend only on the layers of
 * the same sizes made before (none, after dt_nn_manual_seed).
 */
static void test_sharded_linear_same_values(void **state)
{
    (void)state;
    dt_module *extra = NULL;
    dt_nn_manual_seed(5);
    if (dt_runtime_rank(mr_rt) == 0)
        NN_OK(dt_linear_create(13, 11, true, &extra));
    dt_module *m = linear_pair();
    dt_nn_manual_seed(5); /* the reference: the same model again */
    dt_module *ref = linear_pair();
    dt_mesh *mesh = mr_world_mesh("tp");
    dt_plan *plan = NULL;
    dt_style *col = NULL, *row = NULL;
    NN_OK(dt_style_colwise(&col));
    NN_OK(dt_style_rowwise(&row));
    NN_OK(dt_plan_create(&plan));
    NN_OK(dt_plan_add(plan, "0", col));
    NN_OK(dt_plan_add(plan, "1", row));
    NN_OK(dt_parallelize_module(m, mesh, plan, "tp"));
    assert_true(dt_tensor_is_distributed(mr_param_at(m, "0.weight")));
    assert_true(dt_placement_is_shard(dt_tensor_placements(mr_param_at(m, "1.weight"))[0], 1));
    NN_OK(dt_module_foreach_param(m, expect_same_param, ref));

    int64_t xs[2] = {4, 13};
    dt_tensor *x = NULL, *y = NULL, *yr = NULL;
    NN_OK(dt_tensor_empty(2, xs, DT_DTYPE_F32, dt_device_cpu(), &x));
    NN_OK(dt_tensor_fill_normal(x, 0.0, 1.0, 5, NULL, NULL));
    NN_OK(dt_module_call(m, x, &y));
    NN_OK(dt_module_call(ref, x, &yr));
    double *want = nn_vals(yr);
    nn_expect_close("colwise + rowwise forward", want, y, 1e-5, 1e-6);
    free(want);
    dt_tensor_release(x), dt_tensor_release(y), dt_tensor_release(yr);
    dt_style_release(col), dt_style_release(row);
    dt_plan_destroy(plan);
    dt_mesh_release(mesh);
    dt_module_destroy(extra);
    dt_module_destroy(m);
    dt_module_destroy(ref);
}

/* A colwise Embedding (embedding dim sharded) holds slices of the single-process weight. */
static void test_sharded_embedding_same_values(void **state)
{
    (void)state;
    dt_module *e = NULL, *ref = NULL;
    dt_nn_manual_seed(9);
    NN_OK(dt_embedding_create(11, 7, &e));
    dt_nn_manual_seed(9);
    NN_OK(dt_embedding_create(11, 7, &ref));
    dt_mesh *mesh = mr_world_mesh("tp");
    dt_plan *plan = NULL;
    dt_style *col = NULL;
    NN_OK(dt_style_colwise(&col));
    NN_OK(dt_plan_create(&plan));
    NN_OK(dt_plan_add(plan, "", col));
    NN_OK(dt_parallelize_module(e, mesh, plan, "tp"));
    NN_OK(dt_module_foreach_param(e, expect_same_param, ref));
    dt_style_release(col);
    dt_plan_destroy(plan);
    dt_mesh_release(mesh);
    dt_module_destroy(e);
    dt_module_destroy(ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_default),
        cmocka_unit_test(test_embedding_default),
        cmocka_unit_test(test_composites),
        cmocka_unit_test(test_gpt_init_wins),
        cmocka_unit_test(test_sharded_linear_same_values),
        cmocka_unit_test(test_sharded_embedding_same_values),
    };
    return cmocka_run_group_tests(tests, mr_setup, mr_teardown);
}
