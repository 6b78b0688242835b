/*
 * The redistribute planner without communication.
 * 1. A table of (mesh, shape, src, dst) -> expected plan text.
 * 2. Exhaustive: every pair of placement lists on meshes of 2, 3, 4, 2x2, 1x3,
 *    3x1 and 2x1x2 ranks, with shapes smaller than the mesh: the plan of every
 *    rank is simulated over all ranks' shards in one process (each step's
 *    collective done by hand on arrays), and the result must hold the same
 *    global value, with exact shards for non-Partial targets. This checks the
 *    plan (order of mesh dims, logical shapes) independently of the executor.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dtensor.h"
#include "placement/placement_impl.h"

/* ------------------------------------------------------------ table */

typedef struct plan_case {
    const char *mesh; /* "2x2" */
    int rank;         /* the rank whose plan is printed */
    int ndim;
    int64_t shape[3];
    const char *src, *dst;
    const char *chain; /* first line of dt_redistribute_explain */
    int64_t total;     /* bytes this rank receives, -1 = not checked */
} plan_case;

static const plan_case cases[] = {
    {"4", 0, 2, {8, 4}, "S(0)", "R", "S(0) -> R", 3 * 2 * 4 * 4},
    {"4", 0, 2, {8, 4}, "P(sum)", "R", "P(sum) -> R", 2 * 3 * 32 * 4 / 4},
    {"4", 1, 2, {8, 4}, "P(sum)", "S(1)", "P(sum) -> S(1)", 3 * 8 * 4},
    {"4", 0, 2, {8, 4}, "S(0)", "S(1)", "S(0) -> S(1)", 3 * 2 * 1 * 4},
    {"4", 0, 2, {8, 4}, "R", "S(0)", "R -> S(0)", 0},
    {"4", 0, 2, {8, 4}, "R", "P(sum)", "R -> P(sum)", 0},
    {"4", 0, 2, {8, 4}, "S(0)", "P(max)", "S(0) -> R -> P(max)", -1},
    {"4", 0, 2, {8, 4}, "P(sum)", "P(max)", "P(sum) -> R -> P(max)", -1},
    {"4", 0, 2, {8, 4}, "S(-1)", "S(1)", "S(1) (no change)", 0},
    /* 5 rows over 4: shards 2,2,1,0; rank 3 receives all 5 rows */
    {"4", 3, 2, {5, 3}, "S(0)", "R", "S(0) -> R", 5 * 3 * 4},
    /* slice the inner dim first, then gather the outer on the smaller piece */
    {"2x2", 0, 2, {7, 5}, "S(0),R", "R,S(1)", "S(0)R -> S(0)S(1) -> RS(1)", 3 * 3 * 4},
    /* nested: inner shards are gathered before outer ones */
    {"2x2", 0, 2, {8, 4}, "S(0),S(0)", "R,R", "S(0)S(0) -> S(0)R -> RR", -1},
    {"2x2", 0, 2, {8, 4}, "S(0),S(0)", "S(1),S(0)", "S(0)S(0) -> S(0)R -> S(1)R -> S(1)S(0)", -1},
    {"2x2", 0, 2, {8, 4}, "R,S(0)", "S(0),S(0)", "RS(0) -> RR -> S(0)R -> S(0)S(0)", -1},
    {"2x2", 0, 2, {8, 4}, "S(0),S(1)", "S(0),S(0)", "S(0)S(1) -> S(0)S(0)", -1},
    {"2x2", 0, 2, {8, 4}, "S(1),S(0)", "S(0),S(1)", "S(1)S(0) -> S(1)R -> S(0)R -> S(0)S(1)", -1},
    /* no shards in the source: left to right, two reduce-scatters */
    {"2x2",
     0,
     2,
     {8, 4},
     "P(sum),P(sum)",
     "S(0),S(0)",
     "P(sum)P(sum) -> S(0)P(sum) -> S(0)S(0)",
     -1},
    {"2x2", 0, 2, {8, 4}, "P(sum),S(0)", "R,S(0)", "P(sum)S(0) -> RS(0)", -1},
    /* strided shards split last: gathered first, sliced last */
    {"2x2", 0, 2, {8, 4}, "_S(0),S(0)", "R,S(0)", "_S(0)S(0) -> RS(0)", 2 * 4 * 4},
    {"2x2", 0, 2, {8, 4}, "_S(0),S(0)", "R,R", "_S(0)S(0) -> RS(0) -> RR", -1},
    {"2x2", 0, 2, {8, 4}, "R,S(0)", "_S(0),S(0)", "RS(0) -> _S(0)S(0)", 0},
    {"2x2", 0, 2, {8, 4}, "_S(0),S(0)", "_S(0),S(0)", "_S(0)S(0) (no change)", 0},
    {"2x2",
     0,
     2,
     {8, 4},
     "_S(0),S(0)",
     "S(0),S(0)",
     "_S(0)S(0) -> RS(0) -> RR -> S(0)R -> S(0)S(0)",
     -1},
    {"2x1x2",
     0,
     2,
     {3, 2},
     "S(0),R,S(0)",
     "R,S(1),R",
     "S(0)RS(0) -> S(0)RR -> S(0)S(1)R -> RS(1)R",
     16},
};

static dt_status parse_mesh(const char *txt, int rank, dt_mesh **m)
{
    int shape[4], n = 0;
    const char *p = txt;
    while (*p) {
        shape[n++] = (int)strtol(p, (char **)&p, 10);
        if (*p == 'x')
            p++;
    }
    return dt_mesh_create_virtual(n, shape, NULL, rank, m);
}

static void test_plan_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const plan_case *c = &cases[i];
        dt_mesh *m = NULL;
        dt_spec *a = NULL, *b = NULL;
        dt_placement pa[4], pb[4];
        int na, nb;
        char buf[2048];
        assert_int_equal(parse_mesh(c->mesh, c->rank, &m), DT_OK);
        assert_int_equal(dt_placements_parse(c->src, 4, pa, &na), DT_OK);
        assert_int_equal(dt_placements_parse(c->dst, 4, pb, &nb), DT_OK);
        assert_int_equal(dt_spec_create(m, na, pa, c->ndim, c->shape, DT_DTYPE_F32, &a), DT_OK);
        assert_int_equal(dt_spec_create(m, nb, pb, c->ndim, c->shape, DT_DTYPE_F32, &b), DT_OK);
        assert_int_equal(dt_redistribute_explain(a, b, buf, sizeof(buf)), DT_OK);
        size_t l = strcspn(buf, "\n");
        if (strlen(c->chain) != l || strncmp(buf, c->chain, l) != 0)
            fail_msg("case %zu (%s -> %s on %s): got\n%s\nexpected chain %s", i, c->src, c->dst,
                     c->mesh, buf, c->chain);
        if (c->total >= 0) {
            char want[64];
            snprintf(want, sizeof(want), ", %lld bytes received by this rank", (long long)c->total);
            if (strstr(buf, want) == NULL)
                fail_msg("case %zu: expected total %lld in\n%s", i, (long long)c->total, buf);
        }
        dt_spec_release(a);
        dt_spec_release(b);
        dt_mesh_release(m);
    }
}

static void test_plan_errors(void **state)
{
    (void)state;
    int s4[1] = {4}, s22[2] = {2, 2};
    dt_mesh *m4 = NULL, *m4b = NULL, *m22 = NULL;
    dt_spec *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    int64_t shape[2] = {8, 4}, shape2[2] = {8, 5};
    dt_placement r = dt_replicate(), rr[2] = {dt_replicate(), dt_replicate()};
    char buf[256];
    assert_int_equal(dt_mesh_create_virtual(1, s4, NULL, 0, &m4), DT_OK);
    assert_int_equal(dt_mesh_create_virtual(1, s4, NULL, 2, &m4b), DT_OK);
    assert_int_equal(dt_mesh_create_virtual(2, s22, NULL, 0, &m22), DT_OK);
    assert_int_equal(dt_spec_create(m4, 1, &r, 2, shape, DT_DTYPE_F32, &a), DT_OK);
    assert_int_equal(dt_spec_create(m22, 2, rr, 2, shape, DT_DTYPE_F32, &b), DT_OK);
    assert_int_equal(dt_spec_create(m4, 1, &r, 2, shape2, DT_DTYPE_F32, &c), DT_OK);
    assert_int_equal(dt_spec_create(m4b, 1, &r, 2, shape, DT_DTYPE_F32, &d), DT_OK);
    assert_int_equal(dt_redistribute_explain(a, b, buf, sizeof(buf)), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "different meshes"));
    assert_int_equal(dt_redistribute_explain(a, c, buf, sizeof(buf)), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "[8, 5]"));
    /* the same layout seen from another rank is the same mesh */
    assert_int_equal(dt_redistribute_explain(a, d, buf, sizeof(buf)), DT_OK);
    dt_spec_release(a);
    dt_spec_release(b);
    dt_spec_release(c);
    dt_spec_release(d);
    dt_mesh_release(m4);
    dt_mesh_release(m4b);
    dt_mesh_release(m22);
}

/* More distinct plans than the cache holds: cached answers equal fresh ones. */
static void test_plan_cache(void **state)
{
    (void)state;
    int ms[2] = {2, 2};
    dt_mesh *m = NULL, *fresh = NULL;
    assert_int_equal(dt_mesh_create_virtual(2, ms, NULL, 3, &m), DT_OK);
    dt_placement a[2] = {dt_shard(0), dt_shard(1)}, b[2] = {dt_replicate(), dt_shard(0)};
    for (int round = 0; round < 2; round++) {
        for (int64_t rows = 1; rows <= 300; rows++) {
            int64_t shape[2] = {rows, 3};
            dt_spec *sa = NULL, *sb = NULL, *fa = NULL, *fb = NULL;
            dt__plan p1, p2;
            assert_int_equal(dt_spec_create(m, 2, a, 2, shape, DT_DTYPE_F32, &sa), DT_OK);
            assert_int_equal(dt_spec_create(m, 2, b, 2, shape, DT_DTYPE_F32, &sb), DT_OK);
            assert_int_equal(dt__redist_plan(sa, sb, &p1), DT_OK);
            /* a new mesh has an empty cache: this plan is computed afresh */
            assert_int_equal(dt_mesh_create_virtual(2, ms, NULL, 3, &fresh), DT_OK);
            assert_int_equal(dt_spec_create(fresh, 2, a, 2, shape, DT_DTYPE_F32, &fa), DT_OK);
            assert_int_equal(dt_spec_create(fresh, 2, b, 2, shape, DT_DTYPE_F32, &fb), DT_OK);
            assert_int_equal(dt__redist_plan(fa, fb, &p2), DT_OK);
            assert_memory_equal(&p1, &p2, sizeof(p1));
            dt_spec_release(sa);
            dt_spec_release(sb);
            dt_spec_release(fa);
            dt_spec_release(fb);
            dt_mesh_release(fresh);
        }
    }
    dt_mesh_release(m);
}

/* ------------------------------------------------------------ simulator */

typedef struct arr {
    int ndim;
    int64_t shape[3];
    double *v;
} arr;

static int64_t arr_numel(const arr *a)
{
    int64_t n = 1;
    for (int d = 0; d < a->ndim; d++)
        n *= a->shape[d];
    return n;
}

static arr arr_new(int ndim, const int64_t *shape)
{
    arr a = {ndim, {0}, NULL};
    memcpy(a.shape, shape, sizeof(int64_t) * (size_t)ndim);
    a.v = calloc((size_t)arr_numel(&a) + 1, sizeof(double));
    return a;
}

static void idx_of(const arr *a, int64_t i, int64_t *ix)
{
    for (int d = a->ndim - 1; d >= 0; d--) {
        ix[d] = a->shape[d] ? i % a->shape[d] : 0;
        i = a->shape[d] ? i / a->shape[d] : 0;
    }
}

static int64_t lin_of(const arr *a, const int64_t *ix)
{
    int64_t l = 0;
    for (int d = 0; d < a->ndim; d++)
        l = l * a->shape[d] + ix[d];
    return l;
}

/* a[..., off:off+len along d, ...] */
static arr arr_narrow(const arr *a, int d, int64_t off, int64_t len)
{
    int64_t sh[3];
    memcpy(sh, a->shape, sizeof(sh));
    sh[d] = len;
    arr r = arr_new(a->ndim, sh);
    for (int64_t i = 0; i < arr_numel(&r); i++) {
        int64_t ix[3] = {0, 0, 0};
        idx_of(&r, i, ix);
        ix[d] += off;
        r.v[i] = a->v[lin_of(a, ix)];
    }
    return r;
}

/* write src into dst at offset off along d */
static void arr_place(arr *dst, const arr *src, int d, int64_t off)
{
    for (int64_t i = 0; i < arr_numel(src); i++) {
        int64_t ix[3] = {0, 0, 0};
        idx_of(src, i, ix);
        ix[d] += off;
        dst->v[lin_of(dst, ix)] = src->v[i];
    }
}

static double red(dt_reduce_op op, double a, double b)
{
    switch (op) {
    case DT_REDUCE_OP_MAX:
        return a > b ? a : b;
    case DT_REDUCE_OP_MIN:
        return a < b ? a : b;
    default:
        return a + b;
    }
}

typedef struct sim {
    dt_mesh *mesh[8]; /* one virtual mesh per rank */
    int nranks, mesh_ndim, mshape[3];
    arr local[8];
} sim;

/* ranks of the group of mesh dim j that rank r belongs to, by coordinate */
static void group_of(const sim *s, int r, int j, int *members)
{
    int c[4];
    dt_mesh_rank_to_coord(s->mesh[0], r, c);
    for (int q = 0; q < s->mshape[j]; q++) {
        c[j] = q;
        dt_mesh_coord_to_rank(s->mesh[0], c, &members[q]);
    }
}

/* Run step i of every rank's plan (all ranks' plans have the same steps). */
static void sim_step(sim *s, dt__plan *plans, int i)
{
    arr next[8];
    for (int r = 0; r < s->nranks; r++) {
        const dt__step *st = &plans[r].steps[i];
        int j = st->mesh_dim, n = s->mshape[j], me, g[8];
        int c[4];
        dt_mesh_rank_to_coord(s->mesh[0], r, c);
        me = c[j];
        group_of(s, r, j, g);
        const int64_t *L = st->logical_shape;
        int64_t sz, off;
        switch (st->kind) {
        case DT__STEP_ALLGATHER: {
            int d = st->src.dim;
            next[r] = arr_new(s->local[r].ndim, L);
            for (int q = 0; q < n; q++) {
                dt_shard_chunk(L[d], n, q, &sz, &off);
                assert_int_equal(s->local[g[q]].shape[d], sz);
                arr_place(&next[r], &s->local[g[q]], d, off);
            }
            break;
        }
        case DT__STEP_ALLREDUCE:
        case DT__STEP_REDUCE_SCATTER: {
            arr acc = arr_new(s->local[r].ndim, L);
            assert_int_equal(arr_numel(&s->local[r]), arr_numel(&acc));
            for (int64_t e = 0; e < arr_numel(&acc); e++) {
                double v = s->local[g[0]].v[e];
                for (int q = 1; q < n; q++)
                    v = red(st->src.op, v, s->local[g[q]].v[e]);
                acc.v[e] = st->src.op == DT_REDUCE_OP_AVG ? v / n : v;
            }
            if (st->kind == DT__STEP_ALLREDUCE) {
                next[r] = acc;
            } else {
                dt_shard_chunk(L[st->dst.dim], n, me, &sz, &off);
                next[r] = arr_narrow(&acc, st->dst.dim, off, sz);
                free(acc.v);
            }
            break;
        }
        case DT__STEP_ALLTOALL: {
            int a = st->src.dim, b = st->dst.dim;
            int64_t sh[3];
            memcpy(sh, L, sizeof(sh));
            dt_shard_chunk(L[b], n, me, &sz, &off);
            sh[b] = sz;
            next[r] = arr_new(s->local[r].ndim, sh);
            for (int q = 0; q < n; q++) {
                int64_t asz, aoff;
                dt_shard_chunk(L[a], n, q, &asz, &aoff);
                assert_int_equal(s->local[g[q]].shape[a], asz);
                arr piece = arr_narrow(&s->local[g[q]], b, off, sz);
                arr_place(&next[r], &piece, a, aoff);
                free(piece.v);
            }
            break;
        }
        case DT__STEP_SLICE:
            dt_shard_chunk(L[st->dst.dim], n, me, &sz, &off);
            next[r] = arr_narrow(&s->local[r], st->dst.dim, off, sz);
            break;
        case DT__STEP_PARTITION:
            next[r] = arr_narrow(&s->local[r], 0, 0, s->local[r].shape[0]);
            if (st->dst.op == DT_REDUCE_OP_SUM && me != 0)
                memset(next[r].v, 0, sizeof(double) * (size_t)arr_numel(&next[r]));
            break;
        }
    }
    for (int r = 0; r < s->nranks; r++) {
        free(s->local[r].v);
        s->local[r] = next[r];
    }
}

/* The shard of x a rank holds right after dt_distribute with spec sp. */
static arr distribute_local(const arr *x, const dt_spec *sp)
{
    int64_t ls[3], off[3];
    int c[4];
    dt_mesh *m = dt_spec_mesh(sp);
    dt_mesh_coordinate(m, c);
    dt_spec_local_shape(sp, NULL, ls, off);
    arr a = {x->ndim, {0}, x->v}, t;
    memcpy(a.shape, x->shape, sizeof(a.shape));
    arr cur = arr_narrow(&a, 0, 0, a.shape[0]);
    for (int d = 0; d < x->ndim; d++) {
        t = arr_narrow(&cur, d, off[d], ls[d]);
        free(cur.v);
        cur = t;
    }
    const dt_placement *pl = dt_spec_placements(sp);
    for (int k = 0; k < dt_mesh_ndim(m); k++)
        if (pl[k].kind == DT_PLACEMENT_PARTIAL && pl[k].op == DT_REDUCE_OP_SUM && c[k] != 0)
            memset(cur.v, 0, sizeof(double) * (size_t)arr_numel(&cur));
    return cur;
}

/* Every rank's value, reduced over the Partial mesh dims, is its slice of x. */
static void check_value(const sim *s, const arr *x, dt_spec **dst, const char *what)
{
    const dt_placement *pl = dt_spec_placements(dst[0]);
    for (int r = 0; r < s->nranks; r++) {
        int64_t ls[3], off[3];
        dt_spec_local_shape(dst[r], NULL, ls, off);
        arr want = arr_narrow(x, 0, 0, x->shape[0]), t;
        for (int d = 0; d < x->ndim; d++) {
            t = arr_narrow(&want, d, off[d], ls[d]);
            free(want.v);
            want = t;
        }
        if (arr_numel(&want) != arr_numel(&s->local[r]) ||
            memcmp(want.shape, s->local[r].shape, sizeof(int64_t) * (size_t)x->ndim) != 0)
            fail_msg("%s: rank %d local shape differs", what, r);
        /* reduce over the ranks that differ from r only on Partial mesh dims */
        int cr[4], cq[4];
        dt_mesh_rank_to_coord(s->mesh[0], r, cr);
        arr acc = arr_narrow(&s->local[r], 0, 0, s->local[r].shape[0]);
        int count = 1;
        dt_reduce_op op = DT_REDUCE_OP_SUM;
        for (int q = 0; q < s->nranks; q++) {
            if (q == r)
                continue;
            dt_mesh_rank_to_coord(s->mesh[0], q, cq);
            bool same = true;
            for (int k = 0; k < s->mesh_ndim; k++)
                same = same && (pl[k].kind == DT_PLACEMENT_PARTIAL || cq[k] == cr[k]);
            if (!same)
                continue;
            for (int k = 0; k < s->mesh_ndim; k++)
                if (pl[k].kind == DT_PLACEMENT_PARTIAL)
                    op = pl[k].op;
            for (int64_t e = 0; e < arr_numel(&acc); e++)
                acc.v[e] = red(op, acc.v[e], s->local[q].v[e]);
            count++;
        }
        for (int k = 0; k < s->mesh_ndim; k++)
            if (pl[k].kind == DT_PLACEMENT_PARTIAL)
                op = pl[k].op;
        for (int64_t e = 0; e < arr_numel(&acc); e++) {
            double v = op == DT_REDUCE_OP_AVG ? acc.v[e] / count : acc.v[e];
            if (v != want.v[e])
                fail_msg("%s: rank %d element %lld is %g, expected %g", what, r, (long long)e, v,
                         want.v[e]);
        }
        free(acc.v);
        free(want.v);
    }
}

static int enum_placements(int ndim, int mesh_ndim, bool all_ops, dt_placement (*out)[3])
{
    dt_placement opts[12];
    int no = 0;
    opts[no++] = dt_replicate();
    for (int d = 0; d < ndim; d++)
        opts[no++] = dt_shard(d);
    opts[no++] = dt_partial(DT_REDUCE_OP_SUM);
    opts[no++] = dt_partial(DT_REDUCE_OP_MAX);
    if (all_ops) {
        opts[no++] = dt_partial(DT_REDUCE_OP_AVG);
        opts[no++] = dt_partial(DT_REDUCE_OP_MIN);
    }
    int total = 1, n = 0;
    for (int k = 0; k < mesh_ndim; k++)
        total *= no;
    for (int i = 0; i < total; i++) {
        int v = i, pop = -1;
        bool ok = true;
        for (int k = mesh_ndim - 1; k >= 0; k--) {
            out[n][k] = opts[v % no];
            v /= no;
            if (out[n][k].kind == DT_PLACEMENT_PARTIAL) {
                ok = ok && (pop < 0 || pop == (int)out[n][k].op);
                pop = (int)out[n][k].op;
            }
        }
        n += ok;
    }
    return n;
}

static void run_exhaustive(int mesh_ndim, const int *mshape, int ndim, const int64_t *shape,
                           bool all_ops)
{
    sim s;
    memset(&s, 0, sizeof(s));
    s.mesh_ndim = mesh_ndim;
    s.nranks = 1;
    for (int k = 0; k < mesh_ndim; k++) {
        s.mshape[k] = mshape[k];
        s.nranks *= mshape[k];
    }
    for (int r = 0; r < s.nranks; r++)
        assert_int_equal(dt_mesh_create_virtual(mesh_ndim, mshape, NULL, r, &s.mesh[r]), DT_OK);
    arr x = arr_new(ndim, shape);
    for (int64_t e = 0; e < arr_numel(&x); e++)
        x.v[e] = (double)((e * 7) % 23) - 11.0; /* integers: sums and avgs stay exact */
    static dt_placement lists[4096][3];
    int nl = enum_placements(ndim, mesh_ndim, all_ops, lists);
    dt__plan plans[8];
    dt_spec *src[8], *dst[8];
    for (int a = 0; a < nl; a++) {
        for (int b = 0; b < nl; b++) {
            char what[160], t1[64], t2[64];
            dt_placements_format(mesh_ndim, lists[a], "", t1, sizeof(t1));
            dt_placements_format(mesh_ndim, lists[b], "", t2, sizeof(t2));
            snprintf(what, sizeof(what), "%s -> %s", t1, t2);
            for (int r = 0; r < s.nranks; r++) {
                assert_int_equal(dt_spec_create(s.mesh[r], mesh_ndim, lists[a], ndim, shape,
                                                DT_DTYPE_F32, &src[r]),
                                 DT_OK);
                assert_int_equal(dt_spec_create(s.mesh[r], mesh_ndim, lists[b], ndim, shape,
                                                DT_DTYPE_F32, &dst[r]),
                                 DT_OK);
                assert_int_equal(dt__redist_plan(src[r], dst[r], &plans[r]), DT_OK);
                s.local[r] = distribute_local(&x, src[r]);
            }
            for (int r = 1; r < s.nranks; r++) {
                assert_int_equal(plans[r].n_steps, plans[0].n_steps);
                for (int i = 0; i < plans[0].n_steps; i++)
                    assert_int_equal(plans[r].steps[i].kind, plans[0].steps[i].kind);
            }
            for (int i = 0; i < plans[0].n_steps; i++)
                sim_step(&s, plans, i);
            check_value(&s, &x, dst, what);
            for (int r = 0; r < s.nranks; r++) {
                free(s.local[r].v);
                dt_spec_release(src[r]);
                dt_spec_release(dst[r]);
            }
        }
    }
    free(x.v);
    for (int r = 0; r < s.nranks; r++)
        dt_mesh_release(s.mesh[r]);
}

static void test_exhaustive_1d(void **state)
{
    (void)state;
    int64_t shapes[][2] = {{7, 5}, {1, 3}, {3, 1}, {0, 2}, {4, 4}};
    for (int m = 2; m <= 4; m++) {
        int ms[1] = {m};
        for (int i = 0; i < 5; i++)
            run_exhaustive(1, ms, 2, shapes[i], true);
    }
    int64_t s3[3] = {3, 5, 2};
    int ms[1] = {3};
    run_exhaustive(1, ms, 3, s3, true);
}

static void test_exhaustive_2d(void **state)
{
    (void)state;
    int meshes[][2] = {{2, 2}, {1, 3}, {3, 1}};
    int64_t shapes[][2] = {{7, 5}, {1, 3}, {3, 1}, {5, 2}};
    for (int m = 0; m < 3; m++)
        for (int i = 0; i < 4; i++)
            run_exhaustive(2, meshes[m], 2, shapes[i], true);
    int64_t s3[3] = {3, 5, 2};
    run_exhaustive(2, meshes[0], 3, s3, false);
}

static void test_exhaustive_3d(void **state)
{
    (void)state;
    int mesh[3] = {2, 1, 2};
    int64_t shapes[][2] = {{7, 5}, {1, 3}, {3, 2}};
    for (int i = 0; i < 3; i++)
        run_exhaustive(3, mesh, 2, shapes[i], false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_table),    cmocka_unit_test(test_plan_errors),
        cmocka_unit_test(test_plan_cache),    cmocka_unit_test(test_exhaustive_1d),
        cmocka_unit_test(test_exhaustive_2d), cmocka_unit_test(test_exhaustive_3d),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
