/*
 * Full state dicts of the GPT on one rank: dt_save_full / dt_load_full round
 * trip, every mismatch naming the FQN with the model left untouched, and the
 * PyTorch golden: the loss PyTorch computed (tests/checkpoint/torch_check.py)
 * on the weights this test writes, checked on every run without PyTorch.
 */
#include <cjson/cJSON.h>
#include <math.h>

#include "ck_gpt_util.h"

#ifndef CK_GOLDEN_DIR
#error "CK_GOLDEN_DIR must name tests/checkpoint/golden"
#endif

static void test_roundtrip(void **state)
{
    (void)state;
    char dir[256], path[300];
    ck_tmpdir(dir, sizeof(dir), "gpt");
    snprintf(path, sizeof(path), "%s/gpt.safetensors", dir);
    dt_module *a = ck_gpt("tiny", 1), *b = ck_gpt("tiny", 2);
    static dt_tensor *snap_a[CK_MAX_PARAMS], *snap_b[CK_MAX_PARAMS];
    int na = 0, nb = 0;
    ck_snapshot(a, snap_a, &na);
    ck_snapshot(b, snap_b, &nb);
    assert_false(dt_tensor_equal(snap_a[0], snap_b[0]));
    CK_OK(dt_save_full(a, path));
    dt_safetensors *f = NULL;
    CK_OK(dt_safetensors_open(path, &f));
    assert_int_equal(dt_safetensors_count(f), na);
    assert_string_equal(dt_safetensors_metadata_get(f, "format"), "pt");
    int idx = -1;
    CK_OK(dt_safetensors_find(f, "layers.1.attention.wq.weight", &idx));
    dt_safetensors_close(f);
    CK_OK(dt_load_full(b, path));
    ck_assert_params(b, snap_a, na, "after load");
    ck_release_all(snap_a, na);
    ck_release_all(snap_b, nb);
    dt_module_destroy(a);
    dt_module_destroy(b);
    ck_rmdir(dir);
}

/* A file like @p m's state dict, with entry @p skip left out, entry @p f64
 * stored as f64, and an extra tensor when @p extra. */
static void write_variant(dt_module *m, const char *path, int skip, int f64, bool extra)
{
    ck_params p;
    ck_params_of(m, &p);
    const char *names[CK_MAX_PARAMS + 1];
    dt_tensor *ts[CK_MAX_PARAMS + 1];
    int n = 0;
    for (int i = 0; i < p.n; i++) {
        if (i == skip)
            continue;
        names[n] = p.fqn[i];
        if (i == f64)
            CK_OK(dt_tensor_to_dtype(p.t[i], DT_DTYPE_F64, &ts[n]));
        else
            ts[n] = dt_tensor_retain(p.t[i]);
        n++;
    }
    if (extra) {
        names[n] = "lm_head.extra";
        CK_OK(dt_tensor_zeros(0, NULL, DT_DTYPE_F32, dt_device_cpu(), &ts[n]));
        n++;
    }
    CK_OK(dt_safetensors_save(path, n, names, ts, 0, NULL));
    ck_release_all(ts, n);
}

static void test_mismatch(void **state)
{
    (void)state;
    char dir[256], path[300];
    ck_tmpdir(dir, sizeof(dir), "gptbad");
    snprintf(path, sizeof(path), "%s/v.safetensors", dir);
    dt_module *src = ck_gpt("tiny", 3), *dst = ck_gpt("tiny", 4);
    static dt_tensor *snap[CK_MAX_PARAMS];
    int n = 0;
    ck_snapshot(dst, snap, &n);
    ck_params p;
    ck_params_of(src, &p);
    /* the last parameter missing: everything before it would load, but nothing may */
    write_variant(src, path, p.n - 1, -1, false);
    char want[256];
    snprintf(want, sizeof(want), "parameter '%s' is missing from", p.fqn[p.n - 1]);
    CK_FAILS(dt_load_full(dst, path), DT_ERR_INVALID_ARG, want);
    ck_assert_params(dst, snap, n, "after a missing key");
    write_variant(src, path, -1, p.n - 2, false);
    snprintf(want, sizeof(want), "parameter '%s' is f32", p.fqn[p.n - 2]);
    CK_FAILS(dt_load_full(dst, path), DT_ERR_INVALID_ARG, want);
    CK_FAILS(dt_load_full(dst, path), DT_ERR_INVALID_ARG, "in the model, F64");
    ck_assert_params(dst, snap, n, "after a dtype mismatch");
    write_variant(src, path, -1, -1, true);
    CK_FAILS(dt_load_full(dst, path), DT_ERR_INVALID_ARG,
             "holds 'lm_head.extra', which the model does not have");
    ck_assert_params(dst, snap, n, "after an extra key");
    /* another shape: a smaller model's file */
    dt_gpt_config cfg;
    CK_OK(dt_gpt_config_preset("tiny", &cfg));
    cfg.ffn_dim = 128;
    dt_module *small = NULL;
    CK_OK(dt_gpt_create(&cfg, 5, &small));
    CK_OK(dt_save_full(small, path));
    CK_FAILS(
        dt_load_full(dst, path), DT_ERR_INVALID_ARG,
        "parameter 'layers.0.feed_forward.w1.weight' is f32 [256, 64] in the model, F32 [128, 64]");
    ck_assert_params(dst, snap, n, "after a shape mismatch");
    /* a hostile file: the reader's error, model untouched */
    ck_write_all(path, "\x10\0\0\0\0\0\0\0{\"a\":1}", 15);
    CK_FAILS(dt_load_full(dst, path), DT_ERR_FORMAT, "runs past the end");
    ck_assert_params(dst, snap, n, "after a malformed file");
    snprintf(path, sizeof(path), "%s/nope/x.safetensors", dir);
    CK_FAILS(dt_save_full(src, path), DT_ERR_SYSTEM, "cannot create");
    ck_release_all(snap, n);
    dt_module_destroy(small);
    dt_module_destroy(src);
    dt_module_destroy(dst);
    ck_rmdir(dir);
}

/* ------------------------------------------------------------ PyTorch golden */

#define B 2
#define T 16

static uint64_t fnv1a64(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

static double gpt_loss(dt_module *m, const int64_t *x, const int64_t *y)
{
    int64_t s[2] = {B, T};
    dt_tensor *xt = NULL, *yt = NULL, *logits = NULL, *loss = NULL;
    CK_OK(dt_tensor_from_buffer(2, s, DT_DTYPE_I64, x, &xt));
    CK_OK(dt_tensor_from_buffer(2, s, DT_DTYPE_I64, y, &yt));
    CK_OK(dt_module_call(m, xt, &logits));
    CK_OK(dt_nn_cross_entropy(logits, yt, &loss));
    double v = 0;
    CK_OK(dt_tensor_item(loss, &v));
    dt_tensor_release(loss);
    dt_tensor_release(logits);
    dt_tensor_release(yt);
    dt_tensor_release(xt);
    return v;
}

static void test_torch_golden(void **state)
{
    (void)state;
    const uint64_t seed = 1234;
    dt_module *m = ck_gpt("tiny", seed);
    const dt_gpt_config *cfg = dt_gpt_get_config(m);
    int64_t x[B * T], y[B * T];
    for (int i = 0; i < B * T; i++) {
        x[i] = (i * 7 + 3) % cfg->vocab_size;
        y[i] = (i * 11 + 5) % cfg->vocab_size;
    }
    double loss = gpt_loss(m, x, y);
    CK_OK(dt_save_full(m, "gpt_tiny.safetensors"));
    /* what torch_check.py check . needs: config, tokens, our loss */
    cJSON *j = cJSON_CreateObject(), *c = cJSON_AddObjectToObject(j, "config");
    cJSON_AddNumberToObject(c, "vocab_size", (double)cfg->vocab_size);
    cJSON_AddNumberToObject(c, "max_seq_len", (double)cfg->max_seq_len);
    cJSON_AddNumberToObject(c, "dim", (double)cfg->dim);
    cJSON_AddNumberToObject(c, "n_layers", (double)cfg->n_layers);
    cJSON_AddNumberToObject(c, "n_heads", (double)cfg->n_heads);
    cJSON_AddNumberToObject(c, "ffn_dim", (double)cfg->ffn_dim);
    cJSON_AddNumberToObject(j, "seed", (double)seed);
    cJSON *xs = cJSON_AddArrayToObject(j, "x"), *ys = cJSON_AddArrayToObject(j, "y");
    for (int b = 0; b < B; b++) {
        cJSON *xr = cJSON_CreateArray(), *yr = cJSON_CreateArray();
        for (int t = 0; t < T; t++) {
            cJSON_AddItemToArray(xr, cJSON_CreateNumber((double)x[b * T + t]));
            cJSON_AddItemToArray(yr, cJSON_CreateNumber((double)y[b * T + t]));
        }
        cJSON_AddItemToArray(xs, xr);
        cJSON_AddItemToArray(ys, yr);
    }
    cJSON_AddNumberToObject(j, "loss", loss);
    char *text = cJSON_Print(j);
    ck_write_all("gpt_tiny.loss.json", text, strlen(text));
    free(text);
    cJSON_Delete(j);

    /* the committed golden: PyTorch's loss on exactly these weights */
    size_t len = 0, glen = 0;
    unsigned char *w = ck_read_all("gpt_tiny.safetensors", &len);
    char hash[32];
    snprintf(hash, sizeof(hash), "%016llx", (unsigned long long)fnv1a64(w, len));
    free(w);
    char *gtext = (char *)ck_read_all(CK_GOLDEN_DIR "/gpt_tiny_torch.json", &glen);
    gtext[glen] = '\0';
    cJSON *g = cJSON_Parse(gtext);
    assert_non_null(g);
    const char *ghash = cJSON_GetObjectItem(g, "weights_fnv1a64")->valuestring;
    double tloss = cJSON_GetObjectItem(g, "torch_loss")->valuedouble;
    if (strcmp(ghash, hash) != 0)
        fail_msg("the weights file changed (fnv1a64 %s, golden %s): the GPT init or the writer "
                 "changed; rerun tests/checkpoint/torch_check.py check <build>/tests/checkpoint",
                 hash, ghash);
    double rel = fabs(loss - tloss) / fabs(tloss);
    printf("dtensor loss %.8f, PyTorch loss %.8f on the same file: relative difference %.3g\n",
           loss, tloss, rel);
    assert_true(rel < 1e-5);
    cJSON_Delete(g);
    free(gtext);
    dt_module_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_torch_golden),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
