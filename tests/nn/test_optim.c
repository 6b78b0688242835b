/*
 * Optimizers and clipping against float64 transcriptions of PyTorch's
 * update rules (torch.optim.SGD / AdamW, clip_grad_norm_), over a few steps
 * with gradients set by hand; state allocation and accounting; bad input.
 */
#include "nn_test_util.h"

#define N_STEPS 4

/* A model with two parameters: Linear(3 -> 2) with bias. Random weights. */
static dt_module *make_model(void)
{
    dt_module *m = NULL;
    NN_OK(dt_linear_create(3, 2, true, &m));
    nn_fill_rand(dt_module_param(m, "weight"), -1, 1);
    nn_fill_rand(dt_module_param(m, "bias"), -1, 1);
    return m;
}

/* Give every parameter a fresh random gradient; return them as doubles in grads[p][i]. */
static void set_grads(dt_module *m, double grads[2][6])
{
    for (int p = 0; p < 2; p++) {
        dt_tensor *t = dt_module_param_at(m, p), *g = NULL;
        NN_OK(dt_tensor_empty(dt_tensor_ndim(t), dt_tensor_shape(t), DT_DTYPE_F32, dt_device_cpu(),
                              &g));
        nn_fill_rand(g, -2, 2);
        for (int64_t i = 0; i < dt_tensor_numel(g); i++)
            grads[p][i] = dt_tensor_item_at(g, i);
        NN_OK(dt_tensor_set_grad(t, g));
        dt_tensor_release(g);
    }
}

static void snapshot(dt_module *m, double vals[2][6])
{
    for (int p = 0; p < 2; p++)
        for (int64_t i = 0; i < dt_tensor_numel(dt_module_param_at(m, p)); i++)
            vals[p][i] = dt_tensor_item_at(dt_module_param_at(m, p), i);
}

static void expect_params(dt_module *m, double want[2][6], const char *what)
{
    for (int p = 0; p < 2; p++)
        nn_expect_close(what, want[p], dt_module_param_at(m, p), 1e-5, 1e-6);
}

static void check_sgd(double lr, double momentum, double wd)
{
    dt_module *m = make_model();
    dt_sgd_params sp = {.field_mask = DT_SGD_PARAM_FIELD_LR | DT_SGD_PARAM_FIELD_MOMENTUM |
                                      DT_SGD_PARAM_FIELD_WEIGHT_DECAY,
                        .lr = lr,
                        .momentum = momentum,
                        .weight_decay = wd};
    dt_optim *o = NULL;
    NN_OK(dt_optim_sgd_create(m, &sp, &o));
    double p[2][6], g[2][6], buf[2][6] = {{0}};
    snapshot(m, p);
    for (int s = 0; s < N_STEPS; s++) {
        set_grads(m, g);
        NN_OK(dt_optim_step(o));
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < (k == 0 ? 6 : 2); i++) {
                double d = g[k][i] + wd * p[k][i];
                if (momentum != 0.0) {
                    buf[k][i] = s == 0 ? d : momentum * buf[k][i] + d; /* PyTorch: clone first */
                    d = buf[k][i];
                }
                p[k][i] -= lr * d;
            }
        expect_params(m, p, "sgd");
    }
    assert_int_equal(dt_optim_step_count(o), N_STEPS);
    dt_tensor *mb = dt_optim_param_state(o, 0, "momentum_buffer");
    if (momentum != 0.0) {
        assert_non_null(mb);
        assert_int_equal(dt_tensor_mem_category(mb), DT_MEM_OPTIMIZER);
        nn_expect_close("momentum buffer", buf[0], mb, 1e-5, 1e-6);
    } else {
        assert_null(mb); /* plain SGD keeps no state */
    }
    dt_optim_destroy(o);
    dt_module_destroy(m);
}

static void test_sgd(void **state)
{
    (void)state;
    check_sgd(0.1, 0.0, 0.0);
    check_sgd(0.05, 0.9, 0.0);
    check_sgd(0.05, 0.8, 0.01);
}

static void check_adamw(double lr, double b1, double b2, double eps, double wd)
{
    dt_module *m = make_model();
    dt_adamw_params ap = {.field_mask = DT_ADAMW_PARAM_FIELD_LR | DT_ADAMW_PARAM_FIELD_BETA1 |
                                        DT_ADAMW_PARAM_FIELD_BETA2 | DT_ADAMW_PARAM_FIELD_EPS |
                                        DT_ADAMW_PARAM_FIELD_WEIGHT_DECAY,
                          .lr = lr,
                          .beta1 = b1,
                          .beta2 = b2,
                          .eps = eps,
                          .weight_decay = wd};
    dt_optim *o = NULL;
    NN_OK(dt_optim_adamw_create(m, &ap, &o));
    assert_null(dt_optim_param_state(o, 0, "exp_avg")); /* lazily allocated */
    double p[2][6], g[2][6], mm[2][6] = {{0}}, vv[2][6] = {{0}};
    snapshot(m, p);
    for (int s = 1; s <= N_STEPS; s++) {
        set_grads(m, g);
        NN_OK(dt_optim_step(o));
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < (k == 0 ? 6 : 2); i++) {
                p[k][i] *= 1.0 - lr * wd;
                mm[k][i] = b1 * mm[k][i] + (1 - b1) * g[k][i];
                vv[k][i] = b2 * vv[k][i] + (1 - b2) * g[k][i] * g[k][i];
                double denom = sqrt(vv[k][i]) / sqrt(1 - pow(b2, s)) + eps;
                p[k][i] -= lr / (1 - pow(b1, s)) * mm[k][i] / denom;
            }
        expect_params(m, p, "adamw");
    }
    nn_expect_close("exp_avg", mm[1], dt_optim_param_state(o, 1, "exp_avg"), 1e-5, 1e-6);
    nn_expect_close("exp_avg_sq", vv[1], dt_optim_param_state(o, 1, "exp_avg_sq"), 1e-5, 1e-6);
    assert_null(dt_optim_param_state(o, 1, "momentum_buffer"));
    dt_optim_destroy(o);
    dt_module_destroy(m);
}

static void test_adamw(void **state)
{
    (void)state;
    check_adamw(1e-2, 0.9, 0.95, 1e-8, 0.1); /* the spec's defaults */
    check_adamw(3e-3, 0.8, 0.999, 1e-6, 0.0);
}

static void test_adamw_defaults_and_queries(void **state)
{
    (void)state;
    dt_module *m = make_model();
    dt_optim *o = NULL;
    NN_OK(dt_optim_adamw_create(m, NULL, &o));
    assert_string_equal(dt_optim_name(o), "adamw");
    assert_true(dt_optim_lr(o) == 1e-3);
    dt_optim_set_lr(o, 0.5);
    assert_true(dt_optim_lr(o) == 0.5);
    assert_int_equal(dt_optim_num_params(o), 2);
    assert_string_equal(dt_optim_param_fqn(o, 0), "weight");
    assert_string_equal(dt_optim_param_fqn(o, 1), "bias");
    assert_null(dt_optim_param_fqn(o, 2));
    assert_ptr_equal(dt_optim_param_tensor(o, 1), dt_module_param(m, "bias"));

    /* only parameters with a gradient move; state is optimizer memory */
    dt_memory_stats before, after;
    NN_OK(dt_memory_stats_get(dt_device_cpu(), &before));
    double b0[2], w0[6];
    for (int i = 0; i < 6; i++)
        w0[i] = dt_tensor_item_at(dt_module_param(m, "weight"), i);
    for (int i = 0; i < 2; i++)
        b0[i] = dt_tensor_item_at(dt_module_param(m, "bias"), i);
    dt_tensor *g = NULL;
    NN_OK(dt_tensor_full(1, dt_tensor_shape(dt_module_param(m, "bias")), DT_DTYPE_F32,
                         dt_device_cpu(), 1.0, &g));
    NN_OK(dt_tensor_set_grad(dt_module_param(m, "bias"), g));
    dt_tensor_release(g);
    NN_OK(dt_optim_step(o));
    nn_expect_close("weight without grad", w0, dt_module_param(m, "weight"), 0, 0);
    for (int i = 0; i < 2; i++) /* first Adam step moves by ~lr against the gradient's sign */
        assert_float_equal(dt_tensor_item_at(dt_module_param(m, "bias"), i),
                           b0[i] * (1 - 0.5 * 0.1) - 0.5, 1e-5);
    assert_null(dt_optim_param_state(o, 0, "exp_avg"));
    dt_tensor *ea = dt_optim_param_state(o, 1, "exp_avg");
    assert_non_null(ea);
    assert_int_equal(dt_tensor_mem_category(ea), DT_MEM_OPTIMIZER);
    NN_OK(dt_memory_stats_get(dt_device_cpu(), &after));
    assert_true(after.current[DT_MEM_OPTIMIZER] - before.current[DT_MEM_OPTIMIZER] >=
                (int64_t)(2 * 2 * sizeof(float)));

    dt_optim_zero_grad(o);
    assert_null(dt_tensor_grad(dt_module_param(m, "bias")));
    dt_optim_destroy(o);
    dt_module_destroy(m);
    dt_optim_destroy(NULL);
}

static void test_bad_hyperparameters(void **state)
{
    (void)state;
    dt_module *m = make_model();
    dt_optim *o = NULL;
    dt_sgd_params sp = {.field_mask = DT_SGD_PARAM_FIELD_LR, .lr = -1.0};
    NN_FAILS(dt_optim_sgd_create(m, &sp, &o), DT_ERR_INVALID_ARG, "lr -1");
    dt_adamw_params ap = {.field_mask = DT_ADAMW_PARAM_FIELD_BETA2, .beta2 = 1.0};
    NN_FAILS(dt_optim_adamw_create(m, &ap, &o), DT_ERR_INVALID_ARG, "betas (0.9, 1)");
    NN_FAILS(dt_optim_sgd_create(NULL, NULL, &o), DT_ERR_INVALID_ARG, "root");
    NN_FAILS(dt_clip_grad_norm(m, 0.0, NULL), DT_ERR_INVALID_ARG, "max_norm 0");
    dt_module_destroy(m);
}

static void test_clip_grad_norm(void **state)
{
    (void)state;
    dt_module *m = make_model();
    double g[2][6];
    set_grads(m, g);
    double ss = 0.0;
    for (int i = 0; i < 6; i++)
        ss += g[0][i] * g[0][i];
    for (int i = 0; i < 2; i++)
        ss += g[1][i] * g[1][i];
    double norm = sqrt(ss), got = 0.0;

    /* max_norm above the norm: nothing changes */
    NN_OK(dt_clip_grad_norm(m, norm * 2.0, &got));
    assert_float_equal(got, norm, 1e-6 * norm);
    nn_expect_close("unclipped grad", g[0], dt_tensor_grad(dt_module_param(m, "weight")), 0, 0);

    /* below: every gradient scaled by max_norm / (norm + 1e-6) */
    double max_norm = norm / 3.0, coef = max_norm / (norm + 1e-6);
    NN_OK(dt_clip_grad_norm(m, max_norm, &got));
    assert_float_equal(got, norm, 1e-6 * norm);
    for (int p = 0; p < 2; p++) {
        double want[6];
        for (int i = 0; i < 6; i++)
            want[i] = g[p][i] * coef;
        nn_expect_close("clipped grad", want, dt_tensor_grad(dt_module_param_at(m, p)), 1e-6, 0);
    }
    NN_OK(dt_clip_grad_norm(m, 1e9, &got));
    assert_float_equal(got, max_norm, 1e-5 * max_norm);

    /* no gradients at all: norm 0, no error */
    NN_OK(dt_tensor_set_grad(dt_module_param(m, "weight"), NULL));
    NN_OK(dt_tensor_set_grad(dt_module_param(m, "bias"), NULL));
    NN_OK(dt_clip_grad_norm(m, 1.0, &got));
    assert_true(got == 0.0);
    dt_module_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd),
        cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_adamw_defaults_and_queries),
        cmocka_unit_test(test_bad_hyperparameters),
        cmocka_unit_test(test_clip_grad_norm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
