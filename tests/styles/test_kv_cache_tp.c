/*
 * Incremental decoding under tensor parallelism (the spec's plan): on 2, 3
 * and 4 ranks a parallelized GPT fed a prompt and then one token at a time
 * through dt_gpt_forward_cached gives the logits of the single-rank model's
 * full forward (gathered, within 1e-4), and each rank's KV cache holds 1/tp
 * of the single-rank cache's bytes (its own heads).
 */
#include "common/multirank.h"

enum { B = 2, T = 10, P = 4 };

static dt_gpt_config config(void)
{
    dt_gpt_config cfg;
    MR_OK(dt_gpt_config_preset("tiny", &cfg));
    cfg.dim = 48, cfg.n_heads = 12, cfg.max_seq_len = 16; /* 12 heads: 2, 3 and 4 ranks */
    return cfg;
}

static dt_tensor *ids_at(const int64_t *all, int64_t first, int64_t t)
{
    int64_t buf[B * T], shape[2] = {B, t};
    for (int b = 0; b < B; b++)
        for (int64_t i = 0; i < t; i++)
            buf[b * t + i] = all[b * T + first + i];
    dt_tensor *x = NULL;
    MR_OK(dt_tensor_from_buffer(2, shape, DT_DTYPE_I64, buf, &x));
    return mr_on_device(x);
}

/* Cached logits of positions [first, first+t) (gathered) against @p full's. */
static void expect_close(dt_tensor *logits, const float *full, int64_t first)
{
    dt_tensor *g = mr_full(logits), *h = mr_host(g);
    int64_t t = dt_tensor_dim(h, 1), v = dt_tensor_dim(h, 2);
    const float *a = dt_tensor_data(h);
    for (int b = 0; b < B; b++)
        for (int64_t i = 0; i < t * v; i++)
            if (fabsf(a[b * t * v + i] - full[(b * T + first) * v + i]) > 1e-4f)
                fail_msg("row %d position %lld: cached %g, single-rank %g", b,
                         (long long)(first + i / v), (double)a[b * t * v + i],
                         (double)full[(b * T + first) * v + i]);
    dt_tensor_release(h);
    dt_tensor_release(g);
}

/* Prompt, then one token at a time; returns the cache's bytes. */
static int64_t decode(dt_module *gpt, const int64_t *all, const float *full)
{
    dt_kv_cache *c = NULL;
    MR_OK(dt_kv_cache_create(gpt, B, T, &c));
    for (int64_t first = 0; first < T; first += first == 0 ? P : 1) {
        dt_tensor *x = ids_at(all, first, first == 0 ? P : 1), *y = NULL;
        MR_OK(dt_gpt_forward_cached(gpt, c, x, &y));
        expect_close(y, full, first);
        dt_tensor_release(y);
        dt_tensor_release(x);
    }
    int64_t n = dt_kv_cache_nbytes(c);
    dt_kv_cache_destroy(c);
    return n;
}

static void test_cached_tp_equals_single_rank(void **state)
{
    (void)state;
    dt_gpt_config cfg = config();
    int64_t all[B * T];
    for (int i = 0; i < B * T; i++)
        all[i] = (i * 53 + 7) % cfg.vocab_size;
    dt_module *ref = NULL, *gpt = NULL;
    mr_gpt_create(&cfg, 11, &ref);
    dt_tensor *x = ids_at(all, 0, T), *y = NULL;
    MR_OK(dt_module_call(ref, x, &y));
    dt_tensor *full = mr_host(y);
    int64_t one = decode(ref, all, dt_tensor_data(full));

    mr_gpt_create(&cfg, 11, &gpt);
    dt_mesh *mesh = mr_world_mesh("tp");
    dt_plan *plan = NULL;
    MR_OK(dt_plan_gpt_default(false, &plan));
    MR_OK(dt_parallelize_module(gpt, mesh, plan, "tp"));
    int64_t mine = decode(gpt, all, dt_tensor_data(full));
    int w = dt_runtime_size(mr_rt);
    if (mine * w != one)
        fail_msg("a tp=%d rank's cache holds %lld bytes, the single-rank one %lld", w,
                 (long long)mine, (long long)one);
    dt_plan_destroy(plan);
    dt_mesh_release(mesh);
    dt_tensor_release(full);
    dt_tensor_release(y);
    dt_tensor_release(x);
    dt_module_destroy(gpt);
    dt_module_destroy(ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cached_tp_equals_single_rank),
    };
    return cmocka_run_group_tests(tests, mr_setup, mr_teardown);
}
