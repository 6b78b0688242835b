/* Vocabulary-parallel embedding, parallel cross entropy (no rank holds the
 * full logits), the replicate fallback, and autograd entry points on
 * distributed tensors. */
#include "do_util.h"

typedef struct emb_ctx {
    dt_tensor *ids;      /* local ids, the same on every rank */
    dt_tensor *ids_dist; /* or NULL: distributed ids for the distributed run */
    int64_t ignore;
} emb_ctx;

static dt_status op_embedding(dt_tensor *const *xs, bool dist, void *ctx, dt_tensor **out)
{
    emb_ctx *c = ctx;
    return dt_embedding(xs[0], dist && c->ids_dist != NULL ? c->ids_dist : c->ids, out);
}

/* A [10, 6] table placed @p pl looked up with @p ctx's ids: output @p out_pl. */
static void run_embedding(dt_mesh *m, emb_ctx *ctx, const char *name, dt_placement pl,
                          dt_placement out_pl, uint64_t seed)
{
    do_case c = {.name = name,
                 .n = 1,
                 .ndim = {2},
                 .shape = {{10, 6}},
                 .pl = {{pl}},
                 .op = op_embedding,
                 .ctx = ctx,
                 .n_out_pl = 1,
                 .out_pl = {out_pl}};
    do_run(m, &c, seed);
}

static void test_embedding(void **state)
{
    (void)state;
    dt_mesh *m = do_mesh1();
    int64_t is[2] = {3, 5};
    emb_ctx ctx = {.ids = do_ids(2, is, 10, 11)};
    /* vocabulary-parallel: 10 rows over 3 and 4 ranks is uneven */
    run_embedding(m, &ctx, "vocab-parallel embedding", S(0), P, 10000);
    /* dim-sharded table */
    run_embedding(m, &ctx, "dim-sharded embedding", S(1), S(2), 10001);
    /* replicated table, ids sharded on the batch: rows pass through */
    dt_placement s0 = dt_shard(0);
    DO_OK(dt_distribute(ctx.ids, m, 1, &s0, &ctx.ids_dist));
    run_embedding(m, &ctx, "batch-sharded ids", R, S(0), 10002);
    /* vocabulary-parallel with sharded ids: ids gathered */
    run_embedding(m, &ctx, "vocab-parallel, sharded ids", S(0), P, 10003);
    dt_tensor_release(ctx.ids_dist);
    /* an id outside the whole vocabulary is an error on every rank, not a zero row */
    int64_t wsz[2] = {10, 6};
    dt_tensor *fw = do_randn(2, wsz, 10010), *dw = NULL, *y = NULL;
    DO_OK(dt_distribute(fw, m, 1, &s0, &dw));
    do_set_int(ctx.ids, 3, 10);
    assert_int_equal(dt_embedding(dw, ctx.ids, &y), DT_ERR_INVALID_ARG);
    assert_null(y);
    dt_tensor_release(dw);
    dt_tensor_release(fw);
    dt_tensor_release(ctx.ids);
    dt_mesh_release(m);
}

static dt_status op_ce(dt_tensor *const *xs, bool dist, void *ctx, dt_tensor **out)
{
    emb_ctx *c = ctx;
    return dt_cross_entropy(xs[0], dist && c->ids_dist != NULL ? c->ids_dist : c->ids, c->ignore,
                            out);
}

static void test_parallel_cross_entropy(void **state)
{
    (void)state;
    dt_mesh *m = do_mesh1();
    int64_t ts[1] = {6}, ts2[2] = {2, 3};
    emb_ctx ctx = {.ids = do_ids(1, ts, 11, 21), .ignore = -100};
    do_set_int(ctx.ids, 4, -100); /* one ignored row */
    /* classes sharded: Replicate loss; rows sharded: Partial (global mean) */
    const dt_placement pl[][2] = {{S(1), R}, {S(0), P}, {P, R}, {R, R}};
    for (int i = 0; i < 4; i++) {
        do_case c = {.name = "cross entropy",
                     .n = 1,
                     .ndim = {2},
                     .shape = {{6, 11}},
                     .op = op_ce,
                     .ctx = &ctx,
                     .n_out_pl = 1};
        c.pl[0][0] = pl[i][0], c.out_pl[0] = pl[i][1];
        do_run(m, &c, 11000 + (uint64_t)i);
    }
    dt_tensor_release(ctx.ids);
    /* [B, T, V] logits sharded on the vocabulary, targets [B, T] distributed Replicate */
    ctx.ids = do_ids(2, ts2, 11, 22);
    dt_placement r = dt_replicate();
    DO_OK(dt_distribute(ctx.ids, m, 1, &r, &ctx.ids_dist));
    do_case c = {.name = "cross entropy 3-d",
                 .n = 1,
                 .ndim = {3},
                 .shape = {{2, 3, 11}},
                 .pl = {{S(2)}},
                 .op = op_ce,
                 .ctx = &ctx,
                 .n_out_pl = 1,
                 .out_pl = {R}};
    do_run(m, &c, 11010);
    /* rows sharded with local targets (sliced to match); 2 rows over up to 4 ranks:
     * empty shards count nothing */
    dt_tensor_release(ctx.ids_dist);
    ctx.ids_dist = NULL;
    do_case c2 = {.name = "cross entropy row shards",
                  .n = 1,
                  .ndim = {3},
                  .shape = {{2, 3, 11}},
                  .pl = {{S(0)}},
                  .op = op_ce,
                  .ctx = &ctx,
                  .n_out_pl = 1,
                  .out_pl = {P}};
    do_run(m, &c2, 11011);
    if (do_world() == 4) { /* dp x tp: rows over dp, classes over tp */
        dt_mesh *m2 = NULL;
        int shape[2] = {2, 2};
        DO_OK(dt_mesh_create(mr_rt, 2, shape, NULL, &m2));
        do_case c3 = {.name = "cross entropy dp x tp",
                      .n = 1,
                      .ndim = {3},
                      .shape = {{2, 3, 11}},
                      .pl = {{S(0), S(2)}},
                      .op = op_ce,
                      .ctx = &ctx,
                      .n_out_pl = 2,
                      .out_pl = {P, R}};
        do_run(m2, &c3, 11012);
        dt_mesh_release(m2);
    }
    /* a bad target seen by one rank only: every rank fails, none hangs */
    int64_t lsz[2] = {6, 11};
    dt_tensor *fl = do_randn(2, lsz, 11020), *dl = NULL, *bad = do_ids(1, ts, 11, 23), *y = NULL;
    do_set_int(bad, 5, 11);
    dt_placement rows = dt_shard(0);
    DO_OK(dt_distribute(fl, m, 1, &rows, &dl));
    assert_int_equal(dt_cross_entropy(dl, bad, -100, &y), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "outside [0, 11)"));
    assert_null(y);
    dt_tensor_release(dl);
    dt_tensor_release(fl);
    dt_tensor_release(bad);
    dt_tensor_release(ctx.ids);
    dt_mesh_release(m);
}

/* Shard(-1) logits: two all-reduces of per-row numbers, no gather, and the
 * activation bytes allocated on a rank stay far below the full logits. */
static void test_parallel_cross_entropy_memory(void **state)
{
    (void)state;
    if (do_world() < 2)
        skip();
    dt_mesh *m = do_mesh1();
    int64_t ls[2] = {64, 4096}, ts[1] = {64};
    int64_t full_bytes = ls[0] * ls[1] * 4;
    dt_tensor *full = do_randn(2, ls, 12000), *x = NULL, *loss = NULL;
    dt_tensor *tg = do_ids(1, ts, ls[1], 12001);
    dt_placement sh = dt_shard(-1);
    DO_OK(dt_distribute(full, m, 1, &sh, &x));
    dt_tensor_release(full);
    DO_OK(dt_tensor_set_requires_grad(x, true));
    dt_memory_stats before, after;
    dt_coll_stats st;
    DO_OK(dt_memory_stats_get(dt_runtime_device(mr_rt), &before));
    dt_memory_reset_peak(dt_runtime_device(mr_rt));
    dt_mesh_coll_stats_reset(m);
    DO_OK(dt_cross_entropy(x, tg, -100, &loss));
    dt_mesh_coll_stats(m, &st);
    assert_int_equal(st.count[DT_COLL_ALLREDUCE], 2);
    assert_int_equal(st.count[DT_COLL_ALLGATHER], 0);
    assert_true(dt_placement_equal(dt_tensor_placements(loss)[0], dt_replicate()));
    DO_OK(dt_backward(loss, NULL));
    DO_OK(dt_memory_stats_get(dt_runtime_device(mr_rt), &after));
    int64_t grown = after.peak[DT_MEM_ACTIVATION] - before.current[DT_MEM_ACTIVATION];
    int64_t local_bytes = dt_tensor_numel(dt_to_local(x)) * 4;
    print_message("parallel CE: activation peak grew %lld bytes (local logits %lld, full %lld)\n",
                  (long long)grown, (long long)local_bytes, (long long)full_bytes);
    /* the local gradient shard is the biggest thing allocated (plus bounded
     * scratch of the row blocks): one shard; gathering would need the full */
    assert_true(grown <= local_bytes + 160 * 1024);
    assert_true(grown < full_bytes * 3 / 4);
    assert_non_null(dt_tensor_grad(x));
    assert_int_equal(dt_tensor_numel(dt_tensor_grad(x)), dt_tensor_numel(dt_to_local(x)));
    dt_tensor_release(loss);
    dt_tensor_release(x);
    dt_tensor_release(tg);
    dt_mesh_release(m);
}

/* masked_fill has no sharding rule: the fallback replicates its inputs. */
typedef struct mf_ctx {
    dt_tensor *mask;
} mf_ctx;

static dt_status op_masked_fill(dt_tensor *const *xs, bool dist, void *ctx, dt_tensor **out)
{
    (void)dist;
    return dt_masked_fill(xs[0], ((mf_ctx *)ctx)->mask, -3.0, out);
}

static void test_fallback(void **state)
{
    (void)state;
    dt_mesh *m = do_mesh1();
    int64_t s[2] = {5, 7};
    mf_ctx ctx;
    DO_OK(dt_tensor_zeros(2, s, DT_DTYPE_U8, dt_runtime_device(mr_rt), &ctx.mask));
    for (int i = 0; i < 35; i += 3)
        do_set_int(ctx.mask, i, 1);
    const dt_placement pl[] = {S(0), S(1), P, R};
    for (int i = 0; i < 4; i++) {
        do_case c = {.name = "masked_fill fallback",
                     .n = 1,
                     .ndim = {2},
                     .shape = {{5, 7}},
                     .op = op_masked_fill,
                     .ctx = &ctx,
                     .n_out_pl = 1,
                     .out_pl = {R}};
        c.pl[0][0] = pl[i];
        do_run(m, &c, 13000 + (uint64_t)i);
    }
    dt_tensor_release(ctx.mask);
    dt_mesh_release(m);
}

/* requires_grad, grad, set_grad and detach act on the shard; a distributed
 * scalar root seeds 1; inputs on different meshes are refused by name. */
static void test_autograd_entry_points(void **state)
{
    (void)state;
    dt_mesh *m = do_mesh1(), *m2 = NULL;
    int64_t s[2] = {4, 6};
    dt_tensor *full = do_randn(2, s, 14000), *x = NULL, *d = NULL, *y = NULL, *l = NULL;
    dt_placement sh = dt_shard(1);
    DO_OK(dt_distribute(full, m, 1, &sh, &x));
    assert_false(dt_tensor_requires_grad(x));
    DO_OK(dt_tensor_set_requires_grad(x, true));
    assert_true(dt_tensor_requires_grad(x));
    assert_true(dt_tensor_requires_grad(dt_to_local(x)));
    DO_OK(dt_tensor_detach(x, &d));
    assert_non_null(dt_tensor_spec(d));
    assert_true(dt_spec_equal(dt_tensor_spec(d), dt_tensor_spec(x)));
    assert_false(dt_tensor_requires_grad(d));
    DO_OK(dt_scale(x, 2.0, &y));
    DO_OK(dt_sum_all(y, &l)); /* Partial scalar root */
    assert_int_equal(dt_tensor_placements(l)[0].kind, DT_PLACEMENT_PARTIAL);
    DO_OK(dt_backward(l, NULL));
    dt_tensor *g = dt_tensor_grad(x);
    assert_non_null(g);
    for (int64_t i = 0; i < dt_tensor_numel(g); i++)
        assert_float_equal(dt_tensor_item_at(g, i), 2.0f, 0.0f);
    DO_OK(dt_tensor_set_grad(x, NULL));
    assert_null(dt_tensor_grad(x));
    /* a non-scalar distributed root needs a gradient */
    dt_tensor_release(y);
    DO_OK(dt_scale(x, 2.0, &y));
    assert_int_equal(dt_backward(y, NULL), DT_ERR_INVALID_ARG);
    /* different meshes */
    int shape2[2] = {1, do_world()};
    dt_placement pl2[2] = {dt_replicate(), dt_shard(1)};
    dt_tensor *x2 = NULL, *z = NULL;
    DO_OK(dt_mesh_create(mr_rt, 2, shape2, NULL, &m2));
    DO_OK(dt_distribute(full, m2, 2, pl2, &x2));
    assert_int_equal(dt_add(x, x2, &z), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "different mesh"));
    assert_null(z);
    dt_tensor_release(x2);
    dt_mesh_release(m2);
    dt_tensor_release(l);
    dt_tensor_release(y);
    dt_tensor_release(d);
    dt_tensor_release(x);
    dt_tensor_release(full);
    dt_mesh_release(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_parallel_cross_entropy),
        cmocka_unit_test(test_parallel_cross_entropy_memory),
        cmocka_unit_test(test_fallback),
        cmocka_unit_test(test_autograd_entry_points),
    };
    return cmocka_run_group_tests(tests, mr_setup, mr_teardown);
}
