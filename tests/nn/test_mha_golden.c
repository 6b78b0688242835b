/*
 * MultiheadAttention against PyTorch's nn.MultiheadAttention(16, 4,
 * batch_first=True): golden files made by tests/reference/mha_ref.py
 * (committed in tests/reference/golden/). The weights file is PyTorch's
 * state_dict() as it is, loaded by name with dt_load_full (so the state-dict
 * names and layouts are PyTorch's); our own dt_save_full of the loaded module
 * reads back the same tensors under the same names. For no mask and the
 * causal mask: the output, and the gradients of sum(y * y) w.r.t. the input
 * and every parameter, within 1e-5 relative plus a floor of 1e-5 times the
 * tensor's largest value (float32 sums in another order).
 */
#include <unistd.h>

#include "nn_test_util.h"

#ifndef NN_GOLDEN_DIR
#error "NN_GOLDEN_DIR must name tests/reference/golden"
#endif

static dt_safetensors *io;

static dt_tensor *golden(const char *name)
{
    dt_tensor *t = NULL;
    NN_OK(dt_safetensors_load(io, name, &t));
    return t;
}

static void expect_close(const char *what, dt_tensor *got, dt_tensor *want)
{
    assert_non_null(got);
    assert_int_equal(dt_tensor_numel(got), dt_tensor_numel(want));
    double scale = 0.0, worst = 0.0;
    for (int64_t i = 0; i < dt_tensor_numel(want); i++)
        scale = fmax(scale, fabs(dt_tensor_item_at(want, i)));
    for (int64_t i = 0; i < dt_tensor_numel(want); i++) {
        double w = dt_tensor_item_at(want, i), g = dt_tensor_item_at(got, i);
        double err = fabs(g - w) / (1e-5 * fabs(w) + 1e-5 * scale);
        worst = fmax(worst, err);
    }
    if (worst > 1.0)
        fail_msg("%s: off by %.2f times the tolerance", what, worst);
}

static void check_case(bool causal)
{
    const char *name = causal ? "causal" : "full";
    char path[1024], key[128];
    dt_module *m = NULL;
    NN_OK(dt_multihead_attention_create(16, 4, causal, &m));
    snprintf(path, sizeof(path), "%s/mha_golden_weights.safetensors", NN_GOLDEN_DIR);
    NN_OK(dt_load_full(m, path));
    dt_tensor *x = golden("x"), *y = NULL, *yy = NULL, *loss = NULL;
    NN_OK(dt_tensor_set_requires_grad(x, true));
    NN_OK(dt_module_call(m, x, &y));
    snprintf(key, sizeof(key), "%s.y", name);
    dt_tensor *want = golden(key);
    expect_close(key, y, want);
    dt_tensor_release(want);
    NN_OK(dt_mul(y, y, &yy));
    NN_OK(dt_sum_all(yy, &loss));
    NN_OK(dt_backward(loss, NULL));
    snprintf(key, sizeof(key), "%s.grad.x", name);
    want = golden(key);
    expect_close(key, dt_tensor_grad(x), want);
    dt_tensor_release(want);
    static const char *const params[4] = {"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                          "out_proj.bias"};
    for (int i = 0; i < 4; i++) {
        dt_module *owner = i < 2 ? m : dt_module_child(m, "out_proj");
        dt_tensor *p = dt_module_param(owner, i < 2 ? params[i] : params[i] + 9);
        snprintf(key, sizeof(key), "%s.grad.%s", name, params[i]);
        want = golden(key);
        expect_close(key, dt_tensor_grad(p), want);
        dt_tensor_release(want);
    }
    dt_tensor *objs[] = {x, y, yy, loss};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        dt_tensor_release(objs[i]);
    dt_module_destroy(m);
}

static void test_no_mask(void **state)
{
    (void)state;
    check_case(false);
}

static void test_causal(void **state)
{
    (void)state;
    check_case(true);
}

/* dt_save_full writes the state dict PyTorch saved: the same names and values. */
static void test_state_dict_names(void **state)
{
    (void)state;
    char path[1024], out[256];
    dt_module *m = NULL;
    dt_safetensors *a = NULL, *b = NULL;
    NN_OK(dt_multihead_attention_create(16, 4, false, &m));
    snprintf(path, sizeof(path), "%s/mha_golden_weights.safetensors", NN_GOLDEN_DIR);
    NN_OK(dt_load_full(m, path));
    snprintf(out, sizeof(out), "mha_golden_roundtrip.%d.safetensors", (int)getpid());
    NN_OK(dt_save_full(m, out));
    NN_OK(dt_safetensors_open(path, &a));
    NN_OK(dt_safetensors_open(out, &b));
    assert_int_equal(dt_safetensors_count(a), dt_safetensors_count(b));
    for (int i = 0; i < dt_safetensors_count(a); i++) {
        dt_safetensors_info ia;
        dt_tensor *ta = NULL, *tb = NULL;
        NN_OK(dt_safetensors_info_at(a, i, &ia));
        NN_OK(dt_safetensors_load(a, ia.name, &ta));
        NN_OK(dt_safetensors_load(b, ia.name, &tb)); /* same name in ours */
        assert_true(dt_tensor_equal(ta, tb));
        dt_tensor_release(ta);
        dt_tensor_release(tb);
    }
    dt_safetensors_close(a);
    dt_safetensors_close(b);
    unlink(out);
    dt_module_destroy(m);
}

static int setup(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof(path), "%s/mha_golden_io.safetensors", NN_GOLDEN_DIR);
    return dt_safetensors_open(path, &io) == DT_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    dt_safetensors_close(io);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_mask),
        cmocka_unit_test(test_causal),
        cmocka_unit_test(test_state_dict_names),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
