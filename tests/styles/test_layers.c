/*
 * Single layers under styles on dtrun ranks against the same layers on one
 * rank (every rank computes the reference itself): the TorchShard-style
 * column- then row-parallel linears (outputs, weight and input gradients),
 * parallel cross entropy on vocabulary-sharded logits, a colwise Embedding
 * (embedding dim sharded) and pairwise on a FeedForward. Sizes are uneven
 * on 2 and 3 ranks (7 and 10 features).
 */
#include "st_util.h"

static dt_mesh *mesh;

static int setup(void **state)
{
    if (mr_setup(state) != 0)
        return -1;
    int w = dt_runtime_size(mr_rt);
    const char *names[1] = {"tp"};
    return dt_mesh_create(mr_rt, 1, &w, names, &mesh) == DT_OK ? 0 : -1;
}

static int teardown(void **state)
{
    dt_mesh_release(mesh);
    return mr_teardown(state);
}

static dt_tensor *input(int64_t n, int64_t d, uint64_t seed)
{
    return mr_randn(2, (int64_t[]){n, d}, seed, true);
}

static void test_torchshard_linears(void **state)
{
    (void)state;
    dt_module *col = NULL, *row = NULL, *rc = NULL, *rr = NULL;
    ST_OK(dt_parallel_linear_create(6, 7, true, 1, mesh, "tp", &col));
    ST_OK(dt_parallel_linear_create(7, 4, true, 0, mesh, "tp", &row));
    ST_OK(dt_linear_create(6, 7, true, &rc));
    ST_OK(dt_linear_create(7, 4, true, &rr));
    mr_init_params(col, 1, 0.5), mr_init_params(rc, 1, 0.5), mr_init_params(row, 2, 0.5),
        mr_init_params(rr, 2, 0.5);
    dt_tensor *x = input(5, 6, 3), *xr = input(5, 6, 3);
    dt_tensor *h = NULL, *y = NULL, *hr = NULL, *yr = NULL;
    ST_OK(dt_module_call(col, x, &h)); /* this rank's S(-1) columns, local */
    assert_false(dt_tensor_is_distributed(h));
    ST_OK(dt_module_call(row, h, &y)); /* all-reduced: replicated, local */
    ST_OK(dt_module_call(rc, xr, &hr));
    ST_OK(dt_module_call(rr, hr, &yr));
    mr_assert_close("row(col(x))", y, yr, 1e-5);
    dt_tensor *l = mr_square_sum(y), *lr = mr_square_sum(yr);
    ST_OK(dt_backward(l, NULL));
    ST_OK(dt_backward(lr, NULL));
    mr_assert_close("x.grad", dt_tensor_grad(x), dt_tensor_grad(xr), 1e-5);
    /* a row-parallel layer handed the full input instead of its shard: named, no hang */
    dt_tensor *bad = NULL, *wide = input(5, 7, 8);
    if (dt_runtime_size(mr_rt) > 1)
        ST_FAILS(dt_module_call(row, wide, &bad), DT_ERR_INVALID_ARG, "[5, 7]");
    dt_tensor_release(wide);
    const char *names[2] = {"weight", "bias"};
    dt_module *mods[2][2] = {{col, rc}, {row, rr}};
    for (int m = 0; m < 2; m++)
        for (int k = 0; k < 2; k++) {
            dt_tensor *g = mr_full_grad(dt_module_param(mods[m][0], names[k]));
            mr_assert_close(names[k], g, dt_tensor_grad(dt_module_param(mods[m][1], names[k])),
                            1e-5);
            dt_tensor_release(g);
        }
    dt_tensor *objs[] = {l, lr, h, y, hr, yr, x, xr};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        dt_tensor_release(objs[i]);
    dt_module_destroy(col), dt_module_destroy(row), dt_module_destroy(rc), dt_module_destroy(rr);
}

static void test_parallel_cross_entropy(void **state)
{
    (void)state;
    dt_module *out = NULL, *ref = NULL;
    dt_plan *plan = NULL;
    ST_OK(dt_linear_create(6, 10, false, &out));
    ST_OK(dt_linear_create(6, 10, false, &ref));
    mr_init_params(out, 4, 0.5), mr_init_params(ref, 4, 0.5);
    dt_style *s = NULL;
    dt_style_params p = {.field_mask = DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT,
                         .use_local_output = false};
    ST_OK(dt_style_create(DT_STYLE_COLWISE, &p, &s));
    ST_OK(dt_plan_create(&plan));
    ST_OK(dt_plan_add(plan, "", s));
    ST_OK(dt_parallelize_module(out, mesh, plan, "tp"));
    dt_tensor *x = input(5, 6, 5), *xr = input(5, 6, 5), *lg = NULL, *lgr = NULL;
    int64_t tv[5] = {0, 9, 3, 4, 7};
    dt_tensor *t = NULL, *loss = NULL, *lr = NULL;
    ST_OK(dt_tensor_from_buffer(1, (int64_t[]){5}, DT_DTYPE_I64, tv, &t));
    ST_OK(dt_module_call(out, x, &lg));
    assert_true(dt_tensor_is_distributed(lg));
    assert_true(dt_placement_is_shard(dt_tensor_placements(lg)[0], 1));
    ST_OK(dt_parallel_cross_entropy(lg, t, &loss));
    ST_OK(dt_module_call(ref, xr, &lgr));
    ST_OK(dt_nn_cross_entropy(lgr, t, &lr));
    dt_tensor *lf = mr_full(loss);
    mr_assert_close("loss", lf, lr, 1e-5);
    ST_OK(dt_backward(loss, NULL));
    ST_OK(dt_backward(lr, NULL));
    dt_tensor *g = mr_full_grad(dt_module_param(out, "weight"));
    mr_assert_close("output.weight.grad", g, dt_tensor_grad(dt_module_param(ref, "weight")), 1e-5);
    mr_assert_close("x.grad", dt_tensor_grad(x), dt_tensor_grad(xr), 1e-5);
    /* logits not sharded along the classes are refused by name */
    dt_tensor *rep = NULL, *bad = NULL;
    ST_OK(dt_redistribute(lg, 1, (dt_placement[]){dt_shard(0)}, &rep));
    ST_FAILS(dt_parallel_cross_entropy(rep, t, &bad), DT_ERR_INVALID_ARG, "S(0)");
    dt_tensor *objs[] = {rep, g, lf, lr, loss, t, lg, lgr, x, xr};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        dt_tensor_release(objs[i]);
    dt_style_release(s);
    dt_plan_destroy(plan);
    dt_module_destroy(out), dt_module_destroy(ref);
}

/* colwise on an Embedding shards the embedding dim; pairwise on a FeedForward. */
static void test_embedding_and_pairwise(void **state)
{
    (void)state;
    dt_module *emb = NULL, *er = NULL, *ffn = NULL, *fr = NULL;
    ST_OK(dt_embedding_create(11, 7, &emb));
    ST_OK(dt_embedding_create(11, 7, &er));
    ST_OK(dt_feed_forward_create(7, 10, &ffn));
    ST_OK(dt_feed_forward_create(7, 10, &fr));
    mr_init_params(emb, 6, 0.5), mr_init_params(er, 6, 0.5), mr_init_params(ffn, 7, 0.5),
        mr_init_params(fr, 7, 0.5);
    dt_plan *pe = NULL, *pf = NULL;
    ST_OK(dt_plan_parse("  # nothing\n", &pe)); /* an empty text is an empty plan */
    assert_int_equal(dt_plan_size(pe), 0);
    dt_plan_destroy(pe);
    dt_style *col = NULL, *pair = NULL;
    ST_OK(dt_style_colwise(&col));
    ST_OK(dt_style_pairwise(&pair));
    ST_OK(dt_plan_create(&pe));
    ST_OK(dt_plan_add(pe, "", col));
    ST_OK(dt_plan_create(&pf));
    ST_OK(dt_plan_add(pf, "", pair));
    ST_OK(dt_parallelize_module(emb, mesh, pe, "tp"));
    ST_OK(dt_parallelize_module(ffn, mesh, pf, "tp"));
    int64_t ids_v[6] = {0, 10, 3, 3, 7, 1};
    dt_tensor *ids = NULL, *e = NULL, *ef = NULL, *erv = NULL, *y = NULL, *yr = NULL;
    ST_OK(dt_tensor_from_buffer(2, (int64_t[]){2, 3}, DT_DTYPE_I64, ids_v, &ids));
    ST_OK(dt_module_call(emb, ids, &e)); /* local [2, 3, chunk of 7] */
    assert_false(dt_tensor_is_distributed(e));
    dt_tensor *ed = NULL;
    ST_OK(dt_from_local(e, mesh, 1, (dt_placement[]){dt_shard(-1)}, NULL, &ed));
    ST_OK(dt_full_tensor(ed, &ef));
    ST_OK(dt_module_call(er, ids, &erv));
    mr_assert_close("colwise embedding", ef, erv, 1e-5);
    /* the pairwise FeedForward on the full embeddings: replicated in, replicated out */
    ST_OK(dt_module_call(ffn, ef, &y));
    ST_OK(dt_module_call(fr, erv, &yr));
    mr_assert_close("pairwise feed_forward", y, yr, 1e-5);
    dt_tensor *l = mr_square_sum(y), *lr = mr_square_sum(yr);
    ST_OK(dt_backward(l, NULL));
    ST_OK(dt_backward(lr, NULL));
    const char *fq[4] = {"w1.weight", "w1.bias", "w2.weight", "w2.bias"};
    for (int i = 0; i < 4; i++) {
        dt_tensor *g = mr_full_grad(mr_param_at(ffn, fq[i]));
        mr_assert_close(fq[i], g, dt_tensor_grad(mr_param_at(fr, fq[i])), 1e-5);
        dt_tensor_release(g);
    }
    dt_tensor *g = mr_full_grad(dt_module_param(emb, "weight"));
    mr_assert_close("embedding.grad", g, dt_tensor_grad(dt_module_param(er, "weight")), 1e-5);
    dt_tensor *objs[] = {g, l, lr, y, yr, ed, ef, erv, e, ids};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        dt_tensor_release(objs[i]);
    dt_style_release(col), dt_style_release(pair);
    dt_plan_destroy(pe), dt_plan_destroy(pf);
    dt_module_destroy(emb), dt_module_destroy(er), dt_module_destroy(ffn), dt_module_destroy(fr);
}

/* ---------------------------------------------------------------- user types */

/* A user's own linear layer: parameters "w" [out, in] and "b" [out]. */
static dt_status proj_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    (void)n_in;
    return dt_linear(in[0], dt_module_param(m, "w"), dt_module_param(m, "b"), out);
}
static const dt_module_tp_param proj_tp[] = {{"w", 0, 1}, {"b", 0, -1}, {NULL, 0, 0}};
static const dt_module_ops proj_ops = {.type_name = "MyProj",
                                       .forward = proj_forward,
                                       .tp_kind = DT_MODULE_TP_LINEAR,
                                       .tp_params = proj_tp};
/* A user type that calls itself "Linear" and declares no tensor-parallel layout. */
static const dt_module_ops fake_linear_ops = {.type_name = "Linear", .forward = proj_forward};

static dt_module *proj(const dt_module_ops *ops, int64_t in, int64_t outf)
{
    dt_module *m = NULL;
    dt_tensor *w = NULL, *b = NULL;
    ST_OK(dt_module_create(ops, NULL, &m));
    ST_OK(dt_tensor_zeros(2, (int64_t[]){outf, in}, DT_DTYPE_F32, dt_device_cpu(), &w));
    ST_OK(dt_tensor_zeros(1, &outf, DT_DTYPE_F32, dt_device_cpu(), &b));
    ST_OK(dt_module_param_add(m, "w", w));
    ST_OK(dt_module_param_add(m, "b", b));
    dt_tensor_release(w), dt_tensor_release(b);
    return m;
}

/* MyProj(7 -> 10) colwise then MyProj(10 -> 5) rowwise, as the built-in
 * Linears would be, against the same modules on one rank; a user type named
 * "Linear" is not mistaken for the built-in one. */
static void test_user_linear_type(void **state)
{
    (void)state;
    dt_module *net = NULL, *ref = NULL;
    ST_OK(dt_sequential_create(&net));
    ST_OK(dt_sequential_create(&ref));
    ST_OK(dt_sequential_append(net, proj(&proj_ops, 7, 10)));
    ST_OK(dt_sequential_append(net, proj(&proj_ops, 10, 5)));
    ST_OK(dt_sequential_append(ref, proj(&proj_ops, 7, 10)));
    ST_OK(dt_sequential_append(ref, proj(&proj_ops, 10, 5)));
    mr_init_params(net, 11, 0.5), mr_init_params(ref, 11, 0.5);
    dt_plan *p = NULL;
    ST_OK(dt_plan_parse("0 = colwise\n1 = rowwise\n", &p));
    ST_OK(dt_parallelize_module(net, mesh, p, "tp"));
    assert_true(dt_tensor_is_distributed(mr_param_at(net, "0.w")));
    dt_tensor *x = input(6, 7, 3), *y = NULL, *yr = NULL;
    ST_OK(dt_module_call(net, x, &y));
    ST_OK(dt_module_call(ref, x, &yr));
    dt_tensor *yf = mr_full(y);
    mr_assert_close("user linear pair", yf, yr, 1e-5);
    dt_tensor *l = mr_square_sum(y), *lr = mr_square_sum(yr);
    ST_OK(dt_backward(l, NULL));
    ST_OK(dt_backward(lr, NULL));
    const char *fq[4] = {"0.w", "0.b", "1.w", "1.b"};
    for (int i = 0; i < 4; i++) {
        dt_tensor *g = mr_full_grad(mr_param_at(net, fq[i]));
        mr_assert_close(fq[i], g, dt_tensor_grad(mr_param_at(ref, fq[i])), 1e-5);
        dt_tensor_release(g);
    }
    dt_module *fake = proj(&fake_linear_ops, 7, 10);
    ST_FAILS(dt_parallelize_module(fake, mesh, p, "tp"), DT_ERR_NOT_FOUND, "plan key '0'");
    dt_plan *pf = NULL;
    ST_OK(dt_plan_parse(" = colwise\n", &pf));
    ST_FAILS(dt_parallelize_module(fake, mesh, pf, "tp"), DT_ERR_UNSUPPORTED,
             "style 'colwise' refused '': it cannot shard a Linear (it takes Linear, Embedding, "
             "or a type whose");
    dt_tensor *objs[] = {x, y, yr, yf, l, lr};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        dt_tensor_release(objs[i]);
    dt_plan_destroy(p), dt_plan_destroy(pf);
    dt_module_destroy(net), dt_module_destroy(ref), dt_module_destroy(fake);
}

/* A user activation module: GELU (no parameters). */
static dt_status gelu_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    (void)m, (void)n_in;
    return dt_gelu_tanh(in[0], out);
}
static const dt_module_ops gelu_ops = {.type_name = "GELU", .forward = gelu_forward};

/* Linear(6, 10), GELU, Linear(10, 6), Linear(6, 8), GELU, Linear(8, 6). */
static dt_module *mlp(void)
{
    dt_module *seq = NULL, *l = NULL, *g = NULL;
    static const int64_t dims[4][2] = {{6, 10}, {10, 6}, {6, 8}, {8, 6}};
    ST_OK(dt_sequential_create(&seq));
    for (int i = 0; i < 4; i++) {
        ST_OK(dt_linear_create(dims[i][0], dims[i][1], true, &l));
        ST_OK(dt_sequential_append(seq, l));
        if (i % 2 == 0) {
            ST_OK(dt_module_create(&gelu_ops, NULL, &g));
            ST_OK(dt_sequential_append(seq, g));
        }
    }
    return seq;
}

/* Pairwise on a Sequential MLP with an even number of Linears: colwise and
 * rowwise in turn, replicated in and out, the single-rank values. */
static void test_pairwise_sequential(void **state)
{
    (void)state;
    dt_module *net = mlp(), *ref = mlp();
    mr_init_params(net, 21, 0.5), mr_init_params(ref, 21, 0.5);
    dt_plan *p = NULL;
    ST_OK(dt_plan_parse(" = pairwise\n", &p));
    ST_OK(dt_parallelize_module(net, mesh, p, "tp"));
    assert_true(dt_tensor_is_distributed(mr_param_at(net, "0.weight")));
    assert_true(dt_tensor_is_distributed(mr_param_at(net, "5.weight")));
    dt_tensor *x = input(5, 6, 4), *y = NULL, *yr = NULL;
    ST_OK(dt_module_call(net, x, &y));
    ST_OK(dt_module_call(ref, x, &yr));
    assert_false(dt_tensor_is_distributed(y)); /* replicated out, local */
    mr_assert_close("pairwise mlp", y, yr, 1e-5);
    dt_tensor *l = mr_square_sum(y), *lr = mr_square_sum(yr);
    ST_OK(dt_backward(l, NULL));
    ST_OK(dt_backward(lr, NULL));
    const char *fq[4] = {"0.weight", "2.bias", "3.weight", "5.bias"};
    for (int i = 0; i < 4; i++) {
        dt_tensor *g = mr_full_grad(mr_param_at(net, fq[i]));
        mr_assert_close(fq[i], g, dt_tensor_grad(mr_param_at(ref, fq[i])), 1e-5);
        dt_tensor_release(g);
    }
    /* an odd number of Linears has no pairs */
    dt_module *odd = NULL, *lin = NULL;
    ST_OK(dt_sequential_create(&odd));
    ST_OK(dt_linear_create(4, 4, false, &lin));
    ST_OK(dt_sequential_append(odd, lin));
    ST_FAILS(dt_parallelize_module(odd, mesh, p, "tp"), DT_ERR_UNSUPPORTED,
             "a Sequential with 1 Linear children: it needs an even number");
    dt_tensor *objs[] = {x, y, yr, l, lr};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        dt_tensor_release(objs[i]);
    dt_plan_destroy(p);
    dt_module_destroy(net), dt_module_destroy(ref), dt_module_destroy(odd);
}

/* A style the library does not ship: column-parallel, but with the replicated
 * input taken as a whole and the output gathered back (PyTorch 1.13's
 * ColwiseParallel with make_input_replicate_1d / make_output_tensor). */
static dt_status gathered_plan(dt_module *m, const char *fqn, dt_style_param_placement *out, int *n)
{
    if (dt_module_param(m, "weight") == NULL)
        return dt_set_error(DT_ERR_UNSUPPORTED, "'%s' has no weight", fqn);
    out[(*n)++] = (dt_style_param_placement){"weight", dt_shard(0)};
    if (dt_module_param(m, "bias") != NULL)
        out[(*n)++] = (dt_style_param_placement){"bias", dt_shard(0)};
    return DT_OK;
}
static const dt_style_ops colwise_gathered = {.name = "colwise_gathered",
                                              .plan_params = gathered_plan,
                                              .prepare_input = dt_make_input_replicate_1d,
                                              .prepare_output = dt_make_output_tensor};

static void test_user_style(void **state)
{
    (void)state;
    ST_OK(dt_style_register(&colwise_gathered)); /* once per process: plan text can use it */
    ST_FAILS(dt_style_register(&colwise_gathered), DT_ERR_INVALID_ARG,
             "a style named 'colwise_gathered' exists already");
    dt_style_ops bad = {.name = "colwise", .plan_params = gathered_plan};
    ST_FAILS(dt_style_register(&bad), DT_ERR_INVALID_ARG, "'colwise' exists already");
    dt_module *net = NULL, *ref = NULL, *lin = NULL, *lr = NULL;
    ST_OK(dt_sequential_create(&net));
    ST_OK(dt_sequential_create(&ref));
    ST_OK(dt_linear_create(7, 10, true, &lin));
    ST_OK(dt_linear_create(7, 10, true, &lr));
    ST_OK(dt_sequential_append(net, lin));
    ST_OK(dt_sequential_append(ref, lr));
    mr_init_params(net, 31, 0.5), mr_init_params(ref, 31, 0.5);
    dt_plan *p = NULL;
    ST_OK(dt_plan_parse("0 = colwise_gathered\n", &p));
    char text[64];
    dt_style_format(dt_plan_style_at(p, 0), text, sizeof(text));
    assert_string_equal(text, "colwise_gathered");
    ST_OK(dt_parallelize_module(net, mesh, p, "tp"));
    assert_true(dt_tensor_is_distributed(mr_param_at(net, "0.weight")));
    dt_tensor *x = input(4, 7, 9), *y = NULL, *yr = NULL;
    ST_OK(dt_module_call(net, x, &y));
    ST_OK(dt_module_call(ref, x, &yr));
    assert_false(dt_tensor_is_distributed(y)); /* its prepare_output gathered it */
    mr_assert_close("user style", y, yr, 1e-5);
    dt_tensor *l = mr_square_sum(y), *lrs = mr_square_sum(yr);
    ST_OK(dt_backward(l, NULL));
    ST_OK(dt_backward(lrs, NULL));
    dt_tensor *g = mr_full_grad(mr_param_at(net, "0.weight"));
    mr_assert_close("user style weight grad", g, dt_tensor_grad(mr_param_at(ref, "0.weight")),
                    1e-5);
    dt_tensor *objs[] = {x, y, yr, l, lrs, g};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        dt_tensor_release(objs[i]);
    dt_plan_destroy(p);
    dt_module_destroy(net), dt_module_destroy(ref);
}

/* A plan layout the output cannot take (S(7) of a 2-d output) fails at the first
 * forward, naming the module and the plan's layout. */
static void test_bad_plan_layout(void **state)
{
    (void)state;
    dt_module *lin = NULL;
    ST_OK(dt_linear_create(4, 6, true, &lin));
    dt_plan *p = NULL;
    ST_OK(dt_plan_parse(" = colwise(output=S(7))\n", &p)); /* the root module */
    ST_OK(dt_parallelize_module(lin, mesh, p, "tp"));
    int64_t xs[2] = {3, 4};
    dt_tensor *x = NULL, *y = NULL;
    ST_OK(dt_tensor_zeros(2, xs, DT_DTYPE_F32, dt_device_cpu(), &x));
    ST_FAILS(dt_module_call(lin, x, &y), DT_ERR_INVALID_ARG,
             "parallelize: Linear '' output (plan layout S(7)): dt_spec_create");
    assert_null(y);
    dt_tensor_release(x);
    dt_plan_destroy(p);
    dt_module_destroy(lin);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torchshard_linears),
        cmocka_unit_test(test_parallel_cross_entropy),
        cmocka_unit_test(test_embedding_and_pairwise),
        cmocka_unit_test(test_bad_plan_layout),
        cmocka_unit_test(test_user_linear_type),
        cmocka_unit_test(test_pairwise_sequential),
        cmocka_unit_test(test_user_style),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
