/*
 * The GPT's modules on distributed parameters, over real dtrun ranks, with no
 * parallel style: the default tensor-parallel plan of the spec applied by
 * hand (dt_distribute + dt_module_param_set), ids passed as a Replicate
 * distributed tensor. The modules run unchanged (attention on its local heads
 * through the sharding rules of the ops) and the full logits and loss equal
 * the single-rank model's. Uneven shards on 3 ranks: vocab 64 -> 22, 22, 20,
 * ffn 80 -> 27, 27, 26; 12 heads split 6/4/3 per rank on 2/3/4 ranks.
 */
#include "common/multirank.h"
#include "nn_test_util.h"

static void shard(dt_module *root, dt_mesh *mesh, const char *fqn, const char *name,
                  dt_placement pl)
{
    dt_module *m = NULL;
    dt_tensor *d = NULL;
    NN_OK(dt_module_find(root, fqn, &m));
    NN_OK(dt_distribute(dt_module_param(m, name), mesh, 1, &pl, &d));
    NN_OK(dt_module_param_set(m, name, d));
    dt_tensor_release(d);
}

/* The spec's default plan (no sequence parallel), by hand. */
static void apply_default_plan(dt_module *gpt, dt_mesh *mesh, int64_t n_layers)
{
    char f[64];
    shard(gpt, mesh, "tok_embeddings", "weight", dt_shard(0)); /* rowwise: vocabulary */
    for (int64_t l = 0; l < n_layers; l++) {
        static const char *const col[3] = {"wq", "wk", "wv"};
        for (int i = 0; i < 3; i++) { /* colwise */
            snprintf(f, sizeof(f), "layers.%lld.attention.%s", (long long)l, col[i]);
            shard(gpt, mesh, f, "weight", dt_shard(0));
            shard(gpt, mesh, f, "bias", dt_shard(0));
        }
        snprintf(f, sizeof(f), "layers.%lld.attention.wo", (long long)l); /* rowwise */
        shard(gpt, mesh, f, "weight", dt_shard(1));
        shard(gpt, mesh, f, "bias", dt_replicate());
        snprintf(f, sizeof(f), "layers.%lld.feed_forward.w1", (long long)l);
        shard(gpt, mesh, f, "weight", dt_shard(0));
        shard(gpt, mesh, f, "bias", dt_shard(0));
        snprintf(f, sizeof(f), "layers.%lld.feed_forward.w2", (long long)l);
        shard(gpt, mesh, f, "weight", dt_shard(1));
        shard(gpt, mesh, f, "bias", dt_replicate());
    }
    shard(gpt, mesh, "output", "weight", dt_shard(0)); /* colwise: logits stay Shard(-1) */
}

static void test_sharded_gpt_forward(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt);
    dt_mesh *mesh = NULL;
    NN_OK(dt_mesh_create(mr_rt, 1, &w, NULL, &mesh));
    dt_gpt_config cfg = {.vocab_size = 64,
                         .max_seq_len = 16,
                         .dim = 48,
                         .n_layers = 2,
                         .n_heads = 12,
                         .ffn_dim = 80};
    dt_module *ref = NULL, *tp = NULL;
    NN_OK(dt_gpt_create(&cfg, 7, &ref));
    NN_OK(dt_gpt_create(&cfg, 7, &tp));
    apply_default_plan(tp, mesh, cfg.n_layers);
    /* the global sizes are unchanged (dt_module_param_numel counts global elements) */
    assert_true(dt_module_param_numel(tp) == dt_module_param_numel(ref));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    NN_OK(dt_module_print(tp, f));
    fclose(f);
    char line[160];
    int64_t rows = 0; /* this rank's rows of the 80-row w1 (torch.chunk) */
    dt_shard_chunk(80, w, dt_mesh_rank(mesh), &rows, NULL);
    snprintf(line, sizeof(line),
             "weight [80, 48] f32  S(0) [80, 48] f32 on mesh %d, local [%lld, 48]", w,
             (long long)rows);
    if (strstr(text, line) == NULL)
        fail_msg("'%s' not in:\n%s", line, text);
    free(text);

    int64_t shape[2] = {2, 16}, ids[32], tg[32];
    for (int i = 0; i < 32; i++) {
        ids[i] = (i * 7) % 64;
        tg[i] = (i * 5 + 1) % 64;
    }
    dt_tensor *x = nn_ids(2, shape, ids), *y = nn_ids(2, shape, tg), *xd = NULL, *yd = NULL;
    dt_placement r = dt_replicate();
    NN_OK(dt_distribute(x, mesh, 1, &r, &xd));
    NN_OK(dt_distribute(y, mesh, 1, &r, &yd));

    dt_tensor *lg = NULL, *loss = NULL, *lgd = NULL, *lossd = NULL, *full = NULL, *lf = NULL;
    NN_OK(dt_module_call(ref, x, &lg));
    NN_OK(dt_nn_cross_entropy(lg, y, &loss));
    NN_OK(dt_module_call(tp, xd, &lgd));
    assert_true(dt_tensor_is_distributed(lgd));
    /* no rank holds the full logits: they stay vocabulary-sharded */
    assert_true(dt_placement_equal(dt_tensor_placements(lgd)[0], dt_shard(2)));
    NN_OK(dt_nn_cross_entropy(lgd, yd, &lossd));
    NN_OK(dt_full_tensor(lgd, &full));
    double *want = nn_vals(lg);
    nn_expect_close("sharded GPT logits", want, full, 1e-5, 1e-5);
    NN_OK(dt_full_tensor(lossd, &lf));
    double l = 0.0;
    NN_OK(dt_tensor_item(loss, &l));
    nn_expect_close("sharded GPT loss", &l, lf, 1e-5, 0.0);

    free(want);
    dt_tensor_release(lf);
    dt_tensor_release(full);
    dt_tensor_release(lossd);
    dt_tensor_release(lgd);
    dt_tensor_release(loss);
    dt_tensor_release(lg);
    dt_tensor_release(xd);
    dt_tensor_release(yd);
    dt_tensor_release(x);
    dt_tensor_release(y);
    dt_module_destroy(ref);
    dt_module_destroy(tp);
    dt_mesh_release(mesh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sharded_gpt_forward),
    };
    return cmocka_run_group_tests(tests, mr_setup, mr_teardown);
}
