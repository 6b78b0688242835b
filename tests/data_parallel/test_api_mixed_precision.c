/*
 * Mixed precision under DDP and ZeRO-1/2/3 on 2 and 3 ranks (a 1-d "dp"
 * mesh): gradients reduced in bf16, ZeRO computing on bf16 copies of its f32
 * master weights, and a bf16 model output, each against the f32 single-rank
 * model (or its bf16-rounded copy).
 */
#include "dp_api_common.h"

/* Every element of @p t (f32) is a bf16 value: its low 16 bits are zero. */
static void expect_bf16_values(const char *fqn, const dt_tensor *t)
{
    const uint32_t *u = dt_tensor_data(t);
    for (int64_t i = 0; i < dt_tensor_numel(t); i++)
        if ((u[i] & 0xffffu) != 0)
            fail_msg("%s: gradient element %lld (0x%08x) was not reduced in bf16", fqn,
                     (long long)i, u[i]);
}

/* reduce_dtype bf16: the gradients are the f32 ones to bf16 precision, and bf16 values. */
static void check_reduce_bf16(dt_dp_stage stage)
{
    dt_mesh *mesh = mr_world_mesh("dp");
    dt_module *m = NULL, *ref = NULL;
    dp_and_reference(mesh, stage, DT_DTYPE_BF16, &m, &ref);
    fwd_bwd(ref, NULL, 0, 0.0);
    fwd_bwd(m, mesh, 0, 0.0);
    for (size_t i = 0; i < sizeof(fqns) / sizeof(fqns[0]); i++) {
        double d = grad_diff(m, ref, fqns[i]);
        print_message("%s, reduce bf16: %s relative gradient difference %.3g\n",
                      dt_dp_stage_name(stage), fqns[i], d);
        assert_true(d < 1e-2);
        expect_bf16_values(fqns[i], dt_tensor_grad(mr_param_at(m, fqns[i])));
    }
    dt_module_destroy(m);
    dt_module_destroy(ref);
    dt_mesh_release(mesh);
}

static void test_reduce_bf16(void **state)
{
    (void)state;
    for (int st = DT_DP_DDP; st <= DT_DP_ZERO3; st++)
        check_reduce_bf16((dt_dp_stage)st);
}

/* @p m's parameters rounded to bf16 in place (f32 values of bf16 numbers). */
static dt_status round_param(const char *fqn, dt_module *o, const char *n, dt_tensor *t, void *u)
{
    (void)fqn, (void)o, (void)n, (void)u;
    dt_tensor *h = NULL;
    dt_status st = dt_tensor_to_dtype(t, DT_DTYPE_BF16, &h);
    if (st == DT_OK)
        st = dt_tensor_copy_(t, h);
    dt_tensor_release(h);
    return st;
}

/* This rank's rows' loss of @p m (no backward). */
static double rows_loss(dt_module *m, dt_mesh *mesh)
{
    int R = dt_mesh_size(mesh), r = dt_mesh_rank(mesh);
    dt_tensor *x = NULL, *y = NULL, *logits = NULL, *loss = NULL;
    DP_OK(dt_token_data_batch(data, 0, BATCH, SEQ, r * BATCH / R, (r + 1) * BATCH / R, &x, &y));
    DP_OK(dt_module_call(m, x, &logits));
    DP_OK(dt_nn_cross_entropy(logits, y, &loss));
    double v = 0.0;
    DP_OK(dt_item(loss, &v));
    dt_tensor *objs[] = {x, y, logits, loss};
    for (size_t i = 0; i < 4; i++)
        dt_tensor_release(objs[i]);
    return v;
}

/* param_dtype bf16: ZeRO computes on the bf16 values of its f32 master weights,
 * exactly what a model whose weights were rounded to bf16 computes. */
static void check_param_bf16(dt_dp_stage stage)
{
    dt_mesh *mesh = mr_world_mesh("dp");
    dt_module *m = NULL, *ref = NULL, *plain = NULL;
    DP_OK(dt_gpt_create(&cfg, 1234, &m));
    DP_OK(dt_gpt_create(&cfg, 1234, &ref));
    DP_OK(dt_gpt_create(&cfg, 1234, &plain));
    DP_OK(dt_module_foreach_param(ref, round_param, NULL));
    dt_fsdp_params fp = {.field_mask = DT_FSDP_PARAM_FIELD_STAGE | DT_FSDP_PARAM_FIELD_PARAM_DTYPE,
                         .stage = stage,
                         .param_dtype = DT_DTYPE_BF16};
    DP_OK(dt_fully_shard(m, mesh, "dp", &fp));
    bool prev = dt_grad_set_enabled(false);
    double got = rows_loss(m, mesh), want = rows_loss(ref, mesh), f32 = rows_loss(plain, mesh);
    dt_grad_set_enabled(prev);
    print_message("%s, param_dtype bf16: loss %.9g, bf16-rounded model %.9g, f32 %.9g\n",
                  dt_dp_stage_name(stage), got, want, f32);
    assert_true(fabs(got - want) <= 1e-6 * fabs(want));
    assert_true(fabs(got - f32) > 1e-6 * fabs(f32)); /* the rounding shows */
    dt_module_destroy(m), dt_module_destroy(ref), dt_module_destroy(plain);
    dt_mesh_release(mesh);
}

static void test_param_bf16(void **state)
{
    (void)state;
    for (int st = DT_DP_ZERO1; st <= DT_DP_ZERO3; st++)
        check_param_bf16((dt_dp_stage)st);
}

/* This rank's rows' logits of @p m (no backward). */
static dt_tensor *rows_logits(dt_module *m, dt_mesh *mesh)
{
    int R = dt_mesh_size(mesh), r = dt_mesh_rank(mesh);
    dt_tensor *x = NULL, *y = NULL, *logits = NULL;
    bool prev = dt_grad_set_enabled(false);
    DP_OK(dt_token_data_batch(data, 0, BATCH, SEQ, r * BATCH / R, (r + 1) * BATCH / R, &x, &y));
    DP_OK(dt_module_call(m, x, &logits));
    dt_grad_set_enabled(prev);
    dt_tensor_release(x);
    dt_tensor_release(y);
    return logits;
}

/* output_dtype bf16: the model's output is the f32 model's rounded to bf16
 * (and bf16 values), and training still follows the f32 gradients. */
static void check_output_bf16(dt_dp_stage stage)
{
    dt_mesh *mesh = mr_world_mesh("dp");
    dt_module *m = NULL, *ref = NULL;
    DP_OK(dt_gpt_create(&cfg, 1234, &m));
    DP_OK(dt_gpt_create(&cfg, 1234, &ref));
    dt_fsdp_params fp = {.field_mask = DT_FSDP_PARAM_FIELD_STAGE | DT_FSDP_PARAM_FIELD_GRAD_SCALE |
                                       DT_FSDP_PARAM_FIELD_OUTPUT_DTYPE,
                         .stage = stage,
                         .grad_scale = share(mesh, BATCH),
                         .output_dtype = DT_DTYPE_BF16};
    DP_OK(dt_fully_shard(m, mesh, "dp", &fp));
    dt_tensor *got = rows_logits(m, mesh), *want = rows_logits(ref, mesh);
    assert_int_equal(dt_tensor_numel(got), dt_tensor_numel(want));
    const float *g = dt_tensor_data(got), *w = dt_tensor_data(want);
    int64_t rounded = 0;
    for (int64_t i = 0; i < dt_tensor_numel(want); i++) {
        float r = dt_bf16_to_f32(dt_f32_to_bf16(w[i]));
        rounded += r != w[i];
        if (!(fabsf(g[i] - r) <= 0x1p-7f * fabsf(r))) /* the same bf16, or its neighbour */
            fail_msg("%s, output bf16: logit %lld is %.9g, the f32 model's rounded %.9g",
                     dt_dp_stage_name(stage), (long long)i, (double)g[i], (double)r);
    }
    assert_true(rounded > 0); /* the rounding shows */
    const uint32_t *u = dt_tensor_data(got);
    for (int64_t i = 0; i < dt_tensor_numel(got); i++)
        if ((u[i] & 0xffffu) != 0)
            fail_msg("logit %lld (0x%08x) is not a bf16 value", (long long)i, u[i]);
    fwd_bwd(m, mesh, 0, 0.0);
    fwd_bwd(ref, NULL, 0, 0.0);
    for (size_t i = 0; i < sizeof(fqns) / sizeof(fqns[0]); i++) {
        double d = grad_diff(m, ref, fqns[i]);
        print_message("%s, output bf16: %s relative gradient difference %.3g\n",
                      dt_dp_stage_name(stage), fqns[i], d);
        assert_true(d < 1e-2);
    }
    dt_tensor_release(got), dt_tensor_release(want);
    dt_module_destroy(m), dt_module_destroy(ref);
    dt_mesh_release(mesh);
}

static void test_output_bf16(void **state)
{
    (void)state;
    for (int st = DT_DP_DDP; st <= DT_DP_ZERO3; st++)
        check_output_bf16((dt_dp_stage)st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduce_bf16),
        cmocka_unit_test(test_param_bf16),
        cmocka_unit_test(test_output_bf16),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
