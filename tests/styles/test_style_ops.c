/*
 * The built-in styles and a program's styles are one mechanism (issue 22):
 * the built-ins are found by name in the same registry a program's style is
 * added to, and a program that re-implements ColwiseParallel and
 * PairwiseParallel purely through the public dt_style_ops gets, on 2 and 3
 * ranks (uneven shards), the same parameter placements, the same plan text
 * and bit for bit the same outputs and gradients as the built-in styles,
 * and both match one rank's computation.
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

/* ---------------------------------------------------------------- ColwiseParallel, by hand */

static dt_status my_colwise_defaults(dt_style_params *p)
{
    if (p->field_mask & DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS) {
        if (p->n_inputs != 1)
            return dt_set_error(DT_ERR_INVALID_ARG, "one input layout, got %d", p->n_inputs);
    } else {
        p->n_inputs = 1;
        p->input_layouts[0] = dt_layout_of(dt_replicate());
    }
    p->desired_input_layouts[0] = dt_layout_of(dt_replicate());
    if (!(p->field_mask & DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT))
        p->output_layout = dt_layout_of(dt_shard(-1));
    if (!(p->field_mask & DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT))
        p->use_local_output = true;
    return DT_OK;
}

/* Output features sharded: weight [out, in] S(0), bias [out] S(0). */
static dt_status my_colwise_params(dt_module *m, const char *fqn, dt_style_param_placement *out,
                                   int *n)
{
    if (strcmp(dt_module_type_name(m), "Linear") != 0 || dt_module_param(m, "weight") == NULL)
        return dt_set_error(DT_ERR_UNSUPPORTED, "'%s' is a %s, not a Linear", fqn,
                            dt_module_type_name(m));
    out[(*n)++] = (dt_style_param_placement){"weight", dt_shard(0)};
    if (dt_module_param(m, "bias") != NULL)
        out[(*n)++] = (dt_style_param_placement){"bias", dt_shard(0)};
    return DT_OK;
}

static dt_status my_colwise_io(const dt_style *s, dt_module *m, dt_style_io *io)
{
    (void)m;
    const dt_style_params *o = dt_style_options(s);
    io->n_inputs = 1;
    io->input[0] = o->input_layouts[0];
    io->desired_input[0] = o->desired_input_layouts[0];
    io->output = dt_layout_of(dt_shard(-1)); /* what the linear rule leaves */
    io->desired_output = o->output_layout;
    io->local_output = o->use_local_output;
    return DT_OK;
}

static const dt_style_ops my_colwise = {
    .field_mask = DT_STYLE_OPS_FIELD_OPTIONS | DT_STYLE_OPS_FIELD_PLAN_IO,
    .name = "my_colwise",
    .plan_params = my_colwise_params,
    .options = DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS | DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT |
               DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT,
    .defaults = my_colwise_defaults,
    .plan_io = my_colwise_io,
};

/* ---------------------------------------------------------------- PairwiseParallel, by hand */

/* A style found by name in the registry, with default options. */
static dt_status named_style(const char *name, dt_style **out)
{
    const dt_style_ops *ops = NULL;
    dt_status s = dt_style_find(name, &ops);
    return s == DT_OK ? dt_style_create_ops(ops, NULL, out) : s;
}

/* A FeedForward's w1 my_colwise, w2 the registry's rowwise. */
static dt_status my_pairwise_children(const dt_style *s, dt_module *m, const char *fqn,
                                      dt_style_child *out, int *n)
{
    (void)s;
    dt_module *w1 = dt_module_child(m, "w1"), *w2 = dt_module_child(m, "w2");
    if (w1 == NULL || w2 == NULL)
        return dt_set_error(DT_ERR_UNSUPPORTED, "'%s' has no w1 and w2", fqn);
    out[*n] = (dt_style_child){.module = w1};
    DT_TRY_RETURN(named_style("my_colwise", &out[*n].style));
    (*n)++;
    out[*n] = (dt_style_child){.module = w2};
    DT_TRY_RETURN(named_style("rowwise", &out[*n].style));
    (*n)++;
    return DT_OK;
}

static const dt_style_ops my_pairwise = {
    .field_mask = DT_STYLE_OPS_FIELD_CHILDREN,
    .name = "my_pairwise",
    .children = my_pairwise_children,
};

/* A composite style that names a module outside the one it is given. */
static dt_status stray_children(const dt_style *s, dt_module *m, const char *fqn,
                                dt_style_child *out, int *n)
{
    (void)fqn;
    out[*n] = (dt_style_child){.module = m, .style = dt_style_retain((dt_style *)s)};
    (*n)++;
    return DT_OK;
}

/* A composite style that gives one child two styles placing its weight. */
static dt_status twice_children(const dt_style *s, dt_module *m, const char *fqn,
                                dt_style_child *out, int *n)
{
    (void)s, (void)fqn;
    for (int i = 0; i < 2; i++) {
        out[*n] = (dt_style_child){.module = dt_module_child(m, "w1")};
        DT_TRY_RETURN(named_style(i == 0 ? "colwise" : "rowwise", &out[*n].style));
        (*n)++;
    }
    return DT_OK;
}

static const dt_style_ops twice = {
    .field_mask = DT_STYLE_OPS_FIELD_CHILDREN, .name = "twice", .children = twice_children};

static const dt_style_ops stray = {
    .field_mask = DT_STYLE_OPS_FIELD_CHILDREN, .name = "stray", .children = stray_children};

/* A style whose io the library must refuse before changing anything. */
static dt_status bad_io(const dt_style *s, dt_module *m, dt_style_io *io)
{
    (void)s, (void)m;
    io->n_inputs = 1;
    io->desired_input[0] = dt_layout_of(dt_partial(DT_REDUCE_OP_SUM));
    return DT_OK;
}

static const dt_style_ops bad_io_style = {
    .field_mask = DT_STYLE_OPS_FIELD_PLAN_IO, .name = "bad_io", .plan_io = bad_io};

/* ---------------------------------------------------------------- helpers */

static void assert_same(const char *what, dt_tensor *a, dt_tensor *b)
{
    if (!dt_tensor_equal(a, b))
        fail_msg("%s: the user style and the built-in one differ", what);
}

static dt_tensor *input(int64_t n, int64_t d, uint64_t seed)
{
    return mr_randn(2, (int64_t[]){n, d}, seed, true);
}

/* sum(y * y) of a local or distributed y, backward, and y's full value. */
static dt_tensor *forward_backward(dt_module *m, dt_tensor *x)
{
    dt_tensor *y = NULL;
    ST_OK(dt_module_call(m, x, &y));
    dt_tensor *l = mr_square_sum(y);
    ST_OK(dt_backward(l, NULL));
    dt_tensor *f = mr_full(y);
    dt_tensor_release(l), dt_tensor_release(y);
    return f;
}

/* @p text with every @p from replaced by @p to (new string). */
static char *replace_all(const char *text, const char *from, const char *to)
{
    size_t nf = strlen(from), nt = strlen(to), n = 0;
    for (const char *p = strstr(text, from); p != NULL; p = strstr(p + nf, from))
        n++;
    char *out = malloc(strlen(text) + n * nt + 1), *w = out;
    for (const char *p = text;;) {
        const char *hit = strstr(p, from);
        if (hit == NULL) {
            strcpy(w, p);
            break;
        }
        memcpy(w, p, (size_t)(hit - p));
        w += hit - p;
        memcpy(w, to, nt);
        w += nt;
        p = hit + nf;
    }
    return out;
}

static char *explain(dt_module *m, const dt_plan *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ST_OK(dt_plan_explain(m, mesh, p, "tp", f));
    fclose(f);
    return text;
}

/* The explain text of @p user's plan reads as @p builtin's once the style
 * names are swapped: same styles, options, placements, shapes and bytes. */
static void assert_same_explain(dt_module *a, const dt_plan *pa, dt_module *b, const dt_plan *pb,
                                const char *builtin_name, const char *user_name)
{
    char *ta = explain(a, pa), *tb = explain(b, pb);
    char *tb_named = replace_all(tb, user_name, builtin_name);
    assert_non_null(strstr(tb, user_name));
    assert_string_equal(ta, tb_named);
    free(ta), free(tb), free(tb_named);
}

/* Every parameter of @p a and @p b: the same placements and local shards, bit for bit. */
static void assert_same_params(dt_module *a, dt_module *b, const char *const *fqns, int n)
{
    for (int i = 0; i < n; i++) {
        dt_tensor *pa = mr_param_at(a, fqns[i]), *pb = mr_param_at(b, fqns[i]);
        assert_true(dt_tensor_is_distributed(pa));
        assert_true(dt_tensor_is_distributed(pb));
        if (!dt_placement_equal(dt_tensor_placements(pa)[0], dt_tensor_placements(pb)[0]))
            fail_msg("%s: placed differently by the user style", fqns[i]);
        assert_same(fqns[i], dt_to_local(pa), dt_to_local(pb));
    }
}

/* The full gradients of @p a (built-in style) and @p b (user style): the same
 * bits, and close to the single-rank @p ref's. */
static void assert_same_grads(dt_module *a, dt_module *b, dt_module *ref, const char *const *fqns,
                              int n)
{
    for (int i = 0; i < n; i++) {
        dt_tensor *ga = mr_full_grad(mr_param_at(a, fqns[i])),
                  *gb = mr_full_grad(mr_param_at(b, fqns[i]));
        assert_same(fqns[i], ga, gb);
        mr_assert_close(fqns[i], ga, dt_tensor_grad(mr_param_at(ref, fqns[i])), 1e-5);
        dt_tensor_release(ga), dt_tensor_release(gb);
    }
}

/* ---------------------------------------------------------------- tests */

static void test_one_registry(void **state)
{
    (void)state;
    const dt_style_ops *ops = NULL, *alias = NULL;
    dt_style *col = NULL, *row = NULL, *pair = NULL, *seq = NULL;
    ST_OK(dt_style_colwise(&col));
    ST_OK(dt_style_rowwise(&row));
    ST_OK(dt_style_pairwise(&pair));
    ST_OK(dt_style_sequence(&seq));
    dt_style *builtins[4] = {col, row, pair, seq};
    /* every built-in is found by its name, and is the ops its shorthand makes */
    for (int i = 0; i < 4; i++) {
        const char *name = dt_style_get_ops(builtins[i])->name;
        ST_OK(dt_style_find(name, &ops));
        assert_ptr_equal(ops, dt_style_get_ops(builtins[i]));
        assert_string_equal(name, dt_style_kind_name(dt_style_get_kind(builtins[i])));
    }
    ST_OK(dt_style_find("ColwiseParallel", &alias));
    assert_ptr_equal(alias, dt_style_get_ops(col));
    ST_FAILS(dt_style_find("colwize", &ops), DT_ERR_NOT_FOUND, "'colwize'");

    /* a program's styles go into the same table; built-in names are taken */
    ST_OK(dt_style_register(&my_colwise));
    ST_OK(dt_style_register(&my_pairwise));
    ST_OK(dt_style_find("my_colwise", &ops));
    assert_ptr_equal(ops, &my_colwise);
    ST_FAILS(dt_style_register(&my_colwise), DT_ERR_INVALID_ARG,
             "a style named 'my_colwise' exists already (registered)");
    dt_style_ops taken = my_colwise;
    taken.name = "rowwise";
    ST_FAILS(dt_style_register(&taken), DT_ERR_INVALID_ARG,
             "a style named 'rowwise' exists already (built-in)");
    taken.name = "PairwiseParallel";
    ST_FAILS(dt_style_register(&taken), DT_ERR_INVALID_ARG, "'PairwiseParallel' exists already");
    /* a later member without its field bit would be ignored: refused instead */
    taken.name = "no_bit";
    taken.field_mask = DT_STYLE_OPS_FIELD_OPTIONS;
    ST_FAILS(dt_style_register(&taken), DT_ERR_INVALID_ARG,
             "plan_io is set but field_mask lacks DT_STYLE_OPS_FIELD_PLAN_IO");

    /* created through the registry, a built-in is the same style as its shorthand */
    dt_style *by_name = NULL, *mine = NULL;
    ST_OK(dt_style_find("rowwise", &ops));
    ST_OK(dt_style_create_ops(ops, NULL, &by_name));
    assert_int_equal(dt_style_get_kind(by_name), DT_STYLE_ROWWISE);
    ST_OK(dt_style_from_ops(&my_colwise, &mine));
    assert_int_equal(dt_style_get_kind(mine), DT_STYLE_USER);
    /* options: those the style takes, checked the same way for both */
    dt_style_params p = {.field_mask = DT_STYLE_PARAM_FIELD_SEQUENCE_DIM, .sequence_dim = 1};
    dt_style *s = NULL;
    ST_FAILS(dt_style_create_ops(&my_colwise, &p, &s), DT_ERR_INVALID_ARG,
             "my_colwise style: takes no option sequence_dim");
    p = (dt_style_params){.field_mask = DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS, .n_inputs = 2};
    ST_FAILS(dt_style_create_ops(&my_colwise, &p, &s), DT_ERR_INVALID_ARG,
             "my_colwise style: one input layout, got 2");
    assert_null(s);
    dt_style *objs[] = {col, row, pair, seq, by_name, mine};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        dt_style_release(objs[i]);
}

static dt_module *two_linears(void)
{
    dt_module *seq = NULL, *a = NULL, *b = NULL;
    ST_OK(dt_sequential_create(&seq));
    ST_OK(dt_linear_create(7, 10, true, &a));
    ST_OK(dt_sequential_append(seq, a));
    ST_OK(dt_linear_create(10, 5, true, &b));
    ST_OK(dt_sequential_append(seq, b));
    mr_init_params(seq, 41, 0.5);
    return seq;
}

/* Plan @p builtin_text against the same plan with my_colwise for colwise. */
static void compare_colwise(const char *builtin_text)
{
    char *user_text = replace_all(builtin_text, "colwise", "my_colwise");
    dt_module *a = two_linears(), *b = two_linears(), *ref = two_linears();
    dt_plan *pa = NULL, *pb = NULL;
    ST_OK(dt_plan_parse(builtin_text, &pa));
    ST_OK(dt_plan_parse(user_text, &pb));
    assert_same_explain(a, pa, b, pb, "colwise", "my_colwise"); /* before: what it would do */
    ST_OK(dt_parallelize_module(a, mesh, pa, "tp"));
    ST_OK(dt_parallelize_module(b, mesh, pb, "tp"));
    assert_same_explain(a, pa, b, pb, "colwise", "my_colwise"); /* after: what it did */
    static const char *const fqns[4] = {"0.weight", "0.bias", "1.weight", "1.bias"};
    assert_same_params(a, b, fqns, 4);

    dt_tensor *xa = input(6, 7, 5), *xb = input(6, 7, 5), *xr = input(6, 7, 5);
    /* the styled layer alone: handed on alike (local or not), the same values */
    dt_tensor *ha = NULL, *hb = NULL;
    ST_OK(dt_module_call(dt_module_child(a, "0"), xa, &ha));
    ST_OK(dt_module_call(dt_module_child(b, "0"), xb, &hb));
    assert_int_equal(dt_tensor_is_distributed(ha), dt_tensor_is_distributed(hb));
    assert_same("layer 0 output", dt_tensor_is_distributed(ha) ? dt_to_local(ha) : ha,
                dt_tensor_is_distributed(hb) ? dt_to_local(hb) : hb);
    dt_tensor_release(ha), dt_tensor_release(hb);
    dt_tensor *ya = forward_backward(a, xa), *yb = forward_backward(b, xb);
    dt_tensor *yr = forward_backward(ref, xr);
    assert_same(builtin_text, ya, yb);
    mr_assert_close(builtin_text, ya, yr, 1e-5);
    assert_same("x.grad", dt_tensor_grad(xa), dt_tensor_grad(xb));
    mr_assert_close("x.grad", dt_tensor_grad(xa), dt_tensor_grad(xr), 1e-5);
    assert_same_grads(a, b, ref, fqns, 4);
    dt_tensor *objs[] = {xa, xb, xr, ya, yb, yr};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        dt_tensor_release(objs[i]);
    dt_plan_destroy(pa), dt_plan_destroy(pb);
    dt_module_destroy(a), dt_module_destroy(b), dt_module_destroy(ref);
    free(user_text);
}

static void test_user_colwise_is_colwise(void **state)
{
    (void)state;
    compare_colwise("0 = colwise; 1 = rowwise");
    compare_colwise("0 = colwise(output=R, local=false); 1 = rowwise");
    compare_colwise("0 = colwise(local=false); 1 = rowwise(local=false)");
}

static dt_module *ffn(void)
{
    dt_module *m = NULL;
    ST_OK(dt_feed_forward_create(6, 10, &m));
    mr_init_params(m, 43, 0.5);
    return m;
}

static void test_user_pairwise_is_pairwise(void **state)
{
    (void)state;
    dt_module *a = ffn(), *b = ffn(), *ref = ffn();
    dt_plan *pa = NULL, *pb = NULL;
    ST_OK(dt_plan_parse(" = pairwise", &pa));
    ST_OK(dt_plan_parse(" = my_pairwise", &pb));
    assert_same_explain(a, pa, b, pb, "pairwise", "my_pairwise");
    ST_OK(dt_parallelize_module(a, mesh, pa, "tp"));
    ST_OK(dt_parallelize_module(b, mesh, pb, "tp"));
    static const char *const fqns[4] = {"w1.weight", "w1.bias", "w2.weight", "w2.bias"};
    assert_same_params(a, b, fqns, 4);
    dt_tensor *xa = input(5, 6, 7), *xb = input(5, 6, 7), *xr = input(5, 6, 7);
    dt_tensor *ya = forward_backward(a, xa), *yb = forward_backward(b, xb);
    dt_tensor *yr = forward_backward(ref, xr);
    assert_same("pairwise output", ya, yb);
    mr_assert_close("pairwise output", ya, yr, 1e-5);
    assert_same_grads(a, b, ref, fqns, 4);
    dt_tensor *objs[] = {xa, xb, xr, ya, yb, yr};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        dt_tensor_release(objs[i]);
    dt_plan_destroy(pa), dt_plan_destroy(pb);
    dt_module_destroy(a), dt_module_destroy(b), dt_module_destroy(ref);
}

/* A composite style's plan is not bounded by DT_STYLE_MAX_PARAMS (a bound on
 * one module's own parameters): pairwise on 12 biased Linears places 24. */
static void test_pairwise_many_layers(void **state)
{
    (void)state;
    dt_module *m = NULL, *ref = NULL, *l = NULL;
    ST_OK(dt_sequential_create(&m));
    ST_OK(dt_sequential_create(&ref));
    for (int i = 0; i < 12; i++) {
        ST_OK(dt_linear_create(5, 5, true, &l));
        ST_OK(dt_sequential_append(m, l));
        ST_OK(dt_linear_create(5, 5, true, &l));
        ST_OK(dt_sequential_append(ref, l));
    }
    mr_init_params(m, 47, 0.5), mr_init_params(ref, 47, 0.5);
    dt_plan *p = NULL;
    ST_OK(dt_plan_parse(" = pairwise", &p));
    ST_OK(dt_parallelize_module(m, mesh, p, "tp"));
    assert_int_equal(st_count_distributed(m), 24);
    dt_tensor *x = input(3, 5, 9), *xr = input(3, 5, 9);
    dt_tensor *y = forward_backward(m, x), *yr = forward_backward(ref, xr);
    mr_assert_close("12 layers", y, yr, 1e-5);
    dt_tensor_release(x), dt_tensor_release(xr), dt_tensor_release(y), dt_tensor_release(yr);
    dt_plan_destroy(p);
    dt_module_destroy(m), dt_module_destroy(ref);
}

/* Refusals of a program's style, like a built-in's, leave the model untouched. */
static void test_refused_before_change(void **state)
{
    (void)state;
    dt_module *m = ffn();
    dt_plan *p = NULL;
    dt_style *st = NULL;
    ST_OK(dt_plan_parse("w1 = colwise; w2 = my_pairwise", &p)); /* a Linear has no w1, w2 */
    ST_FAILS(dt_parallelize_module(m, mesh, p, "tp"), DT_ERR_UNSUPPORTED,
             "parallelize: style 'my_pairwise' refused 'w2': 'w2' has no w1 and w2");
    assert_int_equal(st_count_distributed(m), 0);
    dt_plan_destroy(p);
    ST_OK(dt_plan_parse("w1 = my_colwise(output=S(0)); w2 = my_colwise(input=S(0))", &p));
    dt_module *lin = dt_module_child(m, "w1");
    ST_OK(dt_style_from_ops(&stray, &st));
    ST_FAILS(dt_style_check(st, m, "ffn", 2), DT_ERR_INVALID_ARG, "not a module below it");
    dt_style_release(st);
    ST_OK(dt_style_from_ops(&twice, &st));
    ST_FAILS(dt_style_check(st, m, "ffn", 2), DT_ERR_INVALID_ARG,
             "parameter 'weight' of 'w1' is placed twice");
    dt_style_release(st);
    ST_OK(dt_style_from_ops(&bad_io_style, &st));
    ST_FAILS(dt_style_check(st, lin, "ffn.w1", 2), DT_ERR_INVALID_ARG,
             "style 'bad_io' refused 'ffn.w1': bad_io style: io desired_input[0] cannot be "
             "Partial");
    ST_OK(dt_plan_add(p, "", st)); /* after two valid entries */
    ST_FAILS(dt_parallelize_module(m, mesh, p, "tp"), DT_ERR_INVALID_ARG, "cannot be Partial");
    assert_int_equal(st_count_distributed(m), 0);
    dt_style_release(st);
    dt_plan_destroy(p);
    dt_module_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_registry),
        cmocka_unit_test(test_user_colwise_is_colwise),
        cmocka_unit_test(test_user_pairwise_is_pairwise),
        cmocka_unit_test(test_pairwise_many_layers),
        cmocka_unit_test(test_refused_before_change),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
