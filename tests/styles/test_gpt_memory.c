/*
 * Memory of tensor parallelism on 4 ranks: parameter bytes per rank of the
 * sharded layers are a quarter of the single-rank run (+ at most one chunk
 * row per parameter), the full parameters are freed, and no rank ever holds
 * the full logits: the output layer hands on vocabulary shards and the
 * peak activation bytes of a whole training step stay below the size of the
 * full logits (which the single-rank step, measured the same way, exceeds).
 */
#include "st_util.h"

#define BATCH 4
#define SEQ   16
#define VOCAB 4096

static dt_gpt_config config(void)
{
    dt_gpt_config c;
    ST_OK(dt_gpt_config_preset("tiny", &c));
    c.vocab_size = VOCAB; /* the logits dominate every other activation */
    c.max_seq_len = SEQ;
    return c;
}

/* Peak bytes (activation + gradient categories) of one forward/backward. */
static int64_t step_peak(dt_module *m, dt_token_data *data)
{
    dt_tensor *x = NULL, *y = NULL, *logits = NULL, *loss = NULL;
    ST_OK(dt_token_data_batch(data, 0, BATCH, SEQ, 0, BATCH, &x, &y));
    dt_memory_stats st;
    ST_OK(dt_memory_stats_get(dt_device_cpu(), &st));
    int64_t base = st.current[DT_MEM_ACTIVATION];
    dt_memory_reset_peak(dt_device_cpu());
    ST_OK(dt_module_call(m, x, &logits));
    ST_OK(dt_nn_cross_entropy(logits, y, &loss));
    dt_tensor_release(logits);
    ST_OK(dt_backward(loss, NULL));
    dt_tensor_release(loss);
    ST_OK(dt_memory_stats_get(dt_device_cpu(), &st));
    dt_tensor_release(x);
    dt_tensor_release(y);
    return st.peak[DT_MEM_ACTIVATION] - base;
}

/* Records the local shape of the logits the output layer hands on. */
static int64_t seen_local_vocab = -1;
static dt_status record_logits(dt_module *m, dt_tensor **out, void *user)
{
    (void)m, (void)user;
    dt_tensor *l = dt_tensor_is_distributed(*out) ? dt_to_local(*out) : *out;
    seen_local_vocab = dt_tensor_dim(l, -1);
    return DT_OK;
}

typedef struct shard_bytes {
    int64_t local, full, chunk_rows;
} shard_bytes;

static dt_status sum_sharded(const char *fqn, dt_module *o, const char *n, dt_tensor *p, void *u)
{
    (void)fqn, (void)o, (void)n;
    shard_bytes *b = u;
    if (!dt_tensor_is_distributed(p) || dt_tensor_placements(p)[0].kind != DT_PLACEMENT_SHARD)
        return DT_OK;
    int d = dt_tensor_placements(p)[0].dim;
    int64_t row = (int64_t)dt_tensor_nbytes(p) / dt_tensor_dim(p, d); /* bytes of one index */
    b->local += (int64_t)dt_tensor_nbytes(dt_to_local(p));
    b->full += (int64_t)dt_tensor_nbytes(p);
    b->chunk_rows +=
        row * dt_shard_padded_size(dt_tensor_dim(p, d), 4) - row * dt_tensor_dim(p, d) / 4;
    return DT_OK;
}

static void test_memory_tp4(void **state)
{
    (void)state;
    if (dt_runtime_size(mr_rt) != 4)
        skip();
    dt_gpt_config cfg = config();
    dt_token_data *data = st_tokens(4096, 50);
    int64_t logits_bytes = (int64_t)BATCH * SEQ * VOCAB * 4;

    /* the single-rank step holds the full logits (the yardstick can fail) */
    dt_module *ref = NULL;
    ST_OK(dt_gpt_create(&cfg, 5, &ref));
    int64_t ref_params = dt_module_param_bytes_local(ref);
    int64_t ref_peak = step_peak(ref, data);
    assert_true(ref_peak >= logits_bytes);
    dt_module_destroy(ref);

    dt_memory_stats st0, st1;
    ST_OK(dt_memory_stats_get(dt_device_cpu(), &st0));
    dt_module *m = NULL;
    int w = 4;
    const char *names[1] = {"tp"};
    dt_mesh *mesh = NULL;
    dt_plan *plan = NULL;
    ST_OK(dt_mesh_create(mr_rt, 1, &w, names, &mesh));
    ST_OK(dt_gpt_create(&cfg, 5, &m));
    ST_OK(dt_plan_gpt_default(false, &plan));
    ST_OK(dt_parallelize_module(m, mesh, plan, "tp"));
    ST_OK(dt_module_add_post_hook(dt_module_child(m, "output"), record_logits, NULL, NULL));

    /* the sharded layers: a quarter each (+ the padding of one chunk) */
    shard_bytes b = {0};
    ST_OK(dt_module_foreach_param(m, sum_sharded, &b));
    print_message("params: single rank %lld bytes; this rank %lld; sharded layers %lld of %lld\n",
                  (long long)ref_params, (long long)dt_module_param_bytes_local(m),
                  (long long)b.local, (long long)b.full);
    assert_true(b.full > ref_params / 2);
    assert_true(b.local <= b.full / 4 + b.chunk_rows);
    assert_true(b.local >= b.full / 4 - b.chunk_rows - 1);
    /* the full parameters were freed: what the parameter category holds is the shards */
    ST_OK(dt_memory_stats_get(dt_device_cpu(), &st1));
    assert_int_equal(st1.current[DT_MEM_PARAMETER] - st0.current[DT_MEM_PARAMETER],
                     dt_module_param_bytes_local(m));

    int64_t peak = step_peak(m, data);
    print_message("peak activation bytes of a step: single rank %lld, tp=4 %lld; full logits "
                  "%lld\n",
                  (long long)ref_peak, (long long)peak, (long long)logits_bytes);
    assert_int_equal(seen_local_vocab, VOCAB / 4);
    assert_true(peak < logits_bytes);

    dt_plan_destroy(plan);
    dt_mesh_release(mesh);
    dt_module_destroy(m);
    dt_token_data_close(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_tp4),
    };
    return cmocka_run_group_tests(tests, mr_setup, mr_teardown);
}
