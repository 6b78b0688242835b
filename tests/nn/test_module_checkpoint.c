/*
 * Activation checkpointing on the module tree: marking by hand and by FQN
 * glob, bad input, a checkpointed module that uses a tensor it does not own,
 * and one that returns its input. Gradients on the GPT under data and tensor
 * parallelism: tests/data_parallel/test_activation_checkpoint.c.
 */
#include "nn_test_util.h"

static dt_module *find(dt_module *root, const char *fqn)
{
    dt_module *m = NULL;
    NN_OK(dt_module_find(root, fqn, &m));
    return m;
}

/* Activation checkpointing: marking by hand and by FQN glob, bad input; a
 * marked forward computes the same values (gradients: tests/data_parallel/
 * test_activation_checkpoint.c). */
static void test_checkpoint_marking(void **state)
{
    (void)state;
    dt_gpt_config cfg;
    NN_OK(dt_gpt_config_preset("tiny", &cfg));
    dt_module *gpt = NULL;
    NN_OK(dt_gpt_create(&cfg, 1234, &gpt));
    int n = -1;
    NN_FAILS(dt_module_checkpoint(NULL, true), DT_ERR_INVALID_ARG, "m");
    NN_FAILS(dt_module_checkpoint_matching(NULL, "layers.*", &n), DT_ERR_INVALID_ARG, "root");
    NN_FAILS(dt_module_checkpoint_matching(gpt, NULL, &n), DT_ERR_INVALID_ARG, "pattern");
    NN_FAILS(dt_module_checkpoint_matching(gpt, "", &n), DT_ERR_INVALID_ARG, "empty");
    NN_FAILS(dt_module_checkpoint_matching(gpt, "blocks.*", &n), DT_ERR_NOT_FOUND, "'blocks.*'");
    assert_int_equal(n, 0);
    /* '*' is one segment: "layers.*" marks the blocks, not their children */
    NN_OK(dt_module_checkpoint_matching(gpt, "layers.*", &n));
    assert_int_equal(n, cfg.n_layers);
    assert_true(dt_module_is_checkpointed(find(gpt, "layers.0")));
    assert_true(dt_module_is_checkpointed(find(gpt, "layers.1")));
    assert_false(dt_module_is_checkpointed(find(gpt, "layers.0.attention")));
    assert_false(dt_module_is_checkpointed(gpt));
    assert_false(dt_module_is_checkpointed(NULL));
    /* '|' alternatives within a segment, as the plans */
    NN_OK(dt_module_checkpoint_matching(gpt, "layers.*.attention|feed_forward", &n));
    assert_int_equal(n, 2 * cfg.n_layers);
    assert_true(dt_module_is_checkpointed(find(gpt, "layers.1.feed_forward")));
    NN_FAILS(dt_module_checkpoint_matching(gpt, "layers..attention", &n), DT_ERR_INVALID_ARG,
             "'layers..attention' has an empty segment");
    NN_FAILS(dt_module_checkpoint_matching(gpt, "layers.", &n), DT_ERR_INVALID_ARG,
             "empty segment");
    for (int l = 0; l < cfg.n_layers; l++) {
        char fqn[64];
        snprintf(fqn, sizeof(fqn), "layers.%d.attention", l);
        NN_OK(dt_module_checkpoint(find(gpt, fqn), false));
        snprintf(fqn, sizeof(fqn), "layers.%d.feed_forward", l);
        NN_OK(dt_module_checkpoint(find(gpt, fqn), false));
    }

    /* a marked forward under grad mode gives the plain forward's values */
    int64_t shape[2] = {1, 4};
    dt_tensor *tok = NULL, *y = NULL, *y0 = NULL;
    NN_OK(dt_tensor_zeros(2, shape, DT_DTYPE_I64, dt_device_cpu(), &tok));
    NN_OK(dt_module_call(gpt, tok, &y));
    assert_true(dt_tensor_requires_grad(y));
    NN_OK(dt_module_checkpoint(find(gpt, "layers.0"), false));
    NN_OK(dt_module_checkpoint(find(gpt, "layers.1"), false));
    assert_false(dt_module_is_checkpointed(find(gpt, "layers.1")));
    NN_OK(dt_module_call(gpt, tok, &y0));
    size_t nb = (size_t)dt_tensor_numel(y) * sizeof(float);
    assert_memory_equal(dt_tensor_data(y), dt_tensor_data(y0), nb);
    dt_tensor_release(y);
    dt_tensor_release(y0);
    dt_tensor_release(tok);
    dt_module_destroy(gpt);
}

/* A user module that adds a tensor it does not own (the global below). */
static dt_tensor *g_outside;

static dt_status add_outside_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    (void)m, (void)n_in;
    return dt_add(in[0], g_outside, out);
}

static const dt_module_ops add_outside_ops = {.type_name = "AddOutside",
                                              .forward = add_outside_forward};

/* A checkpointed module whose forward uses a tensor that is neither its
 * input nor its parameter: when nothing else uses that tensor's graph, the
 * nested backward runs it (the gradient is right); when the outer graph
 * uses it too, backward fails naming the problem instead of running the
 * outer graph's nodes twice. */
static void test_checkpoint_outside_tensor(void **state)
{
    (void)state;
    int64_t n = 4;
    dt_tensor *w = NULL, *x = NULL, *y = NULL, *loss = NULL, *z = NULL;
    NN_OK(dt_tensor_ones(1, &n, DT_DTYPE_F32, dt_device_cpu(), &w));
    NN_OK(dt_tensor_set_requires_grad(w, true));
    dt_module *m = NULL;
    NN_OK(dt_module_create(&add_outside_ops, NULL, &m));
    NN_OK(dt_module_checkpoint(m, true));
    for (int shared = 0; shared < 2; shared++) {
        NN_OK(dt_scale(w, 2.0, &g_outside)); /* a non-leaf */
        NN_OK(dt_scale(w, 3.0, &x));
        NN_OK(dt_module_call(m, x, &y));
        if (shared) { /* the outer graph reaches g_outside's node too */
            NN_OK(dt_add(y, g_outside, &z));
            dt_tensor_release(y);
            y = z;
        }
        NN_OK(dt_sum_all(y, &loss));
        NN_OK(dt_tensor_set_grad(w, NULL));
        if (shared) {
            NN_FAILS(dt_backward(loss, NULL), DT_ERR_INVALID_ARG, "backward pass in progress");
        } else {
            NN_OK(dt_backward(loss, NULL));
            const float *g = dt_tensor_data(dt_tensor_grad(w));
            for (int64_t i = 0; i < n; i++)
                assert_true(g[i] == 5.0f);
        }
        dt_tensor_release(loss);
        dt_tensor_release(y);
        dt_tensor_release(x);
        dt_tensor_release(g_outside);
    }
    dt_tensor_release(w);
    dt_module_destroy(m);
}

static dt_status identity_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    (void)m, (void)n_in;
    *out = dt_tensor_retain(in[0]);
    return DT_OK;
}

static const dt_module_ops identity_ops = {.type_name = "Identity", .forward = identity_forward};

/* A checkpointed module that returns its input: the gradient passes through,
 * and the input keeps its own history (the node hangs on a new handle). */
static void test_checkpoint_identity(void **state)
{
    (void)state;
    int64_t n = 3;
    dt_tensor *w = NULL, *x = NULL, *y = NULL, *loss = NULL;
    NN_OK(dt_tensor_ones(1, &n, DT_DTYPE_F32, dt_device_cpu(), &w));
    NN_OK(dt_tensor_set_requires_grad(w, true));
    dt_module *m = NULL;
    NN_OK(dt_module_create(&identity_ops, NULL, &m));
    NN_OK(dt_module_checkpoint(m, true));
    NN_OK(dt_scale(w, 3.0, &x));
    NN_OK(dt_module_call(m, x, &y));
    assert_ptr_not_equal(y, x);
    NN_OK(dt_sum_all(y, &loss));
    NN_OK(dt_backward(loss, NULL));
    const float *g = dt_tensor_data(dt_tensor_grad(w));
    for (int64_t i = 0; i < n; i++)
        assert_true(g[i] == 3.0f);
    dt_tensor_release(loss);
    dt_tensor_release(y);
    dt_tensor_release(x);
    dt_tensor_release(w);
    dt_module_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checkpoint_marking),
        cmocka_unit_test(test_checkpoint_outside_tensor),
        cmocka_unit_test(test_checkpoint_identity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
