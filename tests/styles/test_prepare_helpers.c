/*
 * PyTorch's tensor-parallel prepare helpers (make_input_replicate_1d, ...) on
 * 2 and 3 ranks: each one's placements and values against the single-rank
 * tensor, the 1-d mesh checks, and a Colwise style that takes them as its
 * prepare functions (PyTorch 1.13's ColwiseParallel(_prepare_input=...,
 * _prepare_output=...)) giving the single-rank Linear's output on every rank.
 */
#include "st_util.h"

static dt_mesh *mesh, *mesh2d;

static int setup(void **state)
{
    if (mr_setup(state) != 0)
        return -1;
    int w = dt_runtime_size(mr_rt), shape2[2] = {1, w};
    const char *names[1] = {"tp"}, *names2[2] = {"dp", "tp"};
    if (dt_mesh_create(mr_rt, 1, &w, names, &mesh) != DT_OK)
        return -1;
    return dt_mesh_create(mr_rt, 2, shape2, names2, &mesh2d) == DT_OK ? 0 : -1;
}

static int teardown(void **state)
{
    dt_mesh_release(mesh);
    dt_mesh_release(mesh2d);
    return mr_teardown(state);
}

/* The same [6, 5] values on every rank: element (i, j) = 10 i + j. */
static dt_tensor *whole(void)
{
    float v[30];
    for (int i = 0; i < 30; i++)
        v[i] = (float)(10 * (i / 5) + i % 5);
    dt_tensor *t = NULL;
    ST_OK(dt_tensor_from_buffer(2, (int64_t[]){6, 5}, DT_DTYPE_F32, v, &t));
    return t;
}

/* @p d (distributed) has placement @p p and full value @p want. */
static void expect_dist(const char *what, dt_tensor *d, dt_placement p, dt_tensor *want)
{
    assert_true(dt_tensor_is_distributed(d));
    if (!dt_placement_equal(dt_tensor_placements(d)[0], p))
        fail_msg("%s: wrong placement", what);
    dt_tensor *f = NULL;
    ST_OK(dt_full_tensor(d, &f));
    for (int64_t i = 0; i < dt_tensor_numel(want); i++)
        if (dt_tensor_item_at(f, i) != dt_tensor_item_at(want, i))
            fail_msg("%s: element %lld is %g, want %g", what, (long long)i, dt_tensor_item_at(f, i),
                     dt_tensor_item_at(want, i));
    dt_tensor_release(f);
}

/* This rank's piece of @p full along @p dim (torch.chunk), a new local tensor. */
static dt_tensor *piece(dt_tensor *full, int dim)
{
    dt_tensor *d = NULL, *l = NULL;
    ST_OK(dt_distribute(full, mesh, 1, (dt_placement[]){dt_shard(dim)}, &d));
    ST_OK(dt_tensor_contiguous(dt_to_local(d), &l));
    dt_tensor_release(d);
    return l;
}

static void test_inputs(void **state)
{
    (void)state;
    dt_tensor *w = whole(), *r = NULL, *s0 = NULL, *s1 = NULL, *rr = NULL, *p0 = piece(w, 0);
    dt_tensor *p1 = piece(w, 1), *rd = NULL;
    ST_OK(dt_make_input_replicate_1d(w, mesh, &r)); /* local: every rank's copy */
    expect_dist("make_input_replicate_1d", r, dt_replicate(), w);
    ST_OK(dt_make_input_shard_1d(p0, mesh, 0, &s0)); /* local: this rank's rows */
    expect_dist("make_input_shard_1d(0)", s0, dt_shard(0), w);
    ST_OK(dt_make_input_shard_1d_last_dim(p1, mesh, &s1));
    expect_dist("make_input_shard_1d_last_dim", s1, dt_shard(1), w);
    ST_OK(dt_make_input_reshard_replicate(p0, mesh, &rr));
    expect_dist("make_input_reshard_replicate", rr, dt_replicate(), w);
    ST_OK(dt_make_input_replicate_1d(s1, NULL, &rd)); /* distributed: redistributed, own mesh */
    expect_dist("make_input_replicate_1d of S(1)", rd, dt_replicate(), w);
    dt_tensor *objs[] = {w, r, s0, s1, rr, p0, p1, rd};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        dt_tensor_release(objs[i]);
}

static void test_outputs(void **state)
{
    (void)state;
    dt_tensor *w = whole(), *d = NULL, *r = NULL, *s = NULL, *t = NULL, *rs = NULL, *sh = NULL;
    ST_OK(dt_distribute(w, mesh, 1, (dt_placement[]){dt_shard(1)}, &d));
    ST_OK(dt_make_output_replicate_1d(d, NULL, &r));
    expect_dist("make_output_replicate_1d", r, dt_replicate(), w);
    ST_OK(dt_make_output_shard_1d(d, mesh, 0, &s));
    expect_dist("make_output_shard_1d(0)", s, dt_shard(0), w);
    ST_OK(dt_make_output_tensor(d, NULL, &t)); /* the whole output, local, on every rank */
    assert_false(dt_tensor_is_distributed(t));
    for (int64_t i = 0; i < 30; i++)
        assert_true(dt_tensor_item_at(t, i) == dt_tensor_item_at(w, i));
    ST_OK(dt_make_output_reshard_tensor(d, NULL, &rs)); /* this rank's rows */
    dt_tensor *p0 = piece(w, 0), *p1 = piece(w, 1);
    assert_int_equal(dt_tensor_numel(rs), dt_tensor_numel(p0));
    for (int64_t i = 0; i < dt_tensor_numel(p0); i++)
        assert_true(dt_tensor_item_at(rs, i) == dt_tensor_item_at(p0, i));
    ST_OK(dt_make_sharded_output_tensor(d, NULL, &sh)); /* the shard as it is */
    assert_ptr_equal(sh, dt_to_local(d));
    assert_int_equal(dt_tensor_numel(sh), dt_tensor_numel(p1));
    dt_tensor *objs[] = {w, d, r, s, t, rs, sh, p0, p1};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        dt_tensor_release(objs[i]);
}

static void test_checks(void **state)
{
    (void)state;
    dt_tensor *w = whole(), *o = NULL;
    ST_FAILS(dt_make_input_replicate_1d(w, NULL, &o), DT_ERR_INVALID_ARG,
             "dt_make_input_replicate_1d: no mesh given, and a local tensor has none");
    ST_FAILS(dt_make_input_shard_1d(w, mesh2d, 0, &o), DT_ERR_INVALID_ARG,
             "dt_make_input_shard_1d: the mesh has 2 dims, expected 1");
    ST_FAILS(dt_make_output_tensor(w, mesh, &o), DT_ERR_INVALID_ARG,
             "dt_make_output_tensor: expects the distributed output");
    ST_FAILS(dt_make_sharded_output_tensor(w, mesh, &o), DT_ERR_INVALID_ARG, "got a local tensor");
    assert_null(o);
    dt_style *s = NULL;
    dt_style_params p = {.field_mask = DT_STYLE_PARAM_FIELD_PREPARE_INPUT};
    ST_FAILS(dt_style_create(DT_STYLE_COLWISE, &p, &s), DT_ERR_INVALID_ARG,
             "colwise style: option prepare_input is NULL");
    p.prepare_input = dt_make_input_replicate_1d;
    ST_FAILS(dt_style_create(DT_STYLE_SEQUENCE, &p, &s), DT_ERR_INVALID_ARG,
             "sequence style: takes no option prepare_input");
    dt_tensor_release(w);
}

/* Colwise with prepare functions: the replicated input in, the whole output out. */
static void test_style_prepare_functions(void **state)
{
    (void)state;
    dt_module *lin = NULL, *ref = NULL;
    ST_OK(dt_linear_create(5, 7, true, &lin));
    ST_OK(dt_linear_create(5, 7, true, &ref));
    dt_nn_manual_seed(5); /* then the same init values below for both */
    ST_OK(dt_param_init(dt_module_param(lin, "weight"), "w", 3, 0.5, 0.0));
    ST_OK(dt_param_init(dt_module_param(ref, "weight"), "w", 3, 0.5, 0.0));
    ST_OK(dt_param_init(dt_module_param(lin, "bias"), "b", 3, 0.5, 0.0));
    ST_OK(dt_param_init(dt_module_param(ref, "bias"), "b", 3, 0.5, 0.0));
    dt_style_params sp = {.field_mask = DT_STYLE_PARAM_FIELD_PREPARE_INPUT |
                                        DT_STYLE_PARAM_FIELD_PREPARE_OUTPUT,
                          .prepare_input = dt_make_input_replicate_1d,
                          .prepare_output = dt_make_output_tensor};
    dt_style *s = NULL;
    ST_OK(dt_style_create(DT_STYLE_COLWISE, &sp, &s));
    char text[160];
    dt_style_format(s, text, sizeof(text));
    assert_non_null(strstr(text, "prepare_input=<function>"));
    dt_plan *plan = NULL;
    ST_OK(dt_plan_create(&plan));
    ST_OK(dt_plan_add(plan, "", s));
    ST_OK(dt_parallelize_module(lin, mesh, plan, "tp"));
    dt_tensor *x = whole(), *y = NULL, *yr = NULL;
    ST_OK(dt_module_call(lin, x, &y));
    ST_OK(dt_module_call(ref, x, &yr));
    assert_false(dt_tensor_is_distributed(y)); /* make_output_tensor: local and whole */
    assert_int_equal(dt_tensor_numel(y), dt_tensor_numel(yr));
    for (int64_t i = 0; i < dt_tensor_numel(yr); i++)
        assert_true(fabs(dt_tensor_item_at(y, i) - dt_tensor_item_at(yr, i)) <= 1e-5);
    dt_tensor *objs[] = {x, y, yr};
    for (size_t i = 0; i < 3; i++)
        dt_tensor_release(objs[i]);
    dt_style_release(s);
    dt_plan_destroy(plan);
    dt_module_destroy(lin), dt_module_destroy(ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inputs),
        cmocka_unit_test(test_outputs),
        cmocka_unit_test(test_checks),
        cmocka_unit_test(test_style_prepare_functions),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
