/*
 * PairwiseParallel on a MultiheadAttention (nn.MultiheadAttention layout,
 * fused in_proj [3E, E]) on 2 and 3 ranks against the same module on one
 * rank (every rank computes the reference itself):
 *   - placements: in_proj _S(0,sf=3), each rank the q, k and v rows of its
 *     heads; gathered, PyTorch's layout bit for bit; dt_param_init and a
 *     deferred model's dt_module_materialize fill the shards with the full
 *     tensor's values (box by box);
 *   - forward output and the gradients of the input and of every parameter,
 *     with and without the causal mask; one all-reduce forward (out_proj),
 *     backward one for the input's gradient and one for out_proj.bias's;
 *   - AdamW training: losses per step and final weights;
 *   - checkpoints: saved on tp = n, loaded on one rank (a local model) and on
 *     tp = n with the optimizer (training goes on identically), and as a full
 *     state dict (dt_save_full / dt_load_full); the np3 run also loads what
 *     the np2 run saved (MHA_CK_BASE/np2, a ctest fixture);
 *   - uneven heads refused naming the module and head count, model untouched.
 */
#include <math.h>
#include <sys/stat.h>

#include "st_util.h"

#ifndef MHA_CK_BASE
#error "MHA_CK_BASE must name a directory for the checkpoints"
#endif

enum { E = 12, H = 6, B = 2, S = 5 }; /* 6 heads: whole heads on 2 and 3 ranks */

static dt_mesh *mesh;
static int world, me;

static int setup(void **state)
{
    if (mr_setup(state) != 0)
        return -1;
    world = dt_runtime_size(mr_rt);
    me = dt_runtime_rank(mr_rt);
    const char *names[1] = {"tp"};
    return dt_mesh_create(mr_rt, 1, &world, names, &mesh) == DT_OK ? 0 : -1;
}

static int teardown(void **state)
{
    dt_mesh_release(mesh);
    return mr_teardown(state);
}

static dt_module *mha(bool causal, uint64_t seed)
{
    dt_module *m = NULL;
    ST_OK(dt_multihead_attention_create(E, H, causal, &m));
    mr_init_params(m, seed, 0.3); /* biases too: nonzero */
    return m;
}

static void pairwise(dt_module *m)
{
    dt_plan *p = NULL;
    ST_OK(dt_plan_parse(" = pairwise\n", &p));
    ST_OK(dt_parallelize_module(m, mesh, p, "tp"));
    dt_plan_destroy(p);
}

static dt_tensor *input(uint64_t seed, bool grad)
{
    return mr_randn(3, (int64_t[]){B, S, E}, seed, grad);
}

static const char *const fqns[4] = {"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                    "out_proj.bias"};

/* Placements and shards: this rank holds rows [c*E/n, (c+1)*E/n) of each of
 * q, k and v; the gathered tensor is the single-rank one bit for bit. */
static void test_layout(void **state)
{
    (void)state;
    dt_module *net = mha(false, 3), *ref = mha(false, 3);
    pairwise(net);
    dt_tensor *w = mr_param_at(net, "in_proj_weight"), *wr = mr_param_at(ref, "in_proj_weight");
    char txt[32];
    dt_placement_format(dt_tensor_placements(w)[0], txt, sizeof(txt));
    assert_string_equal(txt, "_S(0,sf=3)");
    dt_placement_format(dt_tensor_placements(mr_param_at(net, "out_proj.weight"))[0], txt,
                        sizeof(txt));
    assert_string_equal(txt, "S(1)");
    int64_t rows = E / world;
    dt_tensor *local = dt_to_local(w);
    assert_int_equal(dt_tensor_dim(local, 0), 3 * rows);
    for (int part = 0; part < 3; part++) /* q, k, v rows of this rank's heads */
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < E; c++)
                assert_true(dt_tensor_item_at(local, (part * rows + r) * E + c) ==
                            dt_tensor_item_at(wr, (part * E + me * rows + r) * E + c));
    for (int i = 0; i < 4; i++) {
        dt_tensor *f = mr_full(mr_param_at(net, fqns[i]));
        assert_true(dt_tensor_equal(f, mr_param_at(ref, fqns[i])));
        dt_tensor_release(f);
    }
    /* re-initialised while sharded: each box drawn at its global offset */
    mr_init_params(net, 99, 0.3), mr_init_params(ref, 99, 0.3);
    for (int i = 0; i < 2; i++) {
        dt_tensor *f = mr_full(mr_param_at(net, fqns[i]));
        assert_true(dt_tensor_equal(f, mr_param_at(ref, fqns[i])));
        dt_tensor_release(f);
    }
    dt_module_destroy(net), dt_module_destroy(ref);
}

/* Built deferred, parallelized, materialised: each rank fills only its three
 * boxes, with the values of the default initialisation of an eager model. */
static void test_deferred(void **state)
{
    (void)state;
    dt_module *net = NULL, *ref = NULL;
    dt_nn_manual_seed(17);
    dt_nn_deferred_begin();
    ST_OK(dt_multihead_attention_create(E, H, false, &net));
    dt_nn_deferred_end();
    dt_nn_manual_seed(17);
    ST_OK(dt_multihead_attention_create(E, H, false, &ref));
    pairwise(net);
    assert_int_equal(dt_module_num_deferred(net), 4);
    ST_OK(dt_module_materialize(net));
    for (int i = 0; i < 4; i++) {
        dt_tensor *f = mr_full(mr_param_at(net, fqns[i]));
        if (!dt_tensor_equal(f, mr_param_at(ref, fqns[i])))
            fail_msg("materialised %s differs from the eager one", fqns[i]);
        dt_tensor_release(f);
    }
    /* PyTorch's _reset_parameters: zero biases, in_proj within xavier's bound */
    dt_tensor *w = mr_param_at(ref, "in_proj_weight"), *b = mr_param_at(ref, "in_proj_bias");
    double bound = sqrt(6.0 / (4.0 * E)), wmax = 0.0;
    for (int64_t k = 0; k < dt_tensor_numel(w); k++)
        wmax = fmax(wmax, fabs(dt_tensor_item_at(w, k)));
    assert_true(wmax <= bound && wmax > 0.5 * bound);
    for (int64_t k = 0; k < dt_tensor_numel(b); k++)
        assert_true(dt_tensor_item_at(b, k) == 0.0);
    dt_module_destroy(net), dt_module_destroy(ref);
}

static void check_grads(bool causal)
{
    dt_module *net = mha(causal, 5), *ref = mha(causal, 5);
    pairwise(net);
    dt_tensor *x = input(7, true), *xr = input(7, true), *y = NULL, *yr = NULL;
    dt_coll_stats st;
    dt_mesh_coll_stats_reset(mesh);
    ST_OK(dt_module_call(net, x, &y));
    dt_mesh_coll_stats(mesh, &st); /* one all-reduce (out_proj's), nothing else */
    assert_int_equal(dt_coll_stats_total(&st), 1);
    assert_int_equal(st.count[DT_COLL_ALLREDUCE], 1);
    ST_OK(dt_module_call(ref, xr, &yr));
    assert_false(dt_tensor_is_distributed(y)); /* replicated out, local */
    mr_assert_close(causal ? "causal output" : "output", y, yr, 1e-5);
    dt_tensor *l = mr_square_sum(y), *lr = mr_square_sum(yr);
    dt_mesh_coll_stats_reset(mesh);
    ST_OK(dt_backward(l, NULL));
    /* two all-reduces: the input's gradient (q, k and v's summed once) and
     * out_proj.bias's (rowwise keeps its bias R; ring bytes 2(n-1)/n) */
    dt_mesh_coll_stats(mesh, &st);
    assert_int_equal(dt_coll_stats_total(&st), 2);
    assert_int_equal(st.count[DT_COLL_ALLREDUCE], 2);
    int64_t xb = B * S * E * 4, bb = E * 4;
    assert_int_equal(st.bytes[DT_COLL_ALLREDUCE],
                     2 * (world - 1) * xb / world + 2 * (world - 1) * bb / world);
    ST_OK(dt_backward(lr, NULL));
    mr_assert_close("input gradient", dt_tensor_grad(x), dt_tensor_grad(xr), 1e-5);
    for (int i = 0; i < 4; i++) {
        dt_tensor *g = mr_full_grad(mr_param_at(net, fqns[i]));
        mr_assert_close(fqns[i], g, dt_tensor_grad(mr_param_at(ref, fqns[i])), 1e-5);
        dt_tensor_release(g);
    }
    dt_tensor *objs[] = {x, xr, y, yr, l, lr};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        dt_tensor_release(objs[i]);
    dt_module_destroy(net), dt_module_destroy(ref);
}

static void test_forward_backward(void **state)
{
    (void)state;
    check_grads(false);
    check_grads(true);
}

/* @p steps AdamW steps on loss = mean(y * y) of fixed inputs; losses out. */
static void train(dt_module *m, dt_optim *opt, int first, int steps, double *losses)
{
    for (int s = 0; s < steps; s++) {
        dt_tensor *x = input(100 + (uint64_t)(first + s), false), *y = NULL, *yy = NULL, *l = NULL;
        dt_optim_zero_grad(opt);
        ST_OK(dt_module_call(m, x, &y));
        ST_OK(dt_mul(y, y, &yy));
        ST_OK(dt_mean(yy, -1, false, &l));
        dt_tensor *lm = NULL;
        ST_OK(dt_sum_all(l, &lm));
        ST_OK(dt_item(lm, &losses[s]));
        ST_OK(dt_backward(lm, NULL));
        ST_OK(dt_optim_step(opt));
        dt_tensor *objs[] = {x, y, yy, l, lm};
        for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
            dt_tensor_release(objs[i]);
    }
}

static dt_optim *adamw(dt_module *m)
{
    dt_adamw_params p = {.field_mask = DT_ADAMW_PARAM_FIELD_LR, .lr = 1e-2};
    dt_optim *o = NULL;
    ST_OK(dt_optim_adamw_create(m, &p, &o));
    return o;
}

/* Every parameter of @p m equal to @p ref's (both gathered): bit for bit, or
 * within 1e-5. The k third of in_proj_bias has an exactly zero true gradient
 * (softmax ignores a constant added to every key), so AdamW turns rounding
 * noise into steps of either sign (as attention.wk.bias, tests/common): there
 * only a bound of @p noise (the most AdamW can move it) is checked. */
static void expect_weights(const char *what, dt_module *m, dt_module *ref, bool exact, double noise)
{
    for (int i = 0; i < 4; i++) {
        dt_tensor *f = mr_full(mr_param_at(m, fqns[i])), *r = mr_full(mr_param_at(ref, fqns[i]));
        if (exact && !dt_tensor_equal(f, r))
            fail_msg("%s: %s differs", what, fqns[i]);
        if (!exact && i == 1) {
            dt_tensor *parts[2][3] = {{NULL}};
            int64_t sizes[3] = {E, E, E};
            ST_OK(dt_split(f, 0, 3, sizes, parts[0]));
            ST_OK(dt_split(r, 0, 3, sizes, parts[1]));
            mr_assert_close("in_proj_bias q", parts[0][0], parts[1][0], 1e-5);
            mr_assert_close("in_proj_bias v", parts[0][2], parts[1][2], 1e-5);
            for (int64_t k = 0; k < E; k++)
                assert_true(fabs(dt_tensor_item_at(parts[0][1], k) -
                                 dt_tensor_item_at(parts[1][1], k)) <= noise);
            for (int p = 0; p < 3; p++)
                dt_tensor_release(parts[0][p]), dt_tensor_release(parts[1][p]);
        } else if (!exact) {
            mr_assert_close(fqns[i], f, r, 1e-5);
        }
        dt_tensor_release(f);
        dt_tensor_release(r);
    }
}

static void test_training(void **state)
{
    (void)state;
    enum { STEPS = 4 };
    dt_module *net = mha(true, 11), *ref = mha(true, 11);
    pairwise(net);
    dt_optim *o = adamw(net), * or = adamw(ref);
    double loss[STEPS], ref_loss[STEPS];
    train(net, o, 0, STEPS, loss);
    train(ref, or, 0, STEPS, ref_loss);
    for (int s = 0; s < STEPS; s++)
        if (fabs(loss[s] - ref_loss[s]) > 1e-5 * fabs(ref_loss[s]))
            fail_msg("step %d: loss %.9g, single rank %.9g", s, loss[s], ref_loss[s]);
    assert_true(ref_loss[STEPS - 1] < ref_loss[0]); /* it learns */
    expect_weights("trained", net, ref, false, 2 * STEPS * 1e-2);
    dt_optim_destroy(o), dt_optim_destroy(or);
    dt_module_destroy(net), dt_module_destroy(ref);
}

static void ck_dir(int tp, char *buf, size_t len)
{
    mkdir(MHA_CK_BASE, 0755);
    snprintf(buf, len, "%s/np%d", MHA_CK_BASE, tp);
}

/* Load checkpoint @p dir on one rank (a local model), on tp = world (with
 * AdamW state) and, through a full state dict of that, on tp again: all give
 * the local model's weights bit for bit, which are @p want's (NULL: not
 * checked). */
static void load_everywhere(const char *dir, dt_module *want)
{
    dt_module *one = mha(true, 77), *tp = mha(true, 78), *full = mha(true, 81);
    ST_OK(dt_checkpoint_load(one, NULL, dir));
    if (want != NULL)
        expect_weights("loaded on one rank", want, one, true, 0);
    pairwise(tp);
    dt_optim *o = adamw(tp);
    ST_OK(dt_checkpoint_load(tp, o, dir));
    expect_weights("loaded on tp", tp, one, true, 0);
    /* a full state dict (PyTorch's file) of it, read back box by box on tp */
    char path[600];
    snprintf(path, sizeof(path), "%s.full.safetensors", dir);
    ST_OK(dt_save_full(tp, path));
    pairwise(full);
    ST_OK(dt_load_full(full, path));
    expect_weights("full state dict on tp", full, one, true, 0);
    dt_optim_destroy(o);
    dt_module_destroy(one), dt_module_destroy(tp), dt_module_destroy(full);
}

static void test_checkpoint(void **state)
{
    (void)state;
    char dir[512];
    ck_dir(world, dir, sizeof(dir));
    dt_module *net = mha(true, 13), *ref = mha(true, 13);
    pairwise(net);
    dt_optim *o = adamw(net), * or = adamw(ref);
    double loss[3], ref_loss[3];
    train(net, o, 0, 2, loss);
    train(ref, or, 0, 2, ref_loss);
    ST_OK(dt_checkpoint_save(net, o, dir));
    load_everywhere(dir, net);
    /* resumed on tp = world with its AdamW state: the next step as the original's */
    dt_module *again = mha(true, 79);
    pairwise(again);
    dt_optim *oa = adamw(again);
    ST_OK(dt_checkpoint_load(again, oa, dir));
    double l1[1], l2[1];
    train(net, o, 2, 1, l1);
    train(again, oa, 2, 1, l2);
    assert_true(l1[0] == l2[0]);
    expect_weights("resumed", again, net, true, 0);
    /* what another tp size saved (the np2 run, before this np3 one) */
    if (world == 3) {
        char other[512];
        ck_dir(2, other, sizeof(other));
        dt_module *one = mha(true, 80);
        ST_OK(dt_checkpoint_load(one, NULL, other));
        expect_weights("tp=2 checkpoint vs single rank", one, ref, false, 2 * 2 * 1e-2);
        load_everywhere(other, one);
        dt_module_destroy(one);
    }
    dt_optim_destroy(o), dt_optim_destroy(or), dt_optim_destroy(oa);
    dt_module_destroy(net), dt_module_destroy(ref), dt_module_destroy(again);
}

/* Heads that do not divide over the ranks are refused, naming the module and
 * the head count; nothing changes. */
static void test_uneven_heads(void **state)
{
    (void)state;
    dt_module *root = NULL, *m = NULL;
    ST_OK(dt_sequential_create(&root));
    ST_OK(dt_multihead_attention_create(10, 5, false, &m)); /* 5 heads: not on 2 or 3 ranks */
    ST_OK(dt_sequential_append(root, m));
    dt_plan *p = NULL;
    ST_OK(dt_plan_parse("0 = pairwise\n", &p));
    ST_FAILS(dt_parallelize_module(root, mesh, p, "tp"), DT_ERR_INVALID_ARG,
             "'0': n_heads 5 is not divisible by the tp size");
    assert_false(dt_tensor_is_distributed(mr_param_at(root, "0.in_proj_weight")));
    assert_int_equal(st_count_distributed(root), 0);
    /* colwise is not for it: the fused rows are not a Linear's */
    dt_plan_destroy(p);
    ST_OK(dt_plan_parse("0 = colwise\n", &p));
    ST_FAILS(dt_parallelize_module(root, mesh, p, "tp"), DT_ERR_UNSUPPORTED,
             "a MultiheadAttention");
    dt_plan_destroy(p);
    dt_module_destroy(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),           cmocka_unit_test(test_deferred),
        cmocka_unit_test(test_forward_backward), cmocka_unit_test(test_training),
        cmocka_unit_test(test_checkpoint),       cmocka_unit_test(test_uneven_heads),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
