/*
 * The GPT against PyTorch: golden numbers made by tests/reference/gpt_ref.py
 * (committed in tests/reference/golden/). The PyTorch weights are loaded into
 * our modules in FQN order; the same batches come from our token-data reader.
 * Checked: the step-0 loss, every parameter's gradient norm and sampled
 * gradient values, and five training steps of SGD, SGD with momentum and
 * weight decay, AdamW, AdamW and SGD with gradient clipping: the loss at each
 * step and sampled final weights.
 *
 * Tolerance: 1e-5 relative on losses and norms; element values 1e-5 relative
 * plus an absolute floor of 1e-5 times the largest value of that tensor
 * (float32 sums in another order differ by ~1e-7 of the tensor's scale).
 * AdamW's final weights get a further floor of 1e-4 * lr * steps: Adam moves
 * an element by about lr a step whatever its gradient's size, so a gradient
 * that is a near-cancelling float sum (layers.*.attention.wq.bias, norm 4e-4)
 * carries its relative rounding error (~1e-4) into the weight as ~1e-4 * lr a
 * step. The worst case measured, on an AVX2 machine, is 4.6e-7 (0.3 of it).
 * Not compared: layers.*.attention.wk.bias values. Its exact gradient is zero
 * (softmax over keys ignores a per-query constant), so both sides see float
 * rounding noise (~1e-11), which Adam's normalisation turns into updates of
 * either sign; the loss does not depend on it. We check it stays ~0 instead
 * (gradient and SGD-trained values).
 */
#include <cjson/cJSON.h>

#include "nn_test_util.h"

#ifndef NN_GOLDEN_DIR
#error "NN_GOLDEN_DIR must name tests/reference/golden"
#endif

#ifndef REL_TOL
#define REL_TOL 1e-5
#endif

static cJSON *golden;
static float *weights;
static long n_weights;
static dt_gpt_config cfg;
static dt_token_data *data;
static int64_t batch_size, seq_len, n_steps;

static char *read_file(const char *path, long *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)*len + 1);
    assert_int_equal(fread(buf, 1, (size_t)*len, f), (size_t)*len);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

static int64_t jint(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_non_null(v);
    return (int64_t)v->valuedouble;
}

static double jnum(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static const cJSON *jget(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_non_null(v);
    return v;
}

static int setup(void **state)
{
    (void)state;
    long len = 0;
    char *text = read_file(NN_GOLDEN_DIR "/gpt_golden.json", &len);
    golden = cJSON_Parse(text);
    free(text);
    assert_non_null(golden);
    long bytes = 0;
    weights = (float *)read_file(NN_GOLDEN_DIR "/gpt_golden_weights.bin", &bytes);
    n_weights = bytes / 4;
    const cJSON *c = jget(golden, "config");
    cfg = (dt_gpt_config){.vocab_size = jint(c, "vocab_size"),
                          .max_seq_len = jint(c, "max_seq_len"),
                          .dim = jint(c, "dim"),
                          .n_layers = jint(c, "n_layers"),
                          .n_heads = jint(c, "n_heads"),
                          .ffn_dim = jint(c, "ffn_dim")};
    batch_size = jint(golden, "batch");
    seq_len = jint(golden, "seq");
    n_steps = jint(golden, "steps");
    const cJSON *toks = jget(golden, "tokens");
    int n = cJSON_GetArraySize(toks);
    uint16_t *t = malloc(sizeof(uint16_t) * (size_t)n);
    for (int i = 0; i < n; i++)
        t[i] = (uint16_t)cJSON_GetArrayItem(toks, i)->valueint;
    NN_OK(dt_token_data_from_buffer(t, n, &data));
    free(t);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dt_token_data_close(data);
    free(weights);
    cJSON_Delete(golden);
    return 0;
}

typedef struct load_ctx {
    const cJSON *params; /* the JSON list, in PyTorch's named_parameters order */
    int i;
} load_ctx;

/* Copy the golden weights of parameter ctx->i into @p p, checking name and size. */
static dt_status load_one(const char *fqn, dt_module *owner, const char *name, dt_tensor *p,
                          void *user)
{
    load_ctx *c = user;
    const cJSON *e = cJSON_GetArrayItem(c->params, c->i++);
    assert_non_null(e);
    assert_string_equal(fqn, jget(e, "name")->valuestring);
    const cJSON *shape = jget(e, "shape");
    assert_int_equal(cJSON_GetArraySize(shape), dt_tensor_ndim(p));
    for (int d = 0; d < dt_tensor_ndim(p); d++)
        assert_int_equal(cJSON_GetArrayItem(shape, d)->valueint, dt_tensor_dim(p, d));
    int64_t off = jint(e, "offset");
    assert_true(off + dt_tensor_numel(p) <= n_weights);
    memcpy(dt_tensor_data(p), weights + off, sizeof(float) * (size_t)dt_tensor_numel(p));
    return DT_OK;
}

static dt_module *golden_model(void)
{
    dt_module *m = NULL;
    NN_OK(dt_gpt_create(&cfg, 7, &m));
    load_ctx c = {.params = jget(golden, "params"), .i = 0};
    NN_OK(dt_module_foreach_param(m, load_one, &c));
    assert_int_equal(c.i, cJSON_GetArraySize(c.params));
    return m;
}

/* Forward of step @p step's batch: the scalar loss (new reference). */
static dt_tensor *step_loss(dt_module *m, int64_t step)
{
    dt_tensor *x = NULL, *y = NULL, *logits = NULL, *loss = NULL;
    NN_OK(dt_token_data_batch(data, step, batch_size, seq_len, 0, batch_size, &x, &y));
    NN_OK(dt_module_call(m, x, &logits));
    assert_int_equal(dt_tensor_dim(logits, 2), cfg.vocab_size);
    NN_OK(dt_nn_cross_entropy(logits, y, &loss));
    dt_tensor_release(logits);
    dt_tensor_release(x);
    dt_tensor_release(y);
    return loss;
}

static void expect_rel(const char *what, double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol * fabs(want)))
        fail_msg("%s: got %.9g, expected %.9g (rel err %.3g > %.1g)", what, got, want,
                 fabs(got - want) / fabs(want), tol);
}

/* Largest |value| of a CPU tensor. */
static double max_abs(const dt_tensor *t)
{
    double m = 0.0;
    for (int64_t i = 0; i < dt_tensor_numel(t); i++)
        m = fmax(m, fabs(dt_tensor_item_at(t, i)));
    return m;
}

/* Sampled values {idx: [...], val: [...]} of @p t within REL_TOL plus an
 * absolute floor of max(REL_TOL * max |t|, @p abs_floor) (see the top). */
static void expect_samples(const char *what, const dt_tensor *t, const cJSON *e, double abs_floor)
{
    const cJSON *idx = jget(e, "idx"), *val = jget(e, "val");
    double floor_ = fmax(REL_TOL * max_abs(t), abs_floor);
    for (int k = 0; k < cJSON_GetArraySize(idx); k++) {
        int64_t i = (int64_t)cJSON_GetArrayItem(idx, k)->valuedouble;
        double want = cJSON_GetArrayItem(val, k)->valuedouble;
        double got = dt_tensor_item_at(t, i);
        if (!(fabs(got - want) <= REL_TOL * fabs(want) + floor_))
            fail_msg("%s[%lld]: got %.9g, expected %.9g", what, (long long)i, got, want);
    }
}

static void test_param_order_and_count(void **state)
{
    (void)state;
    dt_module *m = golden_model(); /* asserts every FQN and shape against PyTorch's */
    assert_int_equal(dt_module_param_count(m), cJSON_GetArraySize(jget(golden, "params")));
    assert_int_equal(dt_module_param_numel(m), n_weights);
    dt_module_destroy(m);
}

typedef struct grad_ctx {
    const cJSON *grads;
    int i;
    double sum_sq;
} grad_ctx;

static dt_status check_grad(const char *fqn, dt_module *owner, const char *name, dt_tensor *p,
                            void *user)
{
    grad_ctx *c = user;
    const cJSON *e = cJSON_GetArrayItem(c->grads, c->i++);
    assert_string_equal(fqn, jget(e, "name")->valuestring);
    dt_tensor *g = dt_tensor_grad(p);
    if (g == NULL)
        fail_msg("%s has no gradient", fqn);
    double ss = 0.0;
    for (int64_t i = 0; i < dt_tensor_numel(g); i++)
        ss += dt_tensor_item_at(g, i) * dt_tensor_item_at(g, i);
    c->sum_sq += ss;
    char what[160];
    snprintf(what, sizeof(what), "grad norm of %s", fqn);
    /* wk.bias: exactly zero in exact arithmetic, noise on both sides */
    if (strstr(fqn, "attention.wk.bias") == NULL) {
        expect_rel(what, sqrt(ss), jnum(e, "norm"), REL_TOL);
        snprintf(what, sizeof(what), "grad of %s", fqn);
        expect_samples(what, g, e, 0.0);
    } else {
        assert_true(sqrt(ss) < 1e-5);
    }
    return DT_OK;
}

static void test_forward_backward(void **state)
{
    (void)state;
    dt_module *m = golden_model();
    dt_tensor *loss = step_loss(m, 0);
    double l = 0.0;
    NN_OK(dt_tensor_item(loss, &l));
    expect_rel("step-0 loss", l, jnum(golden, "loss"), REL_TOL);
    NN_OK(dt_backward(loss, NULL));
    grad_ctx c = {.grads = jget(golden, "grads"), .i = 0, .sum_sq = 0.0};
    NN_OK(dt_module_foreach_param(m, check_grad, &c));
    expect_rel("global grad norm", sqrt(c.sum_sq), jnum(golden, "grad_norm"), REL_TOL);
    dt_tensor_release(loss);
    dt_module_destroy(m);
}

typedef struct final_ctx {
    const cJSON *final;
    int i;
    bool adam;
    double lr;
} final_ctx;

static dt_status check_final(const char *fqn, dt_module *owner, const char *name, dt_tensor *p,
                             void *user)
{
    final_ctx *c = user;
    const cJSON *e = cJSON_GetArrayItem(c->final, c->i++);
    assert_string_equal(fqn, jget(e, "name")->valuestring);
    if (strstr(fqn, "attention.wk.bias") != NULL) {
        /* noise on both sides (see the top): SGD keeps it near 0, Adam amplifies it */
        if (!c->adam)
            assert_true(max_abs(p) < 1e-6);
        return DT_OK;
    }
    char what[160];
    snprintf(what, sizeof(what), "final %s", fqn);
    expect_samples(what, p, e, c->adam ? 1e-4 * c->lr * (double)n_steps : 0.0);
    return DT_OK;
}

static dt_optim *make_optim(dt_module *m, const cJSON *run)
{
    dt_optim *o = NULL;
    const char *kind = jget(run, "optim")->valuestring;
    if (strcmp(kind, "sgd") == 0) {
        dt_sgd_params p = {.field_mask = DT_SGD_PARAM_FIELD_LR | DT_SGD_PARAM_FIELD_MOMENTUM |
                                         DT_SGD_PARAM_FIELD_WEIGHT_DECAY,
                           .lr = jnum(run, "lr"),
                           .momentum = jnum(run, "momentum"),
                           .weight_decay = jnum(run, "weight_decay")};
        NN_OK(dt_optim_sgd_create(m, &p, &o));
    } else {
        /* betas and eps: the defaults are the spec's (0.9, 0.95), 1e-8 */
        dt_adamw_params p = {.field_mask =
                                 DT_ADAMW_PARAM_FIELD_LR | DT_ADAMW_PARAM_FIELD_WEIGHT_DECAY,
                             .lr = jnum(run, "lr"),
                             .weight_decay = jnum(run, "weight_decay")};
        NN_OK(dt_optim_adamw_create(m, &p, &o));
    }
    assert_string_equal(dt_optim_name(o), kind);
    return o;
}

static void run_training(const cJSON *run)
{
    dt_module *m = golden_model();
    dt_optim *o = make_optim(m, run);
    double clip = jnum(run, "clip");
    const cJSON *losses = jget(run, "losses");
    assert_int_equal(cJSON_GetArraySize(losses), n_steps);
    for (int64_t s = 0; s < n_steps; s++) {
        dt_optim_zero_grad(o);
        dt_tensor *loss = step_loss(m, s);
        double l = 0.0;
        NN_OK(dt_tensor_item(loss, &l));
        char what[96];
        snprintf(what, sizeof(what), "%s (clip %g) loss at step %lld",
                 jget(run, "optim")->valuestring, clip, (long long)s);
        expect_rel(what, l, cJSON_GetArrayItem(losses, (int)s)->valuedouble, REL_TOL);
        NN_OK(dt_backward(loss, NULL));
        dt_tensor_release(loss);
        if (clip > 0.0) {
            double norm = 0.0;
            NN_OK(dt_clip_grad_norm(m, clip, &norm));
            assert_true(norm > 0.0);
        }
        NN_OK(dt_optim_step(o));
    }
    assert_int_equal(dt_optim_step_count(o), n_steps);
    final_ctx c = {.final = jget(run, "final"),
                   .i = 0,
                   .adam = strcmp(jget(run, "optim")->valuestring, "adamw") == 0,
                   .lr = jnum(run, "lr")};
    NN_OK(dt_module_foreach_param(m, check_final, &c));
    dt_optim_destroy(o);
    dt_module_destroy(m);
}

static void test_training_runs(void **state)
{
    (void)state;
    const cJSON *runs = jget(golden, "runs");
    assert_true(cJSON_GetArraySize(runs) >= 4);
    const cJSON *run = NULL;
    cJSON_ArrayForEach(run, runs) run_training(run);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_param_order_and_count),
        cmocka_unit_test(test_forward_backward),
        cmocka_unit_test(test_training_runs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
