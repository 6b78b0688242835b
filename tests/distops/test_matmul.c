/* matmul and linear rules: colwise, rowwise, batch shards, Partial
 * operands, mismatched placements, bias handling; and the Megatron MLP. */
#include "do_util.h"

typedef struct mm_ctx {
    bool ta, tb;
} mm_ctx;

static dt_status op_matmul(dt_tensor *const *xs, bool dist, void *ctx, dt_tensor **out)
{
    (void)dist;
    const mm_ctx *c = ctx;
    return dt_matmul(xs[0], xs[1], c->ta, c->tb, out);
}

static dt_status op_linear(dt_tensor *const *xs, bool dist, void *ctx, dt_tensor **out)
{
    (void)dist;
    return dt_linear(xs[0], xs[1], *(const bool *)ctx ? xs[2] : NULL, out);
}

static void test_matmul_rules(void **state)
{
    (void)state;
    dt_mesh *m = do_mesh1();
    const struct {
        int na, nb;
        int64_t sa[3], sb[3];
        bool ta, tb;
        dt_placement pa, pb, po;
    } cases[] = {
        {2, 2, {7, 6}, {6, 5}, false, false, S(0), R, S(0)}, /* rows of a */
        {2, 2, {7, 6}, {6, 5}, false, false, R, S(1), S(1)}, /* columns of b */
        {2, 2, {7, 6}, {6, 5}, false, false, S(1), S(0), P}, /* contraction */
        {2, 2, {7, 6}, {6, 5}, false, false, P, R, P},       /* Partial x R */
        {2, 2, {7, 6}, {6, 5}, false, false, R, P, P},
        {2, 2, {7, 6}, {6, 5}, false, false, S(0), S(1), S(0)}, /* b gathered */
        {2, 2, {7, 6}, {6, 5}, false, false, R, S(0), P},       /* a sliced on K */
        {2, 2, {6, 7}, {5, 6}, true, true, S(1), S(0), S(0)},   /* transposed views */
        {3, 2, {3, 7, 6}, {6, 5}, false, false, S(0), R, S(0)}, /* batch of a, b broadcast */
        {3, 3, {3, 7, 6}, {3, 6, 5}, false, false, S(0), S(0), S(0)},
        {3, 3, {3, 7, 6}, {3, 6, 5}, false, false, R, S(0), S(0)},   /* a follows b's batch */
        {3, 3, {4, 7, 6}, {4, 5, 6}, false, true, S(0), S(0), S(0)}, /* q @ k^T shape */
        {3, 3, {3, 7, 6}, {1, 6, 5}, false, false, S(0), R, S(0)},   /* b broadcasts batch */
    };
    for (int i = 0; i < (int)(sizeof(cases) / sizeof(cases[0])); i++) {
        mm_ctx ctx = {cases[i].ta, cases[i].tb};
        char name[48];
        snprintf(name, sizeof(name), "matmul case %d", i);
        do_case c = {.name = name,
                     .n = 2,
                     .ndim = {cases[i].na, cases[i].nb},
                     .op = op_matmul,
                     .ctx = &ctx,
                     .n_out_pl = 1};
        memcpy(c.shape[0], cases[i].sa, sizeof(cases[i].sa));
        memcpy(c.shape[1], cases[i].sb, sizeof(cases[i].sb));
        c.pl[0][0] = cases[i].pa, c.pl[1][0] = cases[i].pb, c.out_pl[0] = cases[i].po;
        do_run(m, &c, 1000 + (uint64_t)i);
    }
    dt_mesh_release(m);
}

static void test_linear_rules(void **state)
{
    (void)state;
    dt_mesh *m = do_mesh1();
    const struct {
        bool bias;
        dt_placement px, pw, pb, po;
    } cases[] = {
        {true, R, S(0), S(0), S(2)}, /* colwise, sharded bias */
        {true, R, S(0), R, S(2)},    /* colwise, Replicate bias sliced */
        {false, R, S(0), R, S(2)},
        {true, S(2), S(1), R, P}, /* rowwise: Replicate bias added once */
        {false, S(2), S(1), R, P},
        {true, S(0), R, R, S(0)}, /* batch shard */
        {true, S(1), R, R, S(1)},
        {true, P, R, R, P},             /* Partial input, bias once */
        {true, R, S(1), R, P},          /* x sliced to match */
        {true, S(2), R, R, P},          /* w sliced to match */
        {true, S(1), S(0), S(0), S(2)}, /* sequence shard into colwise: gathered */
        {true, P, S(1), R, P},          /* Partial reduce-scattered into rowwise */
        {true, R, P, R, R},             /* Partial weight reduced */
    };
    for (int i = 0; i < (int)(sizeof(cases) / sizeof(cases[0])); i++) {
        char name[48];
        snprintf(name, sizeof(name), "linear case %d", i);
        bool bias = cases[i].bias;
        do_case c = {.name = name,
                     .n = bias ? 3 : 2,
                     .ndim = {3, 2, 1},
                     .shape = {{2, 5, 9}, {7, 9}, {7}},
                     .op = op_linear,
                     .ctx = &bias,
                     .n_out_pl = 1};
        c.pl[0][0] = cases[i].px, c.pl[1][0] = cases[i].pw, c.pl[2][0] = cases[i].pb;
        c.out_pl[0] = cases[i].po;
        do_run(m, &c, 2000 + (uint64_t)i);
    }
    dt_mesh_release(m);
}

/* Megatron MLP: colwise w1 (+ sharded bias) -> gelu -> rowwise w2 (+ Replicate bias). */
typedef struct mlp_ctx {
    dt_mesh *mesh;
    int comms; /* collectives in the distributed forward */
} mlp_ctx;

static dt_status op_mlp(dt_tensor *const *xs, bool dist, void *ctx, dt_tensor **out)
{
    mlp_ctx *c = ctx;
    dt_tensor *h = NULL, *g = NULL, *y = NULL;
    dt_coll_stats st;
    dt_status s;
    if (dist)
        dt_mesh_coll_stats_reset(c->mesh);
    s = dt_linear(xs[0], xs[1], xs[2], &h);
    if (s == DT_OK)
        s = dt_gelu_tanh(h, &g);
    if (s == DT_OK)
        s = dt_linear(g, xs[3], xs[4], &y);
    if (s == DT_OK && dist) {
        dt_mesh_coll_stats(c->mesh, &st);
        c->comms = (int)dt_coll_stats_total(&st);
    }
    dt_tensor_release(h);
    dt_tensor_release(g);
    if (s == DT_OK)
        *out = y;
    return s;
}

static void test_megatron_mlp(void **state)
{
    (void)state;
    dt_mesh *m = do_mesh1();
    mlp_ctx ctx = {.mesh = m};
    /* ffn 10: uneven over 3 and 4 ranks */
    do_case c = {.name = "mlp",
                 .n = 5,
                 .ndim = {3, 2, 1, 2, 1},
                 .shape = {{2, 3, 8}, {10, 8}, {10}, {8, 10}, {8}},
                 .pl = {{R}, {S(0)}, {S(0)}, {S(1)}, {R}},
                 .op = op_mlp,
                 .ctx = &ctx,
                 .n_out_pl = 1,
                 .out_pl = {P}};
    do_run(m, &c, 3000);
    /* the forward of the block itself communicates nothing: the output stays Partial */
    assert_int_equal(ctx.comms, 0);
    dt_mesh_release(m);
}

/* The same block on a dp x tp = 2x2 mesh: batch sharded over dp, weights over
 * tp; the Replicate-over-dp weights get their gradients summed over dp (DDP). */
static void test_megatron_mlp_2d(void **state)
{
    (void)state;
    dt_mesh *m = do_mesh_2x2();
    mlp_ctx ctx = {.mesh = m};
    do_case c = {.name = "mlp dp x tp",
                 .n = 5,
                 .ndim = {3, 2, 1, 2, 1},
                 .shape = {{4, 3, 8}, {10, 8}, {10}, {8, 10}, {8}},
                 .pl = {{S(0), R}, {R, S(0)}, {R, S(0)}, {R, S(1)}, {R, R}},
                 .op = op_mlp,
                 .ctx = &ctx,
                 .n_out_pl = 2,
                 .out_pl = {S(0), P}};
    do_run(m, &c, 3100);
    assert_int_equal(ctx.comms, 0);
    dt_mesh_release(m);
}

/* A sequence-parallel block: LayerNorm on the sequence shard, the colwise
 * layer all-gathers, the rowwise output is reduce-scattered back to S(1),
 * the residual adds shards. Forward: one all-gather, one reduce-scatter. */
typedef struct sp_ctx {
    dt_mesh *mesh;
    int64_t gathers, scatters, total;
} sp_ctx;

static dt_status op_sp_block(dt_tensor *const *xs, bool dist, void *ctx, dt_tensor **out)
{
    sp_ctx *c = ctx;
    dt_tensor *h = NULL, *u = NULL, *g = NULL, *v = NULL, *vs = NULL;
    dt_placement s1 = dt_shard(1);
    dt_status s;
    if (dist)
        dt_mesh_coll_stats_reset(c->mesh);
    s = dt_layer_norm(xs[0], xs[1], xs[2], 1e-5, &h);
    if (s == DT_OK)
        s = dt_linear(h, xs[3], xs[4], &u);
    if (s == DT_OK)
        s = dt_gelu_tanh(u, &g);
    if (s == DT_OK)
        s = dt_linear(g, xs[5], NULL, &v);
    if (s == DT_OK && dist)
        s = dt_redistribute(v, 1, &s1, &vs);
    if (s == DT_OK)
        s = dt_add(xs[0], dist ? vs : v, out);
    if (s == DT_OK && dist) {
        dt_coll_stats st;
        dt_mesh_coll_stats(c->mesh, &st);
        c->gathers = st.count[DT_COLL_ALLGATHER];
        c->scatters = st.count[DT_COLL_REDUCE_SCATTER];
        c->total = dt_coll_stats_total(&st);
    }
    dt_tensor *all[] = {h, u, g, v, vs};
    for (int i = 0; i < 5; i++)
        dt_tensor_release(all[i]);
    return s;
}

static void test_sequence_parallel_block(void **state)
{
    (void)state;
    dt_mesh *m = do_mesh1();
    sp_ctx ctx = {.mesh = m};
    do_case c = {.name = "sequence parallel block",
                 .n = 6,
                 .ndim = {3, 1, 1, 2, 1, 2},
                 .shape = {{2, 7, 8}, {8}, {8}, {10, 8}, {10}, {8, 10}},
                 .pl = {{S(1)}, {R}, {R}, {S(0)}, {S(0)}, {S(1)}},
                 .op = op_sp_block,
                 .ctx = &ctx,
                 .n_out_pl = 1,
                 .out_pl = {S(1)}};
    do_run(m, &c, 3300);
    int w1 = do_world() > 1;
    assert_int_equal(ctx.gathers, w1);
    assert_int_equal(ctx.scatters, w1);
    assert_int_equal(ctx.total, 2 * w1);
    /* backward: the gathered input's gradient is reduce-scattered straight back
     * (no all-reduce + slice); the reduce-scatter's backward all-gathers; the
     * two Replicate parameters (LayerNorm weight and bias) are all-reduced
     * once each */
    dt_tensor *ins[6], *y = NULL, *l = NULL;
    for (int i = 0; i < 6; i++) {
        dt_tensor *f = do_randn(c.ndim[i], c.shape[i], 50 + (uint64_t)i);
        DO_OK(dt_distribute(f, m, 1, c.pl[i], &ins[i]));
        DO_OK(dt_tensor_set_requires_grad(ins[i], true));
        dt_tensor_release(f);
    }
    DO_OK(op_sp_block(ins, true, &ctx, &y));
    DO_OK(dt_sum_all(y, &l));
    dt_coll_stats st;
    dt_mesh_coll_stats_reset(m);
    DO_OK(dt_backward(l, NULL));
    dt_mesh_coll_stats(m, &st);
    assert_int_equal(st.count[DT_COLL_REDUCE_SCATTER], w1);
    assert_int_equal(st.count[DT_COLL_ALLGATHER], w1);
    assert_int_equal(st.count[DT_COLL_ALLREDUCE], 2 * w1);
    assert_int_equal(dt_coll_stats_total(&st), 4 * w1);
    for (int i = 0; i < 6; i++)
        dt_tensor_release(ins[i]);
    dt_tensor_release(y);
    dt_tensor_release(l);
    dt_mesh_release(m);
}

/* q, k, v = three colwise linears of one Replicate x: in backward, x's three
 * partial gradients are added without communicating and all-reduced once. */
static dt_status op_qkv(dt_tensor *const *xs, bool dist, void *ctx, dt_tensor **out)
{
    (void)dist, (void)ctx;
    dt_tensor *q = NULL, *k = NULL, *v = NULL, *qk = NULL;
    dt_status s = dt_linear(xs[0], xs[1], NULL, &q);
    if (s == DT_OK)
        s = dt_linear(xs[0], xs[2], NULL, &k);
    if (s == DT_OK)
        s = dt_linear(xs[0], xs[3], NULL, &v);
    if (s == DT_OK)
        s = dt_mul(q, k, &qk);
    if (s == DT_OK)
        s = dt_add(qk, v, out);
    dt_tensor_release(q);
    dt_tensor_release(k);
    dt_tensor_release(v);
    dt_tensor_release(qk);
    return s;
}

/* A non-leaf Replicate h used by a colwise linear (a pending Partial gradient)
 * and by a Replicate path (a local gradient): the engine adds the two (the
 * local one counted once over the ranks) before reducing. */
static dt_status op_mixed(dt_tensor *const *xs, bool dist, void *ctx, dt_tensor **out)
{
    (void)dist, (void)ctx;
    dt_tensor *h = NULL, *y = NULL, *sy = NULL, *g = NULL, *sg = NULL;
    dt_status s = dt_scale(xs[0], 1.5, &h);
    if (s == DT_OK)
        s = dt_linear(h, xs[1], NULL, &y);
    if (s == DT_OK)
        s = dt_sum(y, -1, false, &sy); /* [2, 3] Partial */
    if (s == DT_OK)
        s = dt_gelu_tanh(h, &g);
    if (s == DT_OK)
        s = dt_sum(g, -1, false, &sg); /* [2, 3] Replicate */
    if (s == DT_OK)
        s = dt_mul(sy, sg, out); /* Partial x Replicate */
    dt_tensor *all[] = {h, y, sy, g, sg};
    for (int i = 0; i < 5; i++)
        dt_tensor_release(all[i]);
    return s;
}

static void test_partial_grads_reduced_once(void **state)
{
    (void)state;
    dt_mesh *m = do_mesh1();
    do_case c = {.name = "qkv",
                 .n = 4,
                 .ndim = {3, 2, 2, 2},
                 .shape = {{2, 3, 8}, {6, 8}, {6, 8}, {6, 8}},
                 .pl = {{R}, {S(0)}, {S(0)}, {S(0)}},
                 .op = op_qkv,
                 .n_out_pl = 1,
                 .out_pl = {S(2)}};
    do_run(m, &c, 3200);
    do_case c2 = {.name = "mixed pending and local",
                  .n = 2,
                  .ndim = {3, 2},
                  .shape = {{2, 3, 8}, {6, 8}},
                  .pl = {{R}, {S(0)}},
                  .op = op_mixed,
                  .n_out_pl = 1,
                  .out_pl = {P}};
    do_run(m, &c2, 3201);
    /* count the collectives of backward alone */
    int64_t sx[3] = {2, 3, 8}, sw[2] = {6, 8};
    dt_tensor *fx = do_randn(3, sx, 1), *fw = do_randn(2, sw, 2), *x = NULL, *w[3] = {0};
    dt_tensor *y = NULL, *l = NULL;
    dt_placement r = dt_replicate(), s0 = dt_shard(0);
    DO_OK(dt_distribute(fx, m, 1, &r, &x));
    DO_OK(dt_tensor_set_requires_grad(x, true));
    for (int i = 0; i < 3; i++)
        DO_OK(dt_distribute(fw, m, 1, &s0, &w[i]));
    dt_tensor *ins[4] = {x, w[0], w[1], w[2]};
    DO_OK(op_qkv(ins, true, NULL, &y));
    DO_OK(dt_sum_all(y, &l));
    dt_coll_stats st;
    dt_mesh_coll_stats_reset(m);
    DO_OK(dt_backward(l, NULL));
    dt_mesh_coll_stats(m, &st);
    assert_int_equal(st.count[DT_COLL_ALLREDUCE], do_world() > 1 ? 1 : 0);
    assert_int_equal(dt_coll_stats_total(&st), st.count[DT_COLL_ALLREDUCE]);
    /* global shapes that do not multiply fail on every rank, even when the shards would */
    dt_tensor *bad = NULL, *z = NULL;
    int64_t sb[2] = {7, 8};
    dt_tensor *fb = do_randn(2, sb, 3);
    DO_OK(dt_distribute(fb, m, 1, &s0, &bad));
    assert_int_equal(dt_matmul(x, bad, false, false, &z), DT_ERR_INVALID_ARG);
    assert_null(z);
    dt_tensor_release(bad);
    dt_tensor_release(fb);
    dt_tensor *all[] = {fx, fw, x, w[0], w[1], w[2], y, l};
    for (int i = 0; i < 8; i++)
        dt_tensor_release(all[i]);
    dt_mesh_release(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_rules),
        cmocka_unit_test(test_linear_rules),
        cmocka_unit_test(test_megatron_mlp),
        cmocka_unit_test(test_megatron_mlp_2d),
        cmocka_unit_test(test_partial_grads_reduced_once),
        cmocka_unit_test(test_sequence_parallel_block),
    };
    return cmocka_run_group_tests(tests, mr_setup, mr_teardown);
}
