/* The MLP (FeedForward) and the pre-norm transformer Block. */
#include <inttypes.h>
#include <stdlib.h>

#include "core/error.h"
#include "dtensor/ops.h"
#include "nn/module_impl.h"
#include "nn/nn_internal.h"

/* ---------------------------------------------------------------- FeedForward */

static dt_status feed_forward_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    DT_CHECK(dt__module_check_inputs(m, n_in, in, 1));
    dt_tensor *h = NULL, *g = NULL;
    dt_status status;
    DT_CHECK(dt__module_call_child(m, "w1", in[0], &h));
    DT_CHECK_GOTO(dt_gelu_tanh(h, &g), status, out_release);
    status = dt__module_call_child(m, "w2", g, out);
out_release:
    dt_tensor_release(g);
    dt_tensor_release(h);
    return status;
}

const dt_module_ops dt__feed_forward_ops = {.type_name = "FeedForward",
                                            .forward = feed_forward_forward};

dt_status dt_feed_forward_create(int64_t dim, int64_t hidden, dt_module **out)
{
    DT_ARG_NOT_NULL(out);
    if (dim <= 0 || hidden <= 0)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_feed_forward_create: sizes must be positive, got dim %" PRId64
                      " hidden %" PRId64,
                      dim, hidden);
    dt_module *m = NULL, *w1 = NULL, *w2 = NULL;
    dt_status status;
    DT_CHECK(dt_module_create(&dt__feed_forward_ops, NULL, &m));
    DT_CHECK_GOTO(dt_linear_create(dim, hidden, true, &w1), status, err_destroy);
    DT_CHECK_GOTO(dt__module_adopt(m, "w1", w1), status, err_destroy);
    DT_CHECK_GOTO(dt_linear_create(hidden, dim, true, &w2), status, err_destroy);
    DT_CHECK_GOTO(dt__module_adopt(m, "w2", w2), status, err_destroy);
    *out = m;
    return DT_OK;

err_destroy:
    dt_module_destroy(m);
    return status;
}

/* ---------------------------------------------------------------- Block */

/* out = x + child_b(child_a(x)) */
static dt_status residual(dt_module *m, const char *norm, const char *body, dt_tensor *x,
                          dt_tensor **out)
{
    dt_tensor *n = NULL, *b = NULL;
    dt_status status;
    DT_CHECK(dt__module_call_child(m, norm, x, &n));
    DT_CHECK_GOTO(dt__module_call_child(m, body, n, &b), status, out_release);
    status = dt_add(x, b, out);
out_release:
    dt_tensor_release(b);
    dt_tensor_release(n);
    return status;
}

static dt_status block_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    DT_CHECK(dt__module_check_inputs(m, n_in, in, 1));
    dt_tensor *h = NULL;
    DT_CHECK(residual(m, "attention_norm", "attention", in[0], &h));
    dt_status status = residual(m, "ffn_norm", "feed_forward", h, out);
    dt_tensor_release(h);
    return status;
}

static const dt_module_ops block_ops = {.type_name = "Block", .forward = block_forward};

dt_status dt_block_create(int64_t dim, int64_t n_heads, int64_t ffn_dim, double eps,
                          dt_module **out)
{
    DT_ARG_NOT_NULL(out);
    dt_module *m = NULL, *c = NULL;
    dt_status status;
    DT_CHECK(dt_module_create(&block_ops, NULL, &m));
    DT_CHECK_GOTO(dt_layer_norm_create(dim, eps, &c), status, err_destroy);
    DT_CHECK_GOTO(dt__module_adopt(m, "attention_norm", c), status, err_destroy);
    DT_CHECK_GOTO(dt_attention_create(dim, n_heads, &c), status, err_destroy);
    DT_CHECK_GOTO(dt__module_adopt(m, "attention", c), status, err_destroy);
    DT_CHECK_GOTO(dt_layer_norm_create(dim, eps, &c), status, err_destroy);
    DT_CHECK_GOTO(dt__module_adopt(m, "ffn_norm", c), status, err_destroy);
    DT_CHECK_GOTO(dt_feed_forward_create(dim, ffn_dim, &c), status, err_destroy);
    DT_CHECK_GOTO(dt__module_adopt(m, "feed_forward", c), status, err_destroy);
    *out = m;
    return DT_OK;

err_destroy:
    dt_module_destroy(m);
    return status;
}
