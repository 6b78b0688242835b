/*
 * Distributed tensors over real ranks (dtrun -n 2, 3, 4): meshes 2, 1x2; 3,
 * 1x3, 3x1; 4, 2x2, 2x1x2. For every pair of placement lists (src, dst) and
 * global shapes with dims smaller than the mesh (empty shards):
 *   - dt_distribute gives every rank the expected slice;
 *   - dt_redistribute gives the expected slices (non-Partial targets), runs
 *     exactly the collectives of its plan (counted, with the plan's bytes);
 *   - dt_full_tensor of the result equals the input bit for bit;
 *   - the gradient through dt_redistribute is the right slice of the upstream
 *     gradient laid out with the source placements (Partial read as Replicate).
 */
#include <math.h>

#include "pl_test_util.h"
#include "placement/placement_impl.h"

typedef struct ctx {
    dt_mesh *mesh;
    char name[32];
    int mesh_ndim;
} ctx;

static void spec_of(dt_mesh *m, const dt_placement *pl, const dt_tensor *x, bool grad,
                    dt_spec **out)
{
    dt_placement q[3];
    for (int k = 0; k < dt_mesh_ndim(m); k++)
        q[k] = (grad && pl[k].kind == DT_PLACEMENT_PARTIAL) ? dt_replicate() : pl[k];
    PT_OK(dt_spec_create(m, dt_mesh_ndim(m), q, dt_tensor_ndim(x), dt_tensor_shape(x),
                         dt_tensor_dtype(x), out));
}

static void expect_equal(dt_tensor *got, dt_tensor *want, const char *what, const char *which)
{
    if (!dt_tensor_equal(got, want)) {
        fprintf(stderr, "%s: %s differs; got:\n", what, which);
        dt_tensor_print(got, stderr, 40);
        fprintf(stderr, "want:\n");
        dt_tensor_print(want, stderr, 40);
        fail_msg("%s: %s differs", what, which);
    }
}

/* Collectives and bytes the plan src -> dst must issue on this rank. */
static void plan_counts(const dt_spec *a, const dt_spec *b, int64_t *count, int64_t *bytes)
{
    dt__plan plan;
    PT_OK(dt__redist_plan(a, b, &plan));
    *count = 0;
    *bytes = 0;
    for (int i = 0; i < plan.n_steps; i++) {
        const dt__step *st = &plan.steps[i];
        int64_t numel = 1;
        for (int d = 0; d < plan.ndim; d++)
            numel *= st->logical_shape[d];
        if (st->kind == DT__STEP_SLICE || st->kind == DT__STEP_PARTITION || numel == 0 ||
            dt_mesh_dim_size(dt_spec_mesh(a), st->mesh_dim) == 1)
            continue;
        (*count)++;
        *bytes += st->bytes;
    }
}

static void check_pair(dt_mesh *m, dt_tensor *x, dt_tensor *g, const dt_placement *pa,
                       const dt_placement *pb, const char *mname)
{
    int M = dt_mesh_ndim(m);
    char what[300], ta[64], tb[64], sh[64];
    dt_placements_format(M, pa, ",", ta, sizeof(ta));
    dt_placements_format(M, pb, ",", tb, sizeof(tb));
    snprintf(sh, sizeof(sh), "[%lld, %lld]", (long long)dt_tensor_dim(x, 0),
             (long long)dt_tensor_dim(x, 1));
    snprintf(what, sizeof(what), "mesh %s shape %s %s -> %s", mname, sh, ta, tb);
    dt_spec *sa = NULL, *sb = NULL, *ga = NULL, *gb = NULL;
    spec_of(m, pa, x, false, &sa);
    spec_of(m, pb, x, false, &sb);
    spec_of(m, pa, x, true, &ga);
    spec_of(m, pb, x, true, &gb);

    dt_tensor *d = NULL, *y = NULL, *full = NULL, *want = NULL;
    PT_OK(dt_distribute(x, m, M, pa, &d));
    if (!pt_has_partial(M, pa)) {
        want = pt_expected_local(x, sa);
        expect_equal(dt_to_local(d), want, what, "distributed shard");
        dt_tensor_release(want);
    }
    PT_OK(dt_tensor_set_requires_grad(dt_to_local(d), true));

    int64_t want_count, want_bytes;
    dt_coll_stats st;
    plan_counts(sa, sb, &want_count, &want_bytes);
    dt_mesh_coll_stats_reset(m);
    PT_OK(dt_redistribute(d, M, pb, &y));
    dt_mesh_coll_stats(m, &st);
    int64_t got_bytes = 0;
    for (int k = 0; k < DT_COLL_KIND_COUNT; k++)
        got_bytes += st.bytes[k];
    if (dt_coll_stats_total(&st) != want_count || got_bytes != want_bytes)
        fail_msg("%s: %lld collectives / %lld bytes, plan says %lld / %lld", what,
                 (long long)dt_coll_stats_total(&st), (long long)got_bytes, (long long)want_count,
                 (long long)want_bytes);
    assert_true(dt_spec_equal(dt_tensor_spec(y), sb));
    if (!pt_has_partial(M, pb)) {
        want = pt_expected_local(x, sb);
        expect_equal(dt_to_local(y), want, what, "redistributed shard");
        dt_tensor_release(want);
    }
    bool prev = dt_grad_set_enabled(false);
    PT_OK(dt_full_tensor(y, &full));
    dt_grad_set_enabled(prev);
    expect_equal(full, x, what, "full tensor");

    /* backward: upstream gradient laid out as the output (Partial -> Replicate) */
    dt_tensor *gy = pt_expected_local(g, gb), *gx_want = pt_expected_local(g, ga);
    PT_OK(dt_backward(dt_to_local(y), gy));
    assert_non_null(dt_tensor_grad(dt_to_local(d)));
    expect_equal(dt_tensor_grad(dt_to_local(d)), gx_want, what, "gradient");

    dt_tensor_release(gy);
    dt_tensor_release(gx_want);
    dt_tensor_release(full);
    dt_tensor_release(y);
    dt_tensor_release(d);
    dt_spec_release(sa);
    dt_spec_release(sb);
    dt_spec_release(ga);
    dt_spec_release(gb);
}

/* check_pair for every (from, to) of lists[0..nl), on a tensor of shape ts with
 * values from seed and an upstream gradient from seed + 1. */
static void check_all_pairs(dt_mesh *m, const char *mname, int nd, const int64_t *ts, int seed,
                            dt_placement (*lists)[3], int nl)
{
    dt_tensor *x = pt_tensor(nd, ts, DT_DTYPE_F32, seed);
    dt_tensor *g = pt_tensor(nd, ts, DT_DTYPE_F32, seed + 1);
    for (int a = 0; a < nl; a++)
        for (int b = 0; b < nl; b++)
            check_pair(m, x, g, lists[a], lists[b], mname);
    dt_tensor_release(x);
    dt_tensor_release(g);
}

static void test_exhaustive(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt), shapes[4][3], nds[4];
    int nm = pt_meshes(w, shapes, nds);
    int64_t tshapes[3][2] = {{7, 5}, {1, 3}, {3, 1}};
    static dt_placement lists[512][3];
    for (int i = 0; i < nm; i++) {
        dt_mesh *m = NULL;
        char mname[32];
        dt__mesh_shape_str(nds[i], shapes[i], mname, sizeof(mname));
        PT_OK(dt_mesh_create(mr_rt, nds[i], shapes[i], NULL, &m));
        dt_placement opts[7] = {dt_replicate(),
                                dt_shard(0),
                                dt_shard(1),
                                dt_partial(DT_REDUCE_OP_SUM),
                                dt_partial(DT_REDUCE_OP_MAX),
                                dt_partial(DT_REDUCE_OP_AVG),
                                dt_partial(DT_REDUCE_OP_MIN)};
        /* fewer Partial flavours as the mesh grows, to keep the suite quick */
        int nopts = nds[i] <= 2 ? 7 : 5;
        int nl = pt_lists(nds[i], nopts, opts, lists);
        int nshapes = nds[i] == 3 ? 2 : 3;
        if (dt_runtime_rank(mr_rt) == 0)
            printf("mesh %s: %d placement lists, %d pairs x %d shapes\n", mname, nl, nl * nl,
                   nshapes);
        for (int s = 0; s < nshapes; s++)
            check_all_pairs(m, mname, 2, tshapes[s], 1, lists, nl);
        dt_mesh_release(m);
    }
}

/* A 3-d tensor: all-to-all between every pair of dims, nested shards. */
static void test_three_dims(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt), shapes[4][3], nds[4];
    int nm = pt_meshes(w, shapes, nds);
    int64_t ts[3] = {3, 5, 2};
    static dt_placement lists[512][3];
    for (int i = 0; i < nm; i++) {
        if (nds[i] > 2)
            continue;
        dt_mesh *m = NULL;
        char mname[32];
        dt__mesh_shape_str(nds[i], shapes[i], mname, sizeof(mname));
        PT_OK(dt_mesh_create(mr_rt, nds[i], shapes[i], NULL, &m));
        dt_placement opts[5] = {dt_replicate(), dt_shard(0), dt_shard(1), dt_shard(2),
                                dt_partial(DT_REDUCE_OP_SUM)};
        int nl = pt_lists(nds[i], 5, opts, lists);
        check_all_pairs(m, mname, 3, ts, 4, lists, nl);
        dt_mesh_release(m);
    }
}

/* Strided shards (_S(d): split after the plain shards of d) to and from
 * every other layout, on every mesh of up to 3 dims. */
static void test_strided(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt), shapes[4][3], nds[4];
    int nm = pt_meshes(w, shapes, nds);
    int64_t tshapes[2][2] = {{7, 5}, {3, 1}};
    static dt_placement lists[512][3];
    for (int i = 0; i < nm; i++) {
        dt_mesh *m = NULL;
        char mname[32];
        dt__mesh_shape_str(nds[i], shapes[i], mname, sizeof(mname));
        PT_OK(dt_mesh_create(mr_rt, nds[i], shapes[i], NULL, &m));
        dt_placement opts[6] = {dt_strided_shard(0), dt_strided_shard(1),
                                dt_shard(0),         dt_replicate(),
                                dt_shard(1),         dt_partial(DT_REDUCE_OP_SUM)};
        int nl = pt_lists(nds[i], nds[i] == 3 ? 3 : 6, opts, lists);
        for (int s = 0; s < 2; s++)
            check_all_pairs(m, mname, 2, tshapes[s], 7, lists, nl);
        /* ops read _S(d) as S(d): a strided and a plain operand, summed over dim 1 */
        dt_tensor *x = pt_tensor(2, tshapes[0], DT_DTYPE_F32, 8), *a = NULL, *b = NULL;
        dt_tensor *y = NULL, *z = NULL, *full = NULL, *xx = NULL, *want = NULL;
        dt_placement pa[3], pb[3];
        for (int k = 0; k < nds[i]; k++)
            pa[k] = k == 0 ? dt_strided_shard(0) : dt_shard(0), pb[k] = dt_shard(0);
        PT_OK(dt_distribute(x, m, nds[i], pa, &a));
        PT_OK(dt_distribute(x, m, nds[i], pb, &b));
        PT_OK(dt_mul(a, b, &y));
        PT_OK(dt_sum(y, 1, false, &z));
        PT_OK(dt_full_tensor(z, &full));
        PT_OK(dt_mul(x, x, &xx));
        PT_OK(dt_sum(xx, 1, false, &want));
        expect_equal(full, want, mname, "sum(_S(0) * S(0), dim 1)");
        dt_tensor *all[7] = {x, a, b, y, z, full, xx};
        for (int t = 0; t < 7; t++)
            dt_tensor_release(all[t]);
        dt_tensor_release(want);
        dt_mesh_release(m);
    }
}

/* Split-factor strided shards (_S(d,sf=k), PyTorch's _StridedShard with a
 * split factor) to and from every plain layout and each other, on every mesh:
 * shards against PyTorch's piece rule (pt_split_pieces), plans, full tensors,
 * gradients. Lists a spec refuses (two shards of the split dim) are left out;
 * those refusals are checked here too. */
static void test_split_factor(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt), shapes[4][3], nds[4];
    int nm = pt_meshes(w, shapes, nds);
    int64_t ts[2] = {2 * w, 3 * w}; /* every mesh dim size divides w: even pieces */
    static dt_placement lists[512][3], ok[512][3];
    for (int i = 0; i < nm; i++) {
        dt_mesh *m = NULL;
        char mname[32];
        dt__mesh_shape_str(nds[i], shapes[i], mname, sizeof(mname));
        PT_OK(dt_mesh_create(mr_rt, nds[i], shapes[i], NULL, &m));
        dt_placement opts[6] = {dt_strided_shard_split(0, 2),
                                dt_strided_shard_split(1, 3),
                                dt_replicate(),
                                dt_shard(0),
                                dt_shard(1),
                                dt_partial(DT_REDUCE_OP_SUM)};
        int nl = pt_lists(nds[i], nds[i] == 3 ? 4 : 6, opts, lists), nok = 0;
        for (int l = 0; l < nl; l++) {
            dt_spec *sp = NULL;
            if (dt_spec_create(m, nds[i], lists[l], 2, ts, DT_DTYPE_F32, &sp) == DT_OK)
                memcpy(ok[nok++], lists[l], sizeof(ok[0]));
            dt_spec_release(sp);
        }
        if (dt_runtime_rank(mr_rt) == 0)
            printf("mesh %s: %d split-factor lists of %d, %d pairs\n", mname, nok, nl, nok * nok);
        check_all_pairs(m, mname, 2, ts, 3, ok, nok);
        dt_tensor *x = pt_tensor(2, ts, DT_DTYPE_F32, 5);
        for (int l = 0; l < nok; l++) { /* a scatter from one rank gives the same shards */
            dt_tensor *a = NULL, *b = NULL;
            PT_OK(dt_distribute(x, m, nds[i], ok[l], &a));
            PT_OK(dt_distribute_from(dt_runtime_rank(mr_rt) == w - 1 ? x : NULL, w - 1, m, nds[i],
                                     ok[l], &b));
            char what[96], tl[64];
            dt_placements_format(nds[i], ok[l], ",", tl, sizeof(tl));
            snprintf(what, sizeof(what), "%s %s", mname, tl);
            expect_equal(dt_to_local(b), dt_to_local(a), what, "dt_distribute_from shard");
            dt_tensor_release(a);
            dt_tensor_release(b);
        }
        /* ops read _S(d,sf=k) as S(d): a split and a plain operand, summed over dim 1 */
        dt_placement pa[3], pb[3];
        for (int k = 0; k < nds[i]; k++)
            pa[k] = k == 0 ? dt_strided_shard_split(0, 2) : dt_replicate(), pb[k] = dt_shard(0);
        dt_tensor *da = NULL, *db = NULL, *y = NULL, *z = NULL, *full = NULL, *xx = NULL,
                  *want = NULL;
        PT_OK(dt_distribute(x, m, nds[i], pa, &da));
        PT_OK(dt_distribute(x, m, nds[i], pb, &db));
        PT_OK(dt_mul(da, db, &y));
        PT_OK(dt_sum(y, 1, false, &z));
        PT_OK(dt_full_tensor(z, &full));
        PT_OK(dt_mul(x, x, &xx));
        PT_OK(dt_sum(xx, 1, false, &want));
        expect_equal(full, want, mname, "sum(_S(0,sf=2) * S(0), dim 1)");
        dt_tensor *all[7] = {da, db, y, z, full, xx, want};
        for (int t = 0; t < 7; t++)
            dt_tensor_release(all[t]);
        dt_tensor_release(x);
        dt_mesh_release(m);
    }
}

/* A matmul made under autocast bf16 (PyTorch: a bf16 result) that is left
 * Partial is summed in bf16: half the bytes; other Partials stay f32. */
static void autocast_product(dt_mesh *m, dt_tensor *a, dt_tensor *b, bool on, dt_tensor **y,
                             int64_t *moved)
{
    dt_placement s0 = dt_shard(0), s1 = dt_shard(1), r = dt_replicate();
    dt_tensor *da = NULL, *db = NULL, *p = NULL;
    dt_dtype prev;
    PT_OK(dt_distribute(a, m, 1, &s1, &da));
    PT_OK(dt_distribute(b, m, 1, &s0, &db));
    PT_OK(dt_autocast_set(on ? DT_DTYPE_BF16 : DT_DTYPE_F32, &prev));
    PT_OK(dt_matmul(da, db, false, false, &p)); /* K sharded: Partial(sum) */
    PT_OK(dt_autocast_set(prev, NULL));
    assert_int_equal(dt_tensor_placements(p)[0].kind, DT_PLACEMENT_PARTIAL);
    dt_coll_stats st;
    dt_mesh_coll_stats_reset(m);
    PT_OK(dt_redistribute(p, 1, &r, y)); /* autocast is off again: the spec remembers */
    dt_mesh_coll_stats(m, &st);
    *moved = st.bytes[DT_COLL_ALLREDUCE];
    dt_tensor_release(da);
    dt_tensor_release(db);
    dt_tensor_release(p);
}

static void test_autocast_wire(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt);
    dt_mesh *m = NULL;
    PT_OK(dt_mesh_create(mr_rt, 1, &w, NULL, &m));
    int64_t as[2] = {6, 8}, bs[2] = {8, 5};
    dt_tensor *ai = pt_tensor(2, as, DT_DTYPE_F32, 30), *bi = pt_tensor(2, bs, DT_DTYPE_F32, 31);
    dt_tensor *a = NULL, *b = NULL, *y32 = NULL, *y16 = NULL;
    PT_OK(dt_scale(ai, 1.0 / 3.0, &a)); /* values bf16 cannot hold exactly */
    PT_OK(dt_scale(bi, 1.0 / 7.0, &b));
    int64_t bytes32, bytes16;
    autocast_product(m, a, b, false, &y32, &bytes32);
    autocast_product(m, a, b, true, &y16, &bytes16);
    if (w > 1) {
        assert_true(bytes32 > 0);
        assert_int_equal(bytes16, bytes32 / 2);
    }
    dt_tensor *l32 = dt_to_local(y32), *l16 = dt_to_local(y16);
    double scale = 0; /* the products' magnitude: bf16 operands and sums stay within 2^-6 of it */
    for (int64_t i = 0; i < dt_tensor_numel(l32); i++)
        scale = fmax(scale, fabs(dt_tensor_item_at(l32, i)));
    for (int64_t i = 0; i < dt_tensor_numel(l32); i++) {
        double x = dt_tensor_item_at(l16, i), want = dt_tensor_item_at(l32, i);
        if (fabs(x - want) > scale / 64)
            fail_msg("autocast product: element %lld is %g, f32 gives %g", (long long)i, x, want);
    }
    /* a Partial no product made (a distributed constant) stays f32 under autocast */
    dt_placement p = dt_partial(DT_REDUCE_OP_SUM), r = dt_replicate();
    dt_tensor *d = NULL, *e = NULL;
    dt_dtype prev;
    PT_OK(dt_distribute(a, m, 1, &p, &d));
    PT_OK(dt_autocast_set(DT_DTYPE_BF16, &prev));
    PT_OK(dt_redistribute(d, 1, &r, &e));
    PT_OK(dt_autocast_set(prev, NULL));
    assert_true(dt_tensor_equal(dt_to_local(e), a));
    dt_tensor *ts[] = {ai, bi, a, b, y32, y16, d, e};
    for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]); i++)
        dt_tensor_release(ts[i]);
    dt_mesh_release(m);
}

/* Other dtypes move bit for bit (no autograd). */
static void test_dtypes(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt);
    dt_mesh *m = NULL;
    PT_OK(dt_mesh_create(mr_rt, 1, &w, NULL, &m));
    dt_dtype dts[4] = {DT_DTYPE_I64, DT_DTYPE_BF16, DT_DTYPE_F64, DT_DTYPE_U8};
    int64_t shape[2] = {9, 4};
    const char *pairs[][2] = {
        {"S(0)", "S(1)"}, {"S(1)", "R"}, {"R", "S(0)"}, {"P(sum)", "S(0)"}, {"P(max)", "R"}};
    for (int t = 0; t < 4; t++) {
        dt_tensor *x = pt_tensor(2, shape, dts[t], 3);
        for (int p = 0; p < 5; p++) {
            dt_placement a, b;
            dt_tensor *d = NULL, *y = NULL, *f = NULL;
            if (dts[t] == DT_DTYPE_U8 && p >= 3)
                continue; /* u8 holds negative test values modulo 256: reduce only moves */
            PT_OK(dt_placement_parse(pairs[p][0], &a));
            PT_OK(dt_placement_parse(pairs[p][1], &b));
            PT_OK(dt_distribute(x, m, 1, &a, &d));
            PT_OK(dt_redistribute(d, 1, &b, &y));
            PT_OK(dt_full_tensor(y, &f));
            if (!dt_tensor_equal(f, x))
                fail_msg("%s: %s -> %s changed the values", dt_dtype_name(dts[t]), pairs[p][0],
                         pairs[p][1]);
            dt_tensor_release(d);
            dt_tensor_release(y);
            dt_tensor_release(f);
        }
        dt_tensor_release(x);
    }
    dt_mesh_release(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtypes),       cmocka_unit_test(test_exhaustive),
        cmocka_unit_test(test_three_dims),   cmocka_unit_test(test_strided),
        cmocka_unit_test(test_split_factor), cmocka_unit_test(test_autocast_wire),
    };
    return cmocka_run_group_tests(tests, mr_setup, mr_teardown);
}
