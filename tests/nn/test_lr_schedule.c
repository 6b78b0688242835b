/*
 * Learning-rate schedules against Hugging Face's formulas, evaluated in
 * Python (get_{constant,linear,cosine}_schedule_with_warmup with a floor:
 * base 3e-3, 10 warm-up steps, 100 in all, floor 0.1), bad parameters by
 * name, and dt_optim_schedule driving a real optimizer.
 */
#include <math.h>

#include "nn_test_util.h"

static const int64_t steps[8] = {0, 5, 10, 32, 55, 99, 100, 150};
static const double want[3][8] = {
    /* constant */ {0.0, 0.0015, 0.003, 0.003, 0.003, 0.003, 0.003, 0.003},
    /* linear */ {0.0, 0.0015, 0.003, 0.00234, 0.00165, 0.00033, 0.0003, 0.0003},
    /* cosine */
    {0.0, 0.0015, 0.003, 0.002621108730457179, 0.00165, 0.00030082238352422075, 0.0003, 0.0003},
};

static dt_lr_schedule_params params(dt_lr_schedule_kind kind)
{
    return (dt_lr_schedule_params){.field_mask = DT_LR_SCHEDULE_PARAM_FIELD_KIND |
                                                 DT_LR_SCHEDULE_PARAM_FIELD_WARMUP_STEPS |
                                                 DT_LR_SCHEDULE_PARAM_FIELD_TOTAL_STEPS |
                                                 DT_LR_SCHEDULE_PARAM_FIELD_MIN_LR_RATIO,
                                   .kind = kind,
                                   .warmup_steps = 10,
                                   .total_steps = 100,
                                   .min_lr_ratio = 0.1};
}

static void test_values(void **state)
{
    (void)state;
    for (int k = 0; k < 3; k++) {
        dt_lr_schedule_params p = params((dt_lr_schedule_kind)k);
        for (int i = 0; i < 8; i++) {
            double lr = -1.0;
            NN_OK(dt_lr_schedule_value(&p, 3e-3, steps[i], &lr));
            if (fabs(lr - want[k][i]) > 1e-15)
                fail_msg("kind %d step %lld: lr %.17g, want %.17g", k, (long long)steps[i], lr,
                         want[k][i]);
        }
    }
}

#define FAILS(call, needle)                                                                        \
    do {                                                                                           \
        dt_status s_ = (call);                                                                     \
        if (s_ != DT_ERR_INVALID_ARG || strstr(dt_last_error(), (needle)) == NULL)                 \
            fail_msg("%s -> %s '%s', want DT_ERR_INVALID_ARG naming '%s'", #call,                  \
                     dt_status_str(s_), dt_last_error(), (needle));                                \
    } while (0)

static void test_bad_params(void **state)
{
    (void)state;
    double lr = 0.0;
    dt_lr_schedule_params p = params(DT_LR_COSINE);
    FAILS(dt_lr_schedule_value(NULL, 1.0, 0, &lr), "total_steps 0 must exceed warmup_steps 0");
    p.total_steps = 10;
    FAILS(dt_lr_schedule_value(&p, 1.0, 0, &lr), "total_steps 10 must exceed warmup_steps 10");
    p = params(DT_LR_LINEAR);
    p.min_lr_ratio = 1.5;
    FAILS(dt_lr_schedule_value(&p, 1.0, 0, &lr), "min_lr_ratio 1.5");
    p = params(DT_LR_LINEAR);
    p.warmup_steps = -1;
    FAILS(dt_lr_schedule_value(&p, 1.0, 0, &lr), "warmup_steps -1");
    p = params((dt_lr_schedule_kind)7);
    FAILS(dt_lr_schedule_value(&p, 1.0, 0, &lr), "kind 7");
    p = params(DT_LR_COSINE);
    FAILS(dt_lr_schedule_value(&p, NAN, 0, &lr), "base_lr nan");
    FAILS(dt_lr_schedule_value(&p, 1.0, -3, &lr), "step -3");
    /* a constant schedule needs no total */
    dt_lr_schedule_params c = {.field_mask = DT_LR_SCHEDULE_PARAM_FIELD_KIND,
                               .kind = DT_LR_CONSTANT};
    NN_OK(dt_lr_schedule_value(&c, 0.5, 1000, &lr));
    assert_true(lr == 0.5);
}

/* dt_optim_schedule sets the lr each step from the optimizer's own count. */
static void test_optimizer(void **state)
{
    (void)state;
    dt_module *m = NULL;
    NN_OK(dt_linear_create(4, 3, true, &m));
    dt_optim *o = NULL;
    NN_OK(dt_optim_sgd_create(m, NULL, &o));
    dt_lr_schedule_params p = params(DT_LR_COSINE);
    int64_t xs[2] = {2, 4};
    for (int s = 0; s < 33; s++) {
        NN_OK(dt_optim_schedule(o, &p, 3e-3));
        if (s == 32)
            break;
        dt_tensor *x = NULL, *y = NULL, *l = NULL;
        NN_OK(dt_tensor_empty(2, xs, DT_DTYPE_F32, dt_device_cpu(), &x));
        NN_OK(dt_tensor_fill_normal(x, 0.0, 1.0, (uint64_t)s, NULL, NULL));
        NN_OK(dt_module_call(m, x, &y));
        NN_OK(dt_sum_all(y, &l));
        NN_OK(dt_backward(l, NULL));
        NN_OK(dt_optim_step(o));
        dt_optim_zero_grad(o);
        dt_tensor_release(x), dt_tensor_release(y), dt_tensor_release(l);
    }
    assert_int_equal(dt_optim_step_count(o), 32);
    assert_true(fabs(dt_optim_lr(o) - 0.002621108730457179) < 1e-15);
    FAILS(dt_optim_schedule(NULL, &p, 3e-3), "'o' is NULL");
    dt_optim_destroy(o);
    dt_module_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_optimizer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
