/*
 * Pairwise on a MultiheadAttention under data parallelism, dp=2 x tp=2 on 4
 * ranks, against one rank: DDP over dp (each dp rank half the batch) gives
 * the gradient of the whole batch's mean loss for every parameter; ZeRO is
 * refused (dp would shard the split dim of in_proj_bias a second time) with
 * the model left as it was.
 */
#include <math.h>

#include "st_util.h"

enum { E = 12, H = 6, B = 4, S = 5 };

static dt_mesh *mesh;

static int setup(void **state)
{
    if (mr_setup(state) != 0)
        return -1;
    int shape[2] = {2, 2};
    const char *names[2] = {"dp", "tp"};
    return dt_mesh_create(mr_rt, 2, shape, names, &mesh) == DT_OK ? 0 : -1;
}

static int teardown(void **state)
{
    dt_mesh_release(mesh);
    return mr_teardown(state);
}

static dt_module *mha_pairwise(bool parallel)
{
    dt_module *m = NULL;
    ST_OK(dt_multihead_attention_create(E, H, true, &m));
    mr_init_params(m, 5, 0.3);
    if (parallel) {
        dt_plan *p = NULL;
        ST_OK(dt_plan_parse(" = pairwise\n", &p));
        ST_OK(dt_parallelize_module(m, mesh, p, "tp"));
        dt_plan_destroy(p);
    }
    return m;
}

/* loss = sum(y * y) * @p scale of m(x); backward. */
static void step(dt_module *m, dt_tensor *x, double scale)
{
    dt_tensor *y = NULL, *yy = NULL, *l = NULL, *ls = NULL;
    ST_OK(dt_module_call(m, x, &y));
    ST_OK(dt_mul(y, y, &yy));
    ST_OK(dt_sum_all(yy, &l));
    ST_OK(dt_scale(l, scale, &ls));
    ST_OK(dt_backward(ls, NULL));
    dt_tensor *objs[] = {y, yy, l, ls};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        dt_tensor_release(objs[i]);
}

static void test_ddp(void **state)
{
    (void)state;
    dt_module *net = mha_pairwise(true), *ref = mha_pairwise(false);
    ST_OK(dt_ddp_apply(net, mesh, "dp", NULL));
    int64_t xs[3] = {B, S, E};
    dt_tensor *x = NULL, *mine = NULL;
    ST_OK(dt_tensor_empty(3, xs, DT_DTYPE_F32, dt_device_cpu(), &x));
    ST_OK(dt_tensor_fill_normal(x, 0.0, 1.0, 3, NULL, NULL));
    ST_OK(dt_dp_batch(x, mesh, "dp", &mine));
    step(net, mine, 1.0);
    step(ref, x, 0.5); /* DDP averages the two halves' gradients */
    static const char *const fqns[4] = {"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                        "out_proj.bias"};
    for (int i = 0; i < 4; i++) {
        char what[64];
        snprintf(what, sizeof(what), "%s gradient", fqns[i]);
        dt_tensor *g = mr_full_grad(mr_param_at(net, fqns[i]));
        mr_assert_close(what, g, dt_tensor_grad(mr_param_at(ref, fqns[i])), 1e-5);
        dt_tensor_release(g);
    }
    dt_tensor_release(x);
    dt_tensor_release(mine);
    dt_module_destroy(net), dt_module_destroy(ref);
}

static void test_zero_refused(void **state)
{
    (void)state;
    dt_module *net = mha_pairwise(true);
    ST_FAILS(dt_fully_shard(net, mesh, "dp", NULL), DT_ERR_INVALID_ARG, "_S(0,sf=3)");
    /* unchanged: the tp placement, on the tp slice */
    dt_tensor *w = mr_param_at(net, "in_proj_bias");
    assert_int_equal(dt_mesh_ndim(dt_tensor_mesh(w)), 1);
    assert_true(dt_placement_equal(dt_tensor_placements(w)[0], dt_strided_shard_split(0, 3)));
    dt_module_destroy(net);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ddp),
        cmocka_unit_test(test_zero_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
