/*
 * Plans without communication: parsing and its errors, FQN matching,
 * validation that leaves the model untouched, parameter placements after
 * parallelizing on a virtual mesh, and the explain text.
 */
#define _GNU_SOURCE
#include "st_util.h"

static dt_module *tiny_gpt_layers(int64_t n_heads, int64_t n_layers)
{
    dt_gpt_config cfg;
    ST_OK(dt_gpt_config_preset("tiny", &cfg));
    cfg.n_heads = n_heads;
    cfg.n_layers = n_layers;
    dt_module *m = NULL;
    ST_OK(dt_gpt_create(&cfg, 7, &m));
    return m;
}

static dt_module *tiny_gpt(int64_t n_heads)
{
    return tiny_gpt_layers(n_heads, 2);
}

static dt_mesh *virtual_mesh(int ndim, const int *shape, const char *const *names, int rank)
{
    dt_mesh *m = NULL;
    ST_OK(dt_mesh_create_virtual(ndim, shape, names, rank, &m));
    return m;
}

static void test_parse_default_plans(void **state)
{
    (void)state;
    dt_plan *p = NULL;
    ST_OK(dt_plan_gpt_default(false, &p));
    assert_int_equal(dt_plan_size(p), 6);
    assert_string_equal(dt_plan_pattern_at(p, 1), "layers.*.attention.wq|wk|wv");
    char buf[128];
    dt_style_format(dt_plan_style_at(p, 5), buf, sizeof(buf));
    assert_string_equal(buf, "colwise(output=S(-1), local=false)");
    assert_int_equal(dt_style_get_kind(dt_plan_style_at(p, 0)), DT_STYLE_ROWWISE);
    dt_plan_destroy(p);
    ST_OK(dt_plan_gpt_default(true, &p));
    assert_int_equal(dt_plan_size(p), 12);
    dt_style_format(dt_plan_style_at(p, 3), buf, sizeof(buf));
    assert_string_equal(buf, "prepare_input(input=S(1), desired=R)");
    dt_plan_destroy(p);
    /* the text form parses to the same plan (a start for --plan files) */
    ST_OK(dt_plan_parse(dt_plan_gpt_default_text(true), &p));
    assert_int_equal(dt_plan_size(p), 12);
    dt_style_format(dt_plan_style_at(p, 0), buf, sizeof(buf));
    assert_string_equal(buf, "rowwise(input=R, output=S(1), local=false)");
    dt_plan_destroy(p);
}

/* The plan files shipped with train_gpt say what the built-in plans say. */
static void test_shipped_plan_files(void **state)
{
    (void)state;
    const char *files[2] = {ST_PLANS_DIR "/tp.plan", ST_PLANS_DIR "/sp.plan"};
    for (int sp = 0; sp < 2; sp++) {
        dt_plan *file = NULL, *builtin = NULL;
        ST_OK(dt_plan_load(files[sp], &file));
        ST_OK(dt_plan_gpt_default(sp == 1, &builtin));
        assert_int_equal(dt_plan_size(file), dt_plan_size(builtin));
        for (int i = 0; i < dt_plan_size(file); i++) {
            char a[160], b[160];
            assert_string_equal(dt_plan_pattern_at(file, i), dt_plan_pattern_at(builtin, i));
            dt_style_format(dt_plan_style_at(file, i), a, sizeof(a));
            dt_style_format(dt_plan_style_at(builtin, i), b, sizeof(b));
            assert_string_equal(a, b);
        }
        dt_plan_destroy(file);
        dt_plan_destroy(builtin);
    }
    dt_plan *p = NULL;
    ST_OK(dt_plan_load(ST_PLANS_DIR "/pairwise.plan", &p));
    assert_int_equal(dt_plan_size(p), 4);
    dt_plan_destroy(p);
}

static void test_parse_forms(void **state)
{
    (void)state;
    dt_plan *p = NULL;
    ST_OK(dt_plan_parse("# a comment; with = signs\n"
                        "  a.b = ColwiseParallel ; c=rowwise(output=S(1), use_local_output=False)\n"
                        "\n;;d = prepare_input(input=[S(1), None], desired=[R, None], local=true)\n"
                        "e=sequence(seq_dim=0)  # trailing\n",
                        &p));
    assert_int_equal(dt_plan_size(p), 4);
    char buf[160];
    dt_style_format(dt_plan_style_at(p, 1), buf, sizeof(buf));
    assert_string_equal(buf, "rowwise(output=S(1), local=false)");
    dt_style_format(dt_plan_style_at(p, 2), buf, sizeof(buf));
    assert_string_equal(buf, "prepare_input(input=[S(1), None], desired=[R, None], local=true)");
    dt_style_format(dt_plan_style_at(p, 3), buf, sizeof(buf));
    assert_string_equal(buf, "sequence(seq_dim=0)");
    dt_plan_destroy(p);
    /* an empty key is the root itself, as dt_plan_add's "" */
    ST_OK(dt_plan_parse(" = rowwise # the root\n", &p));
    assert_int_equal(dt_plan_size(p), 1);
    assert_string_equal(dt_plan_pattern_at(p, 0), "");
    dt_style_format(dt_plan_style_at(p, 0), buf, sizeof(buf));
    assert_string_equal(buf, "rowwise");
    dt_plan_destroy(p);
}

static void test_parse_errors(void **state)
{
    (void)state;
    dt_plan *p = NULL;
    ST_FAILS(dt_plan_parse("a=colwise; output=colwize", &p), DT_ERR_INVALID_ARG, "'colwize'");
    ST_FAILS(dt_plan_parse("a=colwise; output=colwize", &p), DT_ERR_INVALID_ARG, "entry 2");
    ST_FAILS(dt_plan_parse("a=colwise(output=S(x))", &p), DT_ERR_INVALID_ARG, "'S(x)'");
    ST_FAILS(dt_plan_parse("a=colwise(outptu=R)", &p), DT_ERR_INVALID_ARG, "'outptu'");
    ST_FAILS(dt_plan_parse("a colwise", &p), DT_ERR_INVALID_ARG, "no '='");
    ST_FAILS(dt_plan_parse("a..b=colwise", &p), DT_ERR_INVALID_ARG, "empty path segment");
    ST_FAILS(dt_plan_parse("a=colwise(output=R", &p), DT_ERR_INVALID_ARG, "missing ')'");
    ST_FAILS(dt_plan_parse("a=colwise(local=maybe)", &p), DT_ERR_INVALID_ARG, "'maybe'");
    /* an option the style does not take, a required one missing */
    ST_FAILS(dt_plan_parse("a=colwise(desired=R)", &p), DT_ERR_INVALID_ARG,
             "desired_input_layouts");
    ST_FAILS(dt_plan_parse("a=prepare_input(input=R)", &p), DT_ERR_INVALID_ARG,
             "desired_input_layouts");
    ST_FAILS(dt_plan_parse("a=prepare_input(input=[R,R], desired=R)", &p), DT_ERR_INVALID_ARG,
             "differ in length");
    ST_FAILS(dt_plan_parse("a=sequence(seq_dim=-2)", &p), DT_ERR_INVALID_ARG, "'-2'");
    ST_FAILS(dt_plan_load("/nonexistent/plan.txt", &p), DT_ERR_SYSTEM, "/nonexistent/plan.txt");
}

static void test_style_create_errors(void **state)
{
    (void)state;
    dt_style *s = NULL;
    dt_style_params p = {.field_mask = DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS, .n_inputs = 2};
    ST_FAILS(dt_style_create(DT_STYLE_COLWISE, &p, &s), DT_ERR_INVALID_ARG, "one input layout");
    p = (dt_style_params){.field_mask = DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT,
                          .output_layout = dt_layout_of(dt_shard(-2))};
    ST_FAILS(dt_style_create(DT_STYLE_ROWWISE, &p, &s), DT_ERR_INVALID_ARG, "S(-2)");
    p = (dt_style_params){.field_mask = DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT};
    ST_FAILS(dt_style_create(DT_STYLE_PAIRWISE, &p, &s), DT_ERR_INVALID_ARG, "use_local_output");
    /* dims no tensor has (the text form cannot write them, the C API can) */
    p = (dt_style_params){.field_mask = DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT,
                          .output_layout = dt_layout_of(dt_shard(DT_MAX_DIMS))};
    ST_FAILS(dt_style_create(DT_STYLE_COLWISE, &p, &s), DT_ERR_INVALID_ARG,
             "colwise style: output_layout[0] S(8): no tensor has that dim (at most 8 dims)");
    p = (dt_style_params){.field_mask = DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS |
                                        DT_STYLE_PARAM_FIELD_DESIRED_INPUT_LAYOUTS,
                          .n_inputs = 1,
                          .input_layouts = {dt_layout_of(dt_replicate())},
                          .desired_input_layouts = {dt_layout_of(dt_shard(100))}};
    ST_FAILS(dt_style_create(DT_STYLE_PREPARE_INPUT, &p, &s), DT_ERR_INVALID_ARG, "S(100)");
    p = (dt_style_params){.field_mask = DT_STYLE_PARAM_FIELD_SEQUENCE_DIM, .sequence_dim = 8};
    ST_FAILS(dt_style_create(DT_STYLE_SEQUENCE, &p, &s), DT_ERR_INVALID_ARG,
             "sequence style: sequence_dim 8 is outside 0..7");
    assert_null(s);
}

/* Parameters of the tiny GPT and how many are distributed. */
static void assert_untouched(dt_module *m)
{
    assert_int_equal(st_count_distributed(m), 0);
}

static void test_validation_leaves_model_untouched(void **state)
{
    (void)state;
    dt_module *m = tiny_gpt(4);
    int shape[2] = {1, 3};
    const char *names[2] = {"dp", "tp"};
    dt_mesh *mesh = virtual_mesh(2, shape, names, 1);
    dt_plan *p = NULL;

    /* a key that matches nothing, named, even after valid keys */
    ST_OK(dt_plan_parse("output=colwise; layers.*.attention.wx=colwise", &p));
    ST_FAILS(dt_parallelize_module(m, mesh, p, "tp"), DT_ERR_NOT_FOUND, "'layers.*.attention.wx'");
    assert_untouched(m);
    dt_plan_destroy(p);

    /* a style on a module type it cannot shard */
    ST_OK(dt_plan_parse("output=colwise; layers.1.ffn_norm=rowwise", &p));
    ST_FAILS(dt_parallelize_module(m, mesh, p, "tp"), DT_ERR_UNSUPPORTED, "LayerNorm");
    ST_FAILS(dt_parallelize_module(m, mesh, p, "tp"), DT_ERR_UNSUPPORTED, "layers.1.ffn_norm");
    assert_untouched(m);
    dt_plan_destroy(p);
    ST_OK(dt_plan_parse("layers.0.attention=sequence", &p));
    ST_FAILS(dt_parallelize_module(m, mesh, p, "tp"), DT_ERR_UNSUPPORTED, "Attention");
    dt_plan_destroy(p);
    ST_OK(dt_plan_parse("layers.0=pairwise", &p));
    ST_FAILS(dt_parallelize_module(m, mesh, p, "tp"), DT_ERR_UNSUPPORTED, "Block");
    dt_plan_destroy(p);

    /* heads not divisible by the tp size (4 heads, tp 3), after valid entries */
    ST_OK(dt_plan_gpt_default(false, &p));
    ST_FAILS(dt_parallelize_module(m, mesh, p, "tp"), DT_ERR_INVALID_ARG, "n_heads 4");
    ST_FAILS(dt_parallelize_module(m, mesh, p, "tp"), DT_ERR_INVALID_ARG, "tp size 3");
    assert_untouched(m);

    /* a shard dim the layer's input cannot have: an Embedding's ids have at most 7 dims */
    dt_plan *q = NULL;
    ST_OK(dt_plan_parse("output=colwise; tok_embeddings=colwise(input=S(7))", &q));
    ST_FAILS(dt_parallelize_module(m, mesh, q, "tp"), DT_ERR_INVALID_ARG,
             "parallelize: 'tok_embeddings', an Embedding: colwise input S(7): its ids have at "
             "most 7 dims");
    assert_untouched(m);
    dt_plan_destroy(q);
    ST_OK(dt_plan_parse("tok_embeddings=prepare_input(input=R, desired=S(7))", &q));
    ST_FAILS(dt_parallelize_module(m, mesh, q, "tp"), DT_ERR_INVALID_ARG,
             "prepare_input desired input S(7)");
    assert_untouched(m);
    dt_plan_destroy(q);
    /* a Linear takes any rank: S(7) exists for 8-dim inputs, so only a forward can refuse it */
    dt_module *g = tiny_gpt(4);
    ST_OK(dt_plan_parse("output=colwise(output=S(7))", &q));
    ST_OK(dt_parallelize_module(g, mesh, q, "tp"));
    dt_plan_destroy(q);
    dt_module_destroy(g);
    /* the root module named in plan text: a bare Linear, rowwise */
    dt_module *lin = NULL;
    ST_OK(dt_linear_create(8, 4, true, &lin));
    ST_OK(dt_plan_parse(" = rowwise", &q));
    ST_OK(dt_parallelize_module(lin, mesh, q, "tp"));
    assert_true(dt_tensor_is_distributed(mr_param_at(lin, "weight")));
    dt_plan_destroy(q);
    dt_module_destroy(lin);

    /* a mesh dim that does not exist */
    ST_FAILS(dt_parallelize_module(m, mesh, p, "mp"), DT_ERR_NOT_FOUND,
             "dt_parallelize_module: the mesh has no dim named 'mp' (dims: dp, tp)");
    assert_untouched(m);
    dt_plan_destroy(p);

    /* two keys on one module; two styles placing one parameter */
    ST_OK(dt_plan_parse("layers.0.attention.wq=colwise; layers.*.attention.wq|wk=rowwise", &p));
    ST_FAILS(dt_parallelize_module(m, mesh, p, "tp"), DT_ERR_INVALID_ARG, "two plan keys");
    dt_plan_destroy(p);
    ST_OK(dt_plan_parse("layers.0.feed_forward=pairwise; layers.*.feed_forward.w2=rowwise", &p));
    ST_FAILS(dt_parallelize_module(m, mesh, p, "tp"), DT_ERR_INVALID_ARG, "layers.0.feed_forward");
    assert_untouched(m);
    dt_plan_destroy(p);
    dt_mesh_release(mesh);
    dt_module_destroy(m);
}

static void assert_placed(dt_module *m, const char *fqn, dt_placement pl, int64_t d0, int64_t d1)
{
    dt_tensor *t = mr_param_at(m, fqn);
    assert_non_null(t);
    if (!dt_tensor_is_distributed(t))
        fail_msg("%s is not distributed", fqn);
    const dt_placement *got = dt_tensor_placements(t);
    dt_placement want;
    ST_OK(dt_placement_normalize(pl, dt_tensor_ndim(t), &want));
    if (!dt_placement_equal(got[0], want))
        fail_msg("%s placed %d/%d, want %d/%d", fqn, got[0].kind, got[0].dim, want.kind, want.dim);
    dt_tensor *l = dt_to_local(t);
    assert_int_equal(dt_tensor_dim(l, 0), d0);
    if (d1 >= 0)
        assert_int_equal(dt_tensor_dim(l, 1), d1);
    assert_int_equal(dt_tensor_mem_category(l), DT_MEM_PARAMETER);
}

/* tp 3 on a 1x3 mesh, rank 2: 6 heads of 8 (dim 48), ffn 256 and vocab 256 uneven (86,86,84). */
static void test_parallelize_placements(void **state)
{
    (void)state;
    dt_gpt_config cfg;
    ST_OK(dt_gpt_config_preset("tiny", &cfg));
    cfg.dim = 48, cfg.n_heads = 6;
    dt_module *m = NULL, *ref = NULL;
    ST_OK(dt_gpt_create(&cfg, 7, &m));
    ST_OK(dt_gpt_create(&cfg, 7, &ref));
    int shape[2] = {1, 3};
    const char *names[2] = {"dp", "tp"};
    dt_mesh *mesh = virtual_mesh(2, shape, names, 2);
    dt_plan *p = NULL;
    ST_OK(dt_plan_gpt_default(false, &p));
    ST_OK(dt_parallelize_module(m, mesh, p, "tp"));
    assert_placed(m, "tok_embeddings.weight", dt_shard(0), 84, 48);
    assert_placed(m, "layers.1.attention.wq.weight", dt_shard(0), 16, 48);
    assert_placed(m, "layers.1.attention.wk.bias", dt_shard(0), 16, -1);
    assert_placed(m, "layers.0.attention.wo.weight", dt_shard(1), 48, 16);
    assert_placed(m, "layers.0.attention.wo.bias", dt_replicate(), 48, -1);
    assert_placed(m, "layers.0.feed_forward.w1.weight", dt_shard(0), 84, 48);
    assert_placed(m, "layers.0.feed_forward.w2.weight", dt_shard(1), 48, 84);
    assert_placed(m, "output.weight", dt_shard(0), 84, 48);
    assert_false(dt_tensor_is_distributed(mr_param_at(m, "pos_embeddings.weight")));
    assert_false(dt_tensor_is_distributed(mr_param_at(m, "layers.0.ffn_norm.weight")));
    /* each shard is the slice of the full parameter (values kept) */
    dt_tensor *full = mr_param_at(ref, "layers.0.feed_forward.w2.weight"), *sl = NULL, *c = NULL;
    ST_OK(dt_tensor_narrow(full, 1, 172, 84, &sl));
    ST_OK(dt_tensor_clone(sl, &c));
    assert_true(dt_tensor_equal(c, dt_to_local(mr_param_at(m, "layers.0.feed_forward.w2.weight"))));
    dt_tensor_release(c);
    dt_tensor_release(sl);
    /* parallelizing twice is refused by name */
    ST_FAILS(dt_parallelize_module(m, mesh, p, "tp"), DT_ERR_INVALID_ARG, "already distributed");

    /* the explain text */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ST_OK(dt_plan_explain(m, mesh, p, "tp", f));
    fclose(f);
    assert_non_null(strstr(text, "layers.0.attention.wq"));
    assert_non_null(strstr(text, "colwise(output=S(-1), local=false)"));
    assert_non_null(strstr(text, "local [84, 48]"));
    assert_non_null(strstr(text, "parameters on this rank:"));
    free(text);
    dt_plan_destroy(p);
    dt_mesh_release(mesh);
    dt_module_destroy(ref);
    dt_module_destroy(m);
}

/* explain before parallelizing shows what the plan would do, and changes nothing. */
static void test_explain_before(void **state)
{
    (void)state;
    dt_module *m = tiny_gpt_layers(4, 8); /* 8 layers: more than a hundred parameters placed */
    int shape = 4;
    const char *names[1] = {"tp"};
    dt_mesh *mesh = virtual_mesh(1, &shape, names, 3);
    dt_plan *p = NULL;
    ST_OK(dt_plan_gpt_default(true, &p));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ST_OK(dt_plan_explain(m, mesh, p, "tp", f));
    fclose(f);
    /* vocab 256 / 4 = 64 rows; wo S(1): 16 input columns; norms replicated */
    assert_non_null(strstr(text, "weight   S(0)     global [256, 64]      local [64, 64]"));
    assert_non_null(strstr(text, "weight   S(1)     global [64, 64]       local [64, 16]"));
    assert_non_null(strstr(text, "weight   R        global [64]"));
    assert_non_null(strstr(text, "sequence"));
    const char *last = strstr(text, "layers.7.feed_forward.w2 ");
    assert_non_null(last);
    assert_non_null(strstr(last, "weight   S(1)     global [64, 256]      local [64, 64]"));
    assert_untouched(m);
    free(text);
    dt_plan_destroy(p);
    dt_mesh_release(mesh);
    dt_module_destroy(m);
}

/* A segment glob and alternatives match exactly one path segment each. */
static void test_matching(void **state)
{
    (void)state;
    dt_module *m = tiny_gpt(4);
    int shape = 2;
    dt_mesh *mesh = virtual_mesh(1, &shape, (const char *const[]){"tp"}, 0);
    dt_plan *p = NULL;
    /* "*" does not cross dots: layers.* is a Block, not a Linear */
    ST_OK(dt_plan_parse("layers.*=colwise", &p));
    ST_FAILS(dt_parallelize_module(m, mesh, p, "tp"), DT_ERR_UNSUPPORTED, "Block");
    dt_plan_destroy(p);
    ST_OK(dt_plan_parse("*.attention.wq=colwise", &p));
    ST_FAILS(dt_parallelize_module(m, mesh, p, "tp"), DT_ERR_NOT_FOUND, "'*.attention.wq'");
    dt_plan_destroy(p);
    ST_OK(dt_plan_parse("layers.[01].feed_forward.w?=pairwise", &p));
    ST_FAILS(dt_parallelize_module(m, mesh, p, "tp"), DT_ERR_UNSUPPORTED,
             "layers.0.feed_forward.w1");
    dt_plan_destroy(p);
    ST_OK(dt_plan_parse("layers.1.feed_forward=pairwise; layers.0.attention=pairwise", &p));
    ST_OK(dt_parallelize_module(m, mesh, p, "tp"));
    assert_int_equal(st_count_distributed(m), 4 + 8);
    dt_plan_destroy(p);
    dt_mesh_release(mesh);
    dt_module_destroy(m);
}

/* The TorchShard-style linear on a one-rank virtual mesh: placements by dim. */
static void test_parallel_linear(void **state)
{
    (void)state;
    int shape = 2;
    dt_mesh *mesh = virtual_mesh(1, &shape, (const char *const[]){"tp"}, 1);
    dt_module *a = NULL, *b = NULL, *c = NULL;
    ST_OK(dt_parallel_linear_create(6, 5, true, 1, mesh, "tp", &a));
    assert_placed(a, "weight", dt_shard(0), 2, 6);
    assert_placed(a, "bias", dt_shard(0), 2, -1);
    ST_OK(dt_parallel_linear_create(6, 5, true, 0, mesh, "tp", &b));
    assert_placed(b, "weight", dt_shard(1), 5, 3);
    assert_placed(b, "bias", dt_replicate(), 5, -1);
    ST_OK(dt_parallel_linear_create(6, 5, false, -1, mesh, "tp", &c));
    assert_int_equal(st_count_distributed(c), 0);
    dt_module *d = NULL;
    ST_FAILS(dt_parallel_linear_create(6, 5, false, 2, mesh, "tp", &d), DT_ERR_INVALID_ARG,
             "dim 2");
    ST_FAILS(dt_parallel_linear_create(6, 5, false, 0, mesh, "xx", &d), DT_ERR_NOT_FOUND, "xx");
    dt_tensor *logits = NULL, *t = NULL, *loss = NULL;
    int64_t ls[2] = {3, 4};
    ST_OK(dt_tensor_zeros(2, ls, DT_DTYPE_F32, dt_device_cpu(), &logits));
    ST_OK(dt_tensor_zeros(1, ls, DT_DTYPE_I64, dt_device_cpu(), &t));
    ST_FAILS(dt_parallel_cross_entropy(logits, t, &loss), DT_ERR_INVALID_ARG, "local tensor");
    dt_tensor_release(logits);
    dt_tensor_release(t);
    dt_module_destroy(a);
    dt_module_destroy(b);
    dt_module_destroy(c);
    dt_mesh_release(mesh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_default_plans),
        cmocka_unit_test(test_shipped_plan_files),
        cmocka_unit_test(test_parse_forms),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_style_create_errors),
        cmocka_unit_test(test_validation_leaves_model_untouched),
        cmocka_unit_test(test_parallelize_placements),
        cmocka_unit_test(test_explain_before),
        cmocka_unit_test(test_matching),
        cmocka_unit_test(test_parallel_linear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
