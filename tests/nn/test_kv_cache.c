/*
 * Incremental decoding: dt_gpt_forward_cached over a prompt and then one
 * token at a time gives the logits of the full forward on the whole
 * sequence (within 1e-5), for a batch of two; the cache can be reset and
 * reused; bad calls fail naming the value; the training forward is
 * unchanged by a cache's existence.
 */
#include "nn_test_util.h"

enum { B = 2, T = 12, P = 5 };

static dt_module *tiny_gpt(void)
{
    dt_gpt_config cfg;
    NN_OK(dt_gpt_config_preset("tiny", &cfg));
    cfg.max_seq_len = 16;
    dt_module *gpt = NULL;
    NN_OK(dt_gpt_create(&cfg, 7, &gpt));
    return gpt;
}

static dt_tensor *ids_tensor(int64_t t, int64_t first, const int64_t *all)
{
    int64_t buf[B * T], shape[2] = {B, t};
    for (int b = 0; b < B; b++)
        for (int64_t i = 0; i < t; i++)
            buf[b * t + i] = all[b * T + first + i];
    dt_tensor *x = NULL;
    NN_OK(dt_tensor_from_buffer(2, shape, DT_DTYPE_I64, buf, &x));
    return x;
}

/* Logits [B, t, V] of the cached step against positions [first, first+t) of @p full. */
static void expect_close(dt_tensor *step, dt_tensor *full, int64_t first)
{
    int64_t t = dt_tensor_dim(step, 1), v = dt_tensor_dim(step, 2);
    const float *a = dt_tensor_data(step), *f = dt_tensor_data(full);
    for (int b = 0; b < B; b++)
        for (int64_t i = 0; i < t; i++)
            for (int64_t j = 0; j < v; j++) {
                float x = a[(b * t + i) * v + j], y = f[(b * T + first + i) * v + j];
                if (fabsf(x - y) > 1e-5f)
                    fail_msg("row %d position %lld logit %lld: cached %g, full %g", b,
                             (long long)(first + i), (long long)j, (double)x, (double)y);
            }
}

static void run_cached(dt_module *gpt, dt_kv_cache *c, const int64_t *all, dt_tensor *full)
{
    dt_tensor *x = ids_tensor(P, 0, all), *y = NULL;
    NN_OK(dt_gpt_forward_cached(gpt, c, x, &y));
    expect_close(y, full, 0);
    dt_tensor_release(x);
    dt_tensor_release(y);
    for (int64_t pos = P; pos < T; pos++) {
        x = ids_tensor(1, pos, all);
        NN_OK(dt_gpt_forward_cached(gpt, c, x, &y));
        assert_int_equal(dt_kv_cache_length(c), pos + 1);
        expect_close(y, full, pos);
        dt_tensor_release(x);
        dt_tensor_release(y);
    }
}

static void test_cached_equals_full(void **state)
{
    (void)state;
    dt_module *gpt = tiny_gpt();
    int64_t all[B * T];
    for (int i = 0; i < B * T; i++)
        all[i] = (i * 37 + 11) % 256;
    dt_tensor *x = ids_tensor(T, 0, all), *full = NULL, *again = NULL;
    NN_OK(dt_module_call(gpt, x, &full));
    dt_kv_cache *c = NULL;
    NN_OK(dt_kv_cache_create(gpt, B, 16, &c));
    assert_int_equal(dt_kv_cache_nbytes(c), 0); /* allocated at the first forward */
    run_cached(gpt, c, all, full);
    /* keys and values of 2 layers: [B, 4 heads, 16 positions, head_dim 16] f32 */
    assert_int_equal(dt_kv_cache_nbytes(c), 2 * 2 * B * 4 * 16 * 16 * 4);
    dt_kv_cache_reset(c);
    assert_int_equal(dt_kv_cache_length(c), 0);
    run_cached(gpt, c, all, full);         /* the reused cache overwrites the old positions */
    NN_OK(dt_module_call(gpt, x, &again)); /* the training forward is untouched */
    assert_true(dt_tensor_equal(full, again));
    assert_true(dt_tensor_requires_grad(again));
    dt_kv_cache_destroy(c);
    dt_tensor_release(again);
    dt_tensor_release(full);
    dt_tensor_release(x);
    dt_module_destroy(gpt);
}

static void test_bad_calls(void **state)
{
    (void)state;
    dt_module *gpt = tiny_gpt(), *other = tiny_gpt(), *lin = NULL;
    dt_kv_cache *c = NULL;
    NN_OK(dt_linear_create(4, 4, true, &lin));
    NN_FAILS(dt_kv_cache_create(lin, 1, 4, &c), DT_ERR_INVALID_ARG, "not a GPT");
    NN_FAILS(dt_kv_cache_create(gpt, 1, 17, &c), DT_ERR_INVALID_ARG, "max_len 17");
    NN_FAILS(dt_kv_cache_create(gpt, 0, 4, &c), DT_ERR_INVALID_ARG, "batch 0");
    NN_OK(dt_kv_cache_create(gpt, B, 4, &c));
    int64_t all[B * T] = {0};
    dt_tensor *x = ids_tensor(T, 0, all), *x3 = ids_tensor(3, 0, all), *y = NULL;
    NN_FAILS(dt_gpt_forward_cached(gpt, c, x, &y), DT_ERR_INVALID_ARG,
             "exceed the cache's max_len 4");
    NN_FAILS(dt_gpt_forward_cached(other, c, x3, &y), DT_ERR_INVALID_ARG, "another model");
    NN_OK(dt_gpt_forward_cached(gpt, c, x3, &y));
    dt_tensor_release(y);
    NN_FAILS(dt_gpt_forward_cached(gpt, c, x3, &y), DT_ERR_INVALID_ARG, "3 cached + 3 new");
    assert_int_equal(dt_kv_cache_length(c), 3);
    dt_kv_cache_destroy(c);
    dt_kv_cache_destroy(NULL);
    dt_tensor_release(x3);
    dt_tensor_release(x);
    dt_module_destroy(lin);
    dt_module_destroy(other);
    dt_module_destroy(gpt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cached_equals_full),
        cmocka_unit_test(test_bad_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
