/*
 * Each built-in module's forward against a float64 reference computed here
 * from the same (random) parameters: Linear, Embedding, LayerNorm,
 * FeedForward, Attention (all heads, and local heads of a column-sharded
 * projection), Block, and a whole 2-layer GPT.
 * Tolerance: 1e-5 relative + 1e-5 absolute (float32 compute).
 */
#include "nn_test_util.h"

#define RTOL 1e-5
#define ATOL 1e-5

/* Randomise every parameter of @p m (LayerNorm weights around 1). */
static dt_status randomise(const char *fqn, dt_module *owner, const char *name, dt_tensor *p,
                           void *user)
{
    bool ln_w = strcmp(dt_module_type_name(owner), "LayerNorm") == 0 && strcmp(name, "weight") == 0;
    nn_fill_rand(p, ln_w ? 0.5 : -0.5, ln_w ? 1.5 : 0.5);
    return DT_OK;
}

static double *param_vals(dt_module *root, const char *module_fqn, const char *name)
{
    dt_module *m = NULL;
    NN_OK(dt_module_find(root, module_fqn, &m));
    dt_tensor *t = dt_module_param(m, name);
    assert_non_null(t);
    return nn_vals(t);
}

/* ---------------------------------------------------------------- float64 references */

/* y[n, o] = sum_i x[n, i] w[o, i] + b[o] */
static void ref_linear(const double *x, int64_t n, int64_t in, const double *w, const double *b,
                       int64_t out, double *y)
{
    for (int64_t r = 0; r < n; r++)
        for (int64_t o = 0; o < out; o++) {
            double acc = b != NULL ? b[o] : 0.0;
            for (int64_t i = 0; i < in; i++)
                acc += x[r * in + i] * w[o * in + i];
            y[r * out + o] = acc;
        }
}

static void ref_layer_norm(const double *x, int64_t n, int64_t d, const double *w, const double *b,
                           double *y)
{
    for (int64_t r = 0; r < n; r++) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < d; i++)
            mean += x[r * d + i];
        mean /= d;
        for (int64_t i = 0; i < d; i++)
            var += (x[r * d + i] - mean) * (x[r * d + i] - mean);
        var /= d;
        for (int64_t i = 0; i < d; i++)
            y[r * d + i] = (x[r * d + i] - mean) / sqrt(var + 1e-5) * w[i] + b[i];
    }
}

static double gelu_tanh(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

/* The FeedForward at @p fqn of @p root on x [n, d]. */
static void ref_feed_forward(dt_module *root, const char *fqn, const double *x, int64_t n,
                             int64_t d, int64_t hidden, double *y)
{
    char p1[96], p2[96];
    snprintf(p1, sizeof(p1), "%s%sw1", fqn, fqn[0] ? "." : "");
    snprintf(p2, sizeof(p2), "%s%sw2", fqn, fqn[0] ? "." : "");
    double *w1 = param_vals(root, p1, "weight"), *b1 = param_vals(root, p1, "bias");
    double *w2 = param_vals(root, p2, "weight"), *b2 = param_vals(root, p2, "bias");
    double *h = malloc(sizeof(double) * (size_t)(n * hidden));
    ref_linear(x, n, d, w1, b1, hidden, h);
    for (int64_t i = 0; i < n * hidden; i++)
        h[i] = gelu_tanh(h[i]);
    ref_linear(h, n, hidden, w2, b2, d, y);
    free(h);
    free(w1);
    free(b1);
    free(w2);
    free(b2);
}

/*
 * Causal attention of x [B, T, d] with projections of @p width = heads *
 * head_dim output columns (the local heads) and wo [d, width].
 */
static void ref_attention(const double *x, int64_t B, int64_t T, int64_t d, int64_t width,
                          int64_t head_dim, const double *const w[4], const double *const b[4],
                          double *y)
{
    int64_t n = B * T, heads = width / head_dim;
    double *q = malloc(sizeof(double) * (size_t)(n * width));
    double *k = malloc(sizeof(double) * (size_t)(n * width));
    double *v = malloc(sizeof(double) * (size_t)(n * width));
    double *o = calloc((size_t)(n * width), sizeof(double));
    ref_linear(x, n, d, w[0], b[0], width, q);
    ref_linear(x, n, d, w[1], b[1], width, k);
    ref_linear(x, n, d, w[2], b[2], width, v);
    double scale = 1.0 / sqrt((double)head_dim), s[64];
    for (int64_t bb = 0; bb < B; bb++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t i = 0; i < T; i++) {
                double mx = -INFINITY, z = 0;
                for (int64_t j = 0; j <= i; j++) {
                    double acc = 0;
                    for (int64_t e = 0; e < head_dim; e++)
                        acc += q[(bb * T + i) * width + h * head_dim + e] *
                               k[(bb * T + j) * width + h * head_dim + e];
                    s[j] = acc * scale;
                    mx = fmax(mx, s[j]);
                }
                for (int64_t j = 0; j <= i; j++)
                    z += (s[j] = exp(s[j] - mx));
                for (int64_t j = 0; j <= i; j++)
                    for (int64_t e = 0; e < head_dim; e++)
                        o[(bb * T + i) * width + h * head_dim + e] +=
                            s[j] / z * v[(bb * T + j) * width + h * head_dim + e];
            }
    ref_linear(o, n, width, w[3], b[3], d, y);
    free(q);
    free(k);
    free(v);
    free(o);
}

/* The full-width Attention at @p fqn of @p root. */
static void ref_attention_module(dt_module *root, const char *fqn, const double *x, int64_t B,
                                 int64_t T, int64_t d, int64_t head_dim, double *y)
{
    static const char *const names[4] = {"wq", "wk", "wv", "wo"};
    double *w[4], *b[4];
    for (int i = 0; i < 4; i++) {
        char p[300];
        snprintf(p, sizeof(p), "%s%s%s", fqn, fqn[0] ? "." : "", names[i]);
        w[i] = param_vals(root, p, "weight");
        b[i] = param_vals(root, p, "bias");
    }
    ref_attention(x, B, T, d, d, head_dim, (const double *const *)w, (const double *const *)b, y);
    for (int i = 0; i < 4; i++) {
        free(w[i]);
        free(b[i]);
    }
}

/* Block at @p fqn: x + attn(ln1(x)), then + ff(ln2(.)). */
static void ref_block(dt_module *root, const char *fqn, const double *x, int64_t B, int64_t T,
                      int64_t d, int64_t head_dim, int64_t hidden, double *y)
{
    int64_t n = B * T;
    double *a = malloc(sizeof(double) * (size_t)(n * d)),
           *t = malloc(sizeof(double) * (size_t)(n * d));
    char p[96];
    snprintf(p, sizeof(p), "%s.attention_norm", fqn);
    double *w = param_vals(root, p, "weight"), *b = param_vals(root, p, "bias");
    ref_layer_norm(x, n, d, w, b, a);
    free(w);
    free(b);
    snprintf(p, sizeof(p), "%s.attention", fqn);
    ref_attention_module(root, p, a, B, T, d, head_dim, t);
    for (int64_t i = 0; i < n * d; i++)
        y[i] = x[i] + t[i];
    snprintf(p, sizeof(p), "%s.ffn_norm", fqn);
    w = param_vals(root, p, "weight");
    b = param_vals(root, p, "bias");
    ref_layer_norm(y, n, d, w, b, a);
    free(w);
    free(b);
    snprintf(p, sizeof(p), "%s.feed_forward", fqn);
    ref_feed_forward(root, p, a, n, d, hidden, t);
    for (int64_t i = 0; i < n * d; i++)
        y[i] += t[i];
    free(a);
    free(t);
}

/* ---------------------------------------------------------------- tests */

static void run_module(dt_module *m, dt_tensor *x, const double *want, const char *what)
{
    dt_tensor *y = NULL;
    NN_OK(dt_module_call(m, x, &y));
    nn_expect_close(what, want, y, RTOL, ATOL);
    dt_tensor_release(y);
}

static void test_linear(void **state)
{
    (void)state;
    for (int bias = 0; bias < 2; bias++) {
        dt_module *m = NULL;
        NN_OK(dt_linear_create(5, 7, bias, &m));
        NN_OK(dt_module_foreach_param(m, randomise, NULL));
        int64_t xs[3] = {2, 3, 5};
        dt_tensor *x = nn_rand_tensor(3, xs, -1, 1);
        double *xv = nn_vals(x), *w = param_vals(m, "", "weight"), y[42];
        double *b = bias ? param_vals(m, "", "bias") : NULL;
        ref_linear(xv, 6, 5, w, b, 7, y);
        run_module(m, x, y, bias ? "Linear with bias" : "Linear without bias");
        free(xv);
        free(w);
        free(b);
        dt_tensor_release(x);
        dt_module_destroy(m);
    }
}

static void test_embedding(void **state)
{
    (void)state;
    dt_module *m = NULL;
    NN_OK(dt_embedding_create(9, 4, &m));
    NN_OK(dt_module_foreach_param(m, randomise, NULL));
    int64_t shape[2] = {2, 3}, ids[6] = {8, 0, 3, 3, 7, 1};
    dt_tensor *x = nn_ids(2, shape, ids);
    double *w = param_vals(m, "", "weight"), y[24];
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 4; j++)
            y[i * 4 + j] = w[ids[i] * 4 + j];
    run_module(m, x, y, "Embedding");
    dt_tensor_release(x);
    int64_t bad[6] = {0, 9, 0, 0, 0, 0};
    x = nn_ids(2, shape, bad);
    dt_tensor *out = NULL;
    assert_int_equal(dt_module_call(m, x, &out), DT_ERR_INVALID_ARG);
    dt_tensor_release(x);
    free(w);
    dt_module_destroy(m);
}

static void test_layer_norm(void **state)
{
    (void)state;
    dt_module *m = NULL;
    NN_OK(dt_layer_norm_create(6, 1e-5, &m));
    NN_OK(dt_module_foreach_param(m, randomise, NULL));
    int64_t xs[3] = {2, 3, 6};
    dt_tensor *x = nn_rand_tensor(3, xs, -2, 3);
    double *xv = nn_vals(x), *w = param_vals(m, "", "weight"), *b = param_vals(m, "", "bias"),
           y[36];
    ref_layer_norm(xv, 6, 6, w, b, y);
    run_module(m, x, y, "LayerNorm");
    free(xv);
    free(w);
    free(b);
    dt_tensor_release(x);
    dt_module_destroy(m);
}

static void test_feed_forward(void **state)
{
    (void)state;
    dt_module *m = NULL;
    NN_OK(dt_feed_forward_create(6, 10, &m));
    NN_OK(dt_module_foreach_param(m, randomise, NULL));
    int64_t xs[3] = {2, 4, 6};
    dt_tensor *x = nn_rand_tensor(3, xs, -2, 2);
    double *xv = nn_vals(x), y[48];
    ref_feed_forward(m, "", xv, 8, 6, 10, y);
    run_module(m, x, y, "FeedForward");
    free(xv);
    dt_tensor_release(x);
    dt_module_destroy(m);
}

static void test_attention(void **state)
{
    (void)state;
    int64_t B = 2, T = 5, d = 12, H = 3, hd = 4;
    dt_module *m = NULL;
    NN_OK(dt_attention_create(d, H, &m));
    NN_OK(dt_module_foreach_param(m, randomise, NULL));
    int64_t xs[3] = {B, T, d};
    dt_tensor *x = nn_rand_tensor(3, xs, -1, 1);
    double *xv = nn_vals(x), y[120];
    ref_attention_module(m, "", xv, B, T, d, hd, y);
    run_module(m, x, y, "Attention");
    free(xv);
    dt_tensor_release(x);
    dt_module_destroy(m);
}

/* A contiguous copy of elements [start, start + len) of dim @p dim of @p t. */
static dt_tensor *slice(dt_tensor *t, int dim, int64_t start, int64_t len)
{
    dt_tensor *v = NULL, *c = NULL;
    NN_OK(dt_tensor_narrow(t, dim, start, len, &v));
    NN_OK(dt_tensor_clone(v, &c));
    dt_tensor_release(v);
    return c;
}

/*
 * What a column-sharded attention computes on one rank: wq/wk/wv hold the rows
 * of heads [1, 3) of 4 and wo the matching columns, so the module runs on 2
 * local heads (it derives them from the projection width) and returns that
 * rank's partial sum of wo (plus wo's bias).
 */
static void test_attention_local_heads(void **state)
{
    (void)state;
    int64_t B = 2, T = 4, d = 16, H = 4, hd = 4, h0 = 1, hl = 2;
    dt_module *m = NULL;
    NN_OK(dt_attention_create(d, H, &m));
    NN_OK(dt_module_foreach_param(m, randomise, NULL));
    static const char *const names[4] = {"wq", "wk", "wv", "wo"};
    double *w[4], *b[4];
    for (int i = 0; i < 4; i++) {
        dt_module *lin = dt_module_child(m, names[i]);
        dt_tensor *wt = dt_module_param(lin, "weight"), *bt = dt_module_param(lin, "bias");
        dt_tensor *ws = slice(wt, i < 3 ? 0 : 1, h0 * hd, hl * hd);
        dt_tensor *bs = i < 3 ? slice(bt, 0, h0 * hd, hl * hd) : dt_tensor_retain(bt);
        NN_OK(dt_module_param_set(lin, "weight", ws));
        NN_OK(dt_module_param_set(lin, "bias", bs));
        w[i] = nn_vals(ws);
        b[i] = nn_vals(bs);
        dt_tensor_release(ws);
        dt_tensor_release(bs);
    }
    int64_t xs[3] = {B, T, d};
    dt_tensor *x = nn_rand_tensor(3, xs, -1, 1);
    double *xv = nn_vals(x), y[128];
    ref_attention(xv, B, T, d, hl * hd, hd, (const double *const *)w, (const double *const *)b, y);
    run_module(m, x, y, "Attention on 2 local heads");
    /* a projection width that is not a whole number of heads is refused */
    dt_tensor *odd = slice(dt_module_param(dt_module_child(m, "wq"), "weight"), 0, 0, 3);
    dt_tensor *odd_b = slice(dt_module_param(dt_module_child(m, "wk"), "bias"), 0, 0, 3);
    NN_OK(dt_module_param_set(dt_module_child(m, "wq"), "weight", odd));
    NN_OK(dt_module_param_set(dt_module_child(m, "wq"), "bias", odd_b));
    dt_tensor *out = NULL;
    NN_FAILS(dt_module_call(m, x, &out), DT_ERR_INVALID_ARG, "heads*4");
    dt_tensor_release(odd);
    dt_tensor_release(odd_b);
    for (int i = 0; i < 4; i++) {
        free(w[i]);
        free(b[i]);
    }
    free(xv);
    dt_tensor_release(x);
    dt_module_destroy(m);
}

static void test_block(void **state)
{
    (void)state;
    int64_t B = 2, T = 3, d = 8, H = 2, F = 12;
    dt_module *m = NULL, *root = NULL;
    NN_OK(dt_sequential_create(&root));
    NN_OK(dt_block_create(d, H, F, 1e-5, &m));
    NN_OK(dt_sequential_append(root, m));
    NN_OK(dt_module_foreach_param(root, randomise, NULL));
    int64_t xs[3] = {B, T, d};
    dt_tensor *x = nn_rand_tensor(3, xs, -1, 1);
    double *xv = nn_vals(x), y[48];
    ref_block(root, "0", xv, B, T, d, d / H, F, y);
    run_module(root, x, y, "Block");
    free(xv);
    dt_tensor_release(x);
    dt_module_destroy(root);
}

static void test_gpt(void **state)
{
    (void)state;
    dt_gpt_config c = {
        .vocab_size = 13, .max_seq_len = 6, .dim = 8, .n_layers = 2, .n_heads = 2, .ffn_dim = 12};
    int64_t B = 2, T = 5, n = B * T, d = c.dim;
    dt_module *m = NULL;
    NN_OK(dt_gpt_create(&c, 5, &m));
    NN_OK(dt_module_foreach_param(m, randomise, NULL));
    int64_t shape[2] = {B, T}, ids[10] = {1, 12, 4, 4, 0, 7, 3, 9, 2, 11};
    dt_tensor *x = nn_ids(2, shape, ids);
    double *tok = param_vals(m, "tok_embeddings", "weight");
    double *pos = param_vals(m, "pos_embeddings", "weight");
    double h[80], h2[80], a[80], logits[130];
    for (int64_t r = 0; r < n; r++)
        for (int64_t j = 0; j < d; j++)
            h[r * d + j] = tok[ids[r] * d + j] + pos[(r % T) * d + j];
    ref_block(m, "layers.0", h, B, T, d, d / c.n_heads, c.ffn_dim, h2);
    ref_block(m, "layers.1", h2, B, T, d, d / c.n_heads, c.ffn_dim, h);
    double *w = param_vals(m, "norm", "weight"), *b = param_vals(m, "norm", "bias");
    ref_layer_norm(h, n, d, w, b, a);
    double *wo = param_vals(m, "output", "weight");
    ref_linear(a, n, d, wo, NULL, c.vocab_size, logits);
    run_module(m, x, logits, "GPT logits");

    /* the loss: mean cross entropy against the next ids */
    int64_t tg[10] = {12, 4, 4, 0, 7, 3, 9, 2, 11, 1};
    dt_tensor *targets = nn_ids(2, shape, tg), *lg = NULL, *loss = NULL;
    NN_OK(dt_module_call(m, x, &lg));
    NN_OK(dt_nn_cross_entropy(lg, targets, &loss));
    double want = 0.0;
    for (int64_t r = 0; r < n; r++) {
        double mx = -INFINITY, z = 0.0;
        for (int64_t v = 0; v < c.vocab_size; v++)
            mx = fmax(mx, logits[r * c.vocab_size + v]);
        for (int64_t v = 0; v < c.vocab_size; v++)
            z += exp(logits[r * c.vocab_size + v] - mx);
        want += mx + log(z) - logits[r * c.vocab_size + tg[r]];
    }
    want /= (double)n;
    nn_expect_close("GPT loss", &want, loss, RTOL, ATOL);
    dt_tensor_release(loss);
    dt_tensor_release(lg);
    dt_tensor_release(targets);
    free(tok);
    free(pos);
    free(w);
    free(b);
    free(wo);
    dt_tensor_release(x);
    dt_module_destroy(m);
}

/* Dropout: keeps about 1 - p of the elements, scaled by 1 / (1 - p); the mask
 * comes from the forward random stream (the same state, the same mask; the
 * next draw, another); the gradient is masked alike; bad input is named. */
static void test_dropout(void **state)
{
    (void)state;
    int64_t n = 4000;
    dt_tensor *x = NULL, *y = NULL, *y2 = NULL, *loss = NULL;
    NN_OK(dt_tensor_ones(1, &n, DT_DTYPE_F32, dt_device_cpu(), &x));
    NN_OK(dt_tensor_set_requires_grad(x, true));
    dt_rng_state st = dt_rng_get_state();
    NN_OK(dt_nn_dropout(x, 0.25, &y));
    dt_rng_set_state(st);
    NN_OK(dt_nn_dropout(x, 0.25, &y2));
    const float *a = dt_tensor_data(y), *b = dt_tensor_data(y2);
    assert_memory_equal(a, b, (size_t)n * sizeof(float)); /* replayed */
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) {
        assert_true(a[i] == 0.0f || fabsf(a[i] - 4.0f / 3.0f) < 1e-6f);
        kept += a[i] != 0.0f;
    }
    assert_true(kept > 2800 && kept < 3200); /* 3000 expected, sd 27 */
    dt_tensor_release(y2);
    NN_OK(dt_nn_dropout(x, 0.25, &y2)); /* the stream moved on: another mask */
    assert_memory_not_equal(a, dt_tensor_data(y2), (size_t)n * sizeof(float));
    NN_OK(dt_sum_all(y, &loss));
    NN_OK(dt_backward(loss, NULL));
    assert_memory_equal(dt_tensor_data(dt_tensor_grad(x)), a, (size_t)n * sizeof(float));
    dt_tensor_release(loss);
    dt_tensor_release(y);
    dt_tensor_release(y2);
    NN_OK(dt_nn_dropout(x, 0.0, &y)); /* p = 0: x itself */
    assert_ptr_equal(y, x);
    dt_tensor_release(y);
    dt_module *m = NULL;
    NN_FAILS(dt_nn_dropout(x, 1.0, &y), DT_ERR_INVALID_ARG, "p = 1");
    NN_FAILS(dt_nn_dropout(x, -0.5, &y), DT_ERR_INVALID_ARG, "p = -0.5");
    NN_FAILS(dt_nn_dropout(NULL, 0.5, &y), DT_ERR_INVALID_ARG, "x");
    NN_FAILS(dt_dropout_create(1.5, &m), DT_ERR_INVALID_ARG, "p = 1.5");
    NN_OK(dt_dropout_create(0.5, &m));
    assert_string_equal(dt_module_type_name(m), "Dropout");
    dt_module_destroy(m);
    dt_tensor_release(x);
    dt_tensor *ids = NULL;
    NN_OK(dt_tensor_zeros(1, &n, DT_DTYPE_I64, dt_device_cpu(), &ids));
    NN_FAILS(dt_nn_dropout(ids, 0.5, &y), DT_ERR_INVALID_ARG, "i64");
    dt_tensor_release(ids);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),     cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_layer_norm), cmocka_unit_test(test_feed_forward),
        cmocka_unit_test(test_attention),  cmocka_unit_test(test_attention_local_heads),
        cmocka_unit_test(test_block),      cmocka_unit_test(test_gpt),
        cmocka_unit_test(test_dropout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
