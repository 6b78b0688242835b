/*
 * dt_from_local (given and inferred global shapes), dt_distribute_from
 * (scatter from one rank), and bad specs failing on every rank with a clear
 * message and no hang (each test ends with a collective that would hang if a
 * rank had been left behind).
 */
#include "pl_test_util.h"
#include "autograd/node.h"

static void in_step(void)
{
    PT_OK(dt_comm_barrier(dt_runtime_world(mr_rt), NULL));
}

static void test_from_local(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt), shapes[4][3], nds[4];
    int nm = pt_meshes(w, shapes, nds);
    int64_t ts[2][2] = {{7, 5}, {1, 3}};
    static dt_placement lists[512][3];
    dt_placement opts[5] = {dt_replicate(), dt_shard(0), dt_shard(1), dt_partial(DT_REDUCE_OP_SUM),
                            dt_shard(-1)};
    for (int i = 0; i < nm; i++) {
        dt_mesh *m = NULL;
        PT_OK(dt_mesh_create(mr_rt, nds[i], shapes[i], NULL, &m));
        int nl = pt_lists(nds[i], 5, opts, lists);
        for (int s = 0; s < 2; s++) {
            dt_tensor *x = pt_tensor(2, ts[s], DT_DTYPE_F32, 7);
            for (int a = 0; a < nl; a++) {
                dt_tensor *d = NULL, *e1 = NULL, *e2 = NULL, *f = NULL;
                PT_OK(dt_distribute(x, m, nds[i], lists[a], &d));
                dt_tensor *local = dt_to_local(d);
                /* with the global shape: no communication */
                PT_OK(dt_from_local(local, m, nds[i], lists[a], ts[s], &e1));
                assert_ptr_equal(dt_to_local(e1), local);
                assert_true(dt_spec_equal(dt_tensor_spec(e1), dt_tensor_spec(d)));
                /* inferred: the same spec */
                PT_OK(dt_from_local(local, m, nds[i], lists[a], NULL, &e2));
                if (!dt_spec_equal(dt_tensor_spec(e2), dt_tensor_spec(d))) {
                    char a1[128], a2[128];
                    dt_spec_format(dt_tensor_spec(e2), a1, sizeof(a1));
                    dt_spec_format(dt_tensor_spec(d), a2, sizeof(a2));
                    fail_msg("inferred %s, want %s", a1, a2);
                }
                PT_OK(dt_full_tensor(e2, &f));
                assert_true(dt_tensor_equal(f, x));
                dt_tensor_release(f);
                dt_tensor_release(e1);
                dt_tensor_release(e2);
                dt_tensor_release(d);
            }
            dt_tensor_release(x);
        }
        dt_mesh_release(m);
    }
    in_step();
}

/* Gradients reach a tensor wrapped by dt_from_local through redistribute. */
static void test_from_local_grad(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt), r = dt_runtime_rank(mr_rt);
    dt_mesh *m = NULL;
    PT_OK(dt_mesh_create(mr_rt, 1, &w, NULL, &m));
    int64_t ls[2] = {2, 3}, gs[2] = {2 * w, 3};
    dt_tensor *local = pt_tensor(2, ls, DT_DTYPE_F32, r), *d = NULL, *full = NULL;
    PT_OK(dt_tensor_set_requires_grad(local, true));
    dt_placement s0 = dt_shard(0);
    PT_OK(dt_from_local(local, m, 1, &s0, NULL, &d));
    assert_int_equal(dt_tensor_dim(d, 0), 2 * w);
    PT_OK(dt_full_tensor(d, &full)); /* differentiable all-gather */
    dt_tensor *g = pt_tensor(2, gs, DT_DTYPE_F32, 9), *want = NULL;
    PT_OK(dt_backward(full, g));
    PT_OK(dt_tensor_narrow(g, 0, 2 * r, 2, &want));
    dt_tensor *wc = NULL;
    PT_OK(dt_tensor_clone(want, &wc));
    assert_true(dt_tensor_equal(dt_tensor_grad(local), wc));
    dt_tensor_release(wc);
    dt_tensor_release(want);
    dt_tensor_release(g);
    dt_tensor_release(full);
    dt_tensor_release(d);
    dt_tensor_release(local);
    dt_mesh_release(m);
    in_step();
}

static void test_distribute_from(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt), shapes[4][3], nds[4];
    int nm = pt_meshes(w, shapes, nds);
    int64_t ts[2][2] = {{7, 5}, {2, 3}};
    static dt_placement lists[512][3];
    dt_placement opts[6] = {dt_replicate(),
                            dt_shard(0),
                            dt_shard(1),
                            dt_partial(DT_REDUCE_OP_SUM),
                            dt_partial(DT_REDUCE_OP_MAX),
                            dt_strided_shard(0)};
    for (int i = 0; i < nm; i++) {
        dt_mesh *m = NULL;
        PT_OK(dt_mesh_create(mr_rt, nds[i], shapes[i], NULL, &m));
        int nl = pt_lists(nds[i], 6, opts, lists);
        int src = dt_mesh_size(m) - 1; /* not rank 0: the scatter roots move */
        for (int s = 0; s < 2; s++) {
            dt_tensor *x = pt_tensor(2, ts[s], DT_DTYPE_F32, 11);
            for (int a = 0; a < nl; a++) {
                dt_tensor *d1 = NULL, *d2 = NULL;
                PT_OK(dt_distribute(x, m, nds[i], lists[a], &d1));
                dt_coll_stats st;
                dt_mesh_coll_stats_reset(m);
                PT_OK(dt_distribute_from(dt_mesh_rank(m) == src ? x : NULL, src, m, nds[i],
                                         lists[a], &d2));
                dt_mesh_coll_stats(m, &st);
                assert_true(st.count[DT_COLL_BROADCAST] >= 1);
                assert_true(dt_spec_equal(dt_tensor_spec(d1), dt_tensor_spec(d2)));
                if (!dt_tensor_equal(dt_to_local(d1), dt_to_local(d2))) {
                    char t[64];
                    dt_placements_format(nds[i], lists[a], ",", t, sizeof(t));
                    fail_msg("distribute_from %s differs from distribute", t);
                }
                dt_tensor_release(d1);
                dt_tensor_release(d2);
            }
            dt_tensor_release(x);
        }
        /* the source's input is untouched */
        dt_tensor *x = pt_tensor(2, ts[0], DT_DTYPE_F32, 11), *x0 = NULL, *d = NULL;
        PT_OK(dt_tensor_clone(x, &x0));
        dt_placement pl[3] = {dt_partial(DT_REDUCE_OP_SUM), dt_partial(DT_REDUCE_OP_SUM),
                              dt_partial(DT_REDUCE_OP_SUM)};
        PT_OK(dt_distribute_from(x, 0, m, nds[i], pl, &d));
        assert_true(dt_tensor_equal(x, x0));
        dt_tensor_release(d);
        dt_tensor_release(x);
        dt_tensor_release(x0);
        dt_mesh_release(m);
    }
    in_step();
}

static void expect_error(dt_status got, const char *needle)
{
    if (got != DT_ERR_INVALID_ARG)
        fail_msg("expected an invalid-argument error naming '%s', got %s (%s)", needle,
                 dt_status_str(got), dt_last_error());
    if (strstr(dt_last_error(), needle) == NULL)
        fail_msg("error '%s' does not name '%s'", dt_last_error(), needle);
}

static void test_bad_specs(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt), r = dt_runtime_rank(mr_rt);
    dt_mesh *m = NULL, *m2 = NULL;
    int s2[2] = {1, w};
    PT_OK(dt_mesh_create(mr_rt, 1, &w, NULL, &m));
    PT_OK(dt_mesh_create(mr_rt, 2, s2, NULL, &m2));
    int64_t shape[2] = {7, 5};
    dt_tensor *x = pt_tensor(2, shape, DT_DTYPE_F32, 1), *d = NULL, *y = NULL;
    dt_placement s2p = dt_shard(2), rr[2] = {dt_replicate(), dt_replicate()};

    expect_error(dt_distribute(x, m, 1, &s2p, &d), "S(2)");
    assert_null(d);
    expect_error(dt_distribute(x, m, 2, rr, &d), "2 placements");
    dt_placement s0 = dt_shard(0);
    PT_OK(dt_distribute(x, m, 1, &s0, &d));
    expect_error(dt_redistribute(d, 1, &s2p, &y), "S(2)");
    expect_error(dt_redistribute(d, 2, rr, &y), "1-d mesh");
    /* across meshes */
    dt_spec *other = NULL;
    PT_OK(dt_spec_create(m2, 2, rr, 2, shape, DT_DTYPE_F32, &other));
    expect_error(dt_redistribute_to(d, other, &y), "different meshes");
    assert_null(y);
    dt_spec_release(other);
    /* a local tensor where a distributed one is needed */
    dt_tensor *f = NULL;
    expect_error(dt_full_tensor(x, &f), "not a distributed one");
    expect_error(dt_redistribute(x, 1, &s0, &y), "not a distributed one");
    /* a virtual mesh cannot communicate */
    dt_mesh *v = NULL;
    dt_tensor *dv = NULL;
    PT_OK(dt_mesh_create_virtual(1, &w, NULL, r, &v));
    PT_OK(dt_distribute(x, v, 1, &s0, &dv));
    if (w > 1)
        expect_error(dt_full_tensor(dv, &f), "virtual");
    dt_tensor_release(dv);
    dt_mesh_release(v);
    in_step();

    /* from_local: rank 0's shard disagrees; every rank fails, naming rank 0 */
    int64_t ls[2] = {r == 0 ? 1 : 2, 5};
    dt_tensor *local = pt_tensor(2, ls, DT_DTYPE_F32, 1), *e = NULL;
    expect_error(dt_from_local(local, m, 1, &s0, NULL, &e), "mesh rank 0");
    assert_null(e);
    dt_tensor_release(local);
    /* Replicate shards of different shapes */
    int64_t ls2[2] = {3, r == w - 1 ? 4 : 5};
    dt_placement rep = dt_replicate();
    local = pt_tensor(2, ls2, DT_DTYPE_F32, 1);
    if (w > 1) {
        char needle[32];
        snprintf(needle, sizeof(needle), "mesh rank %d", w - 1);
        expect_error(dt_from_local(local, m, 1, &rep, NULL, &e), needle);
    }
    dt_tensor_release(local);
    /* a different dtype on the last rank */
    int64_t ls3[2] = {2, 2};
    local = pt_tensor(2, ls3, r == w - 1 ? DT_DTYPE_F64 : DT_DTYPE_F32, 1);
    if (w > 1)
        expect_error(dt_from_local(local, m, 1, &rep, NULL, &e), "f64");
    dt_tensor_release(local);
    /* other placements on the last rank */
    local = pt_tensor(2, ls3, DT_DTYPE_F32, 1);
    if (w > 1) {
        char needle[64];
        snprintf(needle, sizeof(needle), "mesh rank %d passed other placements", w - 1);
        expect_error(dt_from_local(local, m, 1, r == w - 1 ? &s0 : &rep, NULL, &e), needle);
    }
    dt_tensor_release(local);
    /* NULL on one rank */
    local = pt_tensor(2, ls3, DT_DTYPE_F32, 1);
    expect_error(dt_from_local(r == 0 ? NULL : local, m, 1, &rep, NULL, &e), "passed no local");
    /* a given global shape that does not match this rank's shard */
    int64_t gbad[2] = {2, 3};
    expect_error(dt_from_local(local, m, 1, &rep, gbad, &e), "[2, 3]");
    dt_tensor_release(local);
    /* distribute_from with no tensor on the source */
    expect_error(dt_distribute_from(NULL, 0, m, 1, &s0, &e), "source mesh rank 0");
    expect_error(dt_distribute_from(x, w, m, 1, &s0, &e), "outside the mesh");
    in_step();

    dt_tensor_release(d);
    dt_tensor_release(x);
    dt_mesh_release(m);
    dt_mesh_release(m2);
}

/* The plan text and the counters agree with what the executor did. */
static void test_explain_and_counters(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt);
    dt_mesh *m = NULL;
    PT_OK(dt_mesh_create(mr_rt, 1, &w, NULL, &m));
    int64_t shape[2] = {8, 6};
    dt_tensor *x = pt_tensor(2, shape, DT_DTYPE_F32, 1), *d = NULL, *y = NULL;
    dt_placement p = dt_partial(DT_REDUCE_OP_SUM), s1 = dt_shard(1);
    PT_OK(dt_distribute(x, m, 1, &p, &d));
    char buf[1024];
    dt_spec *dst = NULL;
    PT_OK(dt_spec_create(m, 1, &s1, 2, shape, DT_DTYPE_F32, &dst));
    PT_OK(dt_redistribute_explain(dt_tensor_spec(d), dst, buf, sizeof(buf)));
    assert_non_null(strstr(buf, "P(sum) -> S(1)"));
    assert_non_null(strstr(buf, "reduce-scatter"));
    dt_coll_stats st;
    dt_mesh_coll_stats_reset(m);
    PT_OK(dt_redistribute_to(d, dst, &y));
    dt_mesh_coll_stats(m, &st);
    assert_int_equal(st.count[DT_COLL_REDUCE_SCATTER], w > 1 ? 1 : 0);
    assert_int_equal(dt_coll_stats_total(&st), w > 1 ? 1 : 0);
    int64_t mine, sz;
    dt_shard_chunk(6, w, dt_mesh_rank(m), &sz, NULL);
    mine = (int64_t)(w - 1) * sz * 8 * 4;
    assert_int_equal(st.bytes[DT_COLL_REDUCE_SCATTER], w > 1 ? mine : 0);
    dt_spec_release(dst);
    dt_tensor_release(y);
    dt_tensor_release(d);
    dt_tensor_release(x);
    dt_mesh_release(m);
}

/* Tensors on a sliced mesh use the parent's comms; every transition works there too. */
static void test_sliced_mesh(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt);
    if (w % 2 != 0)
        return;
    int shape[2] = {2, w / 2};
    const char *names[2] = {"dp", "tp"};
    dt_mesh *m = NULL, *tp = NULL, *dp = NULL;
    PT_OK(dt_mesh_create(mr_rt, 2, shape, names, &m));
    PT_OK(dt_mesh_slice(m, "tp", &tp));
    PT_OK(dt_mesh_slice(m, "dp", &dp));
    int64_t ts[2] = {5, 3};
    dt_tensor *x = pt_tensor(2, ts, DT_DTYPE_F32, 3);
    const char *pl[] = {"S(0)", "S(1)", "R", "P(sum)", "P(max)"};
    dt_mesh *sub[2] = {tp, dp};
    for (int k = 0; k < 2; k++)
        for (int a = 0; a < 5; a++)
            for (int b = 0; b < 5; b++) {
                dt_placement pa, pb;
                dt_tensor *d = NULL, *y = NULL, *f = NULL;
                PT_OK(dt_placement_parse(pl[a], &pa));
                PT_OK(dt_placement_parse(pl[b], &pb));
                PT_OK(dt_distribute(x, sub[k], 1, &pa, &d));
                PT_OK(dt_redistribute(d, 1, &pb, &y));
                if (pb.kind != DT_PLACEMENT_PARTIAL) {
                    dt_tensor *want = pt_expected_local(x, dt_tensor_spec(y));
                    assert_true(dt_tensor_equal(dt_to_local(y), want));
                    dt_tensor_release(want);
                }
                PT_OK(dt_full_tensor(y, &f));
                if (!dt_tensor_equal(f, x))
                    fail_msg("slice %s: %s -> %s: full tensor differs", names[1 - k], pl[a], pl[b]);
                dt_tensor_release(f);
                dt_tensor_release(y);
                dt_tensor_release(d);
            }
    /* a tensor on the tp slice cannot move to a spec on the dp slice (unless both are size 1) */
    dt_placement r = dt_replicate();
    dt_tensor *d = NULL, *y = NULL;
    dt_spec *other = NULL;
    PT_OK(dt_distribute(x, tp, 1, &r, &d));
    PT_OK(dt_spec_create(dp, 1, &r, 2, ts, DT_DTYPE_F32, &other));
    if (!dt_mesh_equal(tp, dp))
        assert_int_equal(dt_redistribute_to(d, other, &y), DT_ERR_INVALID_ARG);
    dt_spec_release(other);
    dt_tensor_release(d);
    dt_tensor_release(x);
    dt_mesh_release(tp);
    dt_mesh_release(dp);
    dt_mesh_release(m);
    in_step();
}

/* A strided (transposed) shard, and a chain of redistributes under autograd. */
static void test_strided_and_chain(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt), r = dt_runtime_rank(mr_rt);
    dt_mesh *m = NULL;
    PT_OK(dt_mesh_create(mr_rt, 1, &w, NULL, &m));
    /* local [3, 2] shard of S(0), stored transposed */
    int64_t ts[2] = {2, 3};
    dt_tensor *t = pt_tensor(2, ts, DT_DTYPE_F32, r), *lt = NULL, *lc = NULL;
    PT_OK(dt_tensor_transpose(t, 0, 1, &lt));
    PT_OK(dt_tensor_clone(lt, &lc));
    PT_OK(dt_tensor_set_requires_grad(lt, true));
    dt_placement s0 = dt_shard(0), s1 = dt_shard(1), rep = dt_replicate(),
                 psum = dt_partial(DT_REDUCE_OP_SUM);
    dt_tensor *d = NULL, *a = NULL, *b = NULL, *c = NULL, *full = NULL;
    PT_OK(dt_from_local(lt, m, 1, &s0, NULL, &d));
    assert_int_equal(dt_tensor_dim(d, 0), 3 * w);
    /* S(0) -> S(1) -> P(sum) -> R: three nodes, gradient back through all */
    PT_OK(dt_redistribute(d, 1, &s1, &a));
    PT_OK(dt_redistribute(a, 1, &psum, &b));
    PT_OK(dt_redistribute(b, 1, &rep, &c));
    PT_OK(dt_full_tensor(c, &full));
    dt_tensor *want = NULL, *g = NULL, *gwant = NULL, *gw = NULL;
    PT_OK(dt_tensor_narrow(full, 0, 3 * r, 3, &want));
    assert_true(dt_tensor_equal(want, lc)); /* values of the strided shard arrived */
    int64_t gs[2] = {3 * w, 2};
    g = pt_tensor(2, gs, DT_DTYPE_F32, 8);
    PT_OK(dt_backward(dt_to_local(c), g));
    PT_OK(dt_tensor_narrow(g, 0, 3 * r, 3, &gwant));
    PT_OK(dt_tensor_clone(gwant, &gw));
    assert_non_null(dt_tensor_grad(lt));
    assert_true(dt_tensor_equal(dt_tensor_grad(lt), gw));
    dt_tensor_release(gw);
    dt_tensor_release(gwant);
    dt_tensor_release(g);
    dt_tensor_release(want);
    dt_tensor_release(full);
    dt_tensor_release(c);
    dt_tensor_release(b);
    dt_tensor_release(a);
    dt_tensor_release(d);
    dt_tensor_release(lc);
    dt_tensor_release(lt);
    dt_tensor_release(t);
    dt_mesh_release(m);
    in_step();
}

/* A pending Partial gradient handed to redistribute's backward directly is
 * planned from its own spec: P(sum) -> S(1) is one reduce-scatter. */
static void test_backward_pending_partial(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt);
    dt_mesh *m = NULL;
    PT_OK(dt_mesh_create(mr_rt, 1, &w, NULL, &m));
    int64_t shape[2] = {5, 7};
    dt_tensor *x = pt_tensor(2, shape, DT_DTYPE_F32, 1), *g = pt_tensor(2, shape, DT_DTYPE_F32, 2);
    dt_placement s1 = dt_shard(1), rep = dt_replicate(), psum = dt_partial(DT_REDUCE_OP_SUM);
    dt_tensor *d = NULL, *y = NULL, *gd = NULL, *gx[1] = {NULL};
    PT_OK(dt_distribute(x, m, 1, &s1, &d));
    PT_OK(dt_tensor_set_requires_grad(dt_to_local(d), true));
    PT_OK(dt_redistribute(d, 1, &rep, &y)); /* forward all-gather */
    dt_ag_node *node = dt_to_local(y)->grad_fn;
    assert_non_null(node);
    PT_OK(dt_distribute(g, m, 1, &psum, &gd)); /* the pending gradient */
    dt_coll_stats st;
    dt_mesh_coll_stats_reset(m);
    PT_OK(node->backward(node, &gd, gx));
    dt_mesh_coll_stats(m, &st);
    assert_int_equal(st.count[DT_COLL_REDUCE_SCATTER], w > 1 ? 1 : 0);
    assert_int_equal(dt_coll_stats_total(&st), w > 1 ? 1 : 0);
    dt_tensor *want = pt_expected_local(g, dt_tensor_spec(d));
    assert_true(dt_tensor_equal(gx[0], want));
    dt_tensor_release(want);
    dt_tensor_release(gx[0]);
    dt_tensor_release(gd);
    dt_tensor_release(y);
    dt_tensor_release(d);
    dt_tensor_release(g);
    dt_tensor_release(x);
    dt_mesh_release(m);
    in_step();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_from_local),
        cmocka_unit_test(test_from_local_grad),
        cmocka_unit_test(test_distribute_from),
        cmocka_unit_test(test_bad_specs),
        cmocka_unit_test(test_explain_and_counters),
        cmocka_unit_test(test_sliced_mesh),
        cmocka_unit_test(test_strided_and_chain),
        cmocka_unit_test(test_backward_pending_partial),
    };
    return cmocka_run_group_tests(tests, mr_setup, mr_teardown);
}
