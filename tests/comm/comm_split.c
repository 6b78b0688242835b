/*
 * Splitting the world the way an n-d mesh does (one comm per mesh dim: color
 * = coordinates on the other dims, key = coordinate on this dim) for every
 * 2-d factorisation of the world size (2x2, 2x3, 3x2, 2x4, ...) and 2x2x2,
 * then collectives on the groups - including two groups' collectives in
 * flight at once, which must not cross-talk. Plus key ordering, NOCOLOR and
 * splitting a split.
 */
#include "comm_test_util.h"

/* Sum over the group of world ranks; the group's world ranks in group order. */
static void check_group(dt_comm *g, const int *world_ranks, int n, const char *what)
{
    assert_non_null(g);
    assert_int_equal(dt_comm_size(g), n);
    int64_t mine = dt_runtime_rank(ct_rt), sum = 0;
    for (int i = 0; i < n; i++)
        sum += world_ranks[i];
    int64_t got = -1;
    CT_OK(dt_comm_allreduce(g, &mine, &got, 1, DT_DTYPE_I64, DT_REDUCE_OP_SUM, NULL));
    if (got != sum)
        fail_msg("%s: sum of world ranks %lld, want %lld", what, (long long)got, (long long)sum);
    int64_t *all = calloc((size_t)n, sizeof(int64_t));
    CT_OK(dt_comm_allgather(g, &mine, all, 1, DT_DTYPE_I64, NULL));
    for (int i = 0; i < n; i++)
        if (all[i] != world_ranks[i])
            fail_msg("%s: group rank %d is world rank %lld, want %d", what, i, (long long)all[i],
                     world_ranks[i]);
    free(all);
}

static void test_split_2d(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    char what[96];
    int *ranks = calloc((size_t)p, sizeof(int));
    for (int a = 1; a <= p; a++) {
        if (p % a != 0)
            continue;
        const int b = p / a, i = me / b, j = me % b; /* mesh a x b, row-major */
        dt_comm *row = NULL, *col = NULL;
        CT_OK(dt_comm_split(w, i, j, &row));
        CT_OK(dt_comm_split(w, j, i, &col));
        assert_int_equal(dt_comm_rank(row), j);
        assert_int_equal(dt_comm_rank(col), i);
        for (int k = 0; k < b; k++)
            ranks[k] = i * b + k;
        snprintf(what, sizeof(what), "%dx%d mesh, dim 1 group", a, b);
        check_group(row, ranks, b, what);
        for (int k = 0; k < a; k++)
            ranks[k] = k * b + j;
        snprintf(what, sizeof(what), "%dx%d mesh, dim 0 group", a, b);
        check_group(col, ranks, a, what);
        /* both dims at once, non-blocking: same tags on two comms must not mix */
        float xr[33], xc[33];
        for (int k = 0; k < 33; k++) {
            xr[k] = (float)(me + k);
            xc[k] = (float)(2 * me - k);
        }
        dt_work *wr = NULL, *wc = NULL;
        CT_OK(dt_comm_allreduce(row, xr, xr, 33, DT_DTYPE_F32, DT_REDUCE_OP_SUM, &wr));
        CT_OK(dt_comm_allreduce(col, xc, xc, 33, DT_DTYPE_F32, DT_REDUCE_OP_MAX, &wc));
        CT_OK(dt_work_wait(wc, -1));
        CT_OK(dt_work_wait(wr, -1));
        dt_work_release(wr);
        dt_work_release(wc);
        for (int k = 0; k < 33; k++) {
            float want_r = 0, want_c = -1e30f;
            for (int q = 0; q < b; q++)
                want_r += (float)(i * b + q + k);
            for (int q = 0; q < a; q++)
                want_c =
                    (float)(2 * (q * b + j) - k) > want_c ? (float)(2 * (q * b + j) - k) : want_c;
            assert_true(xr[k] == want_r);
            assert_true(xc[k] == want_c);
        }
        dt_comm_destroy(row);
        dt_comm_destroy(col);
    }
    free(ranks);
}

/* 2x2x2 (8 ranks): a comm per dim, and the 2-d sub-meshes' flattened groups. */
static void test_split_3d(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    if (p != 8)
        skip();
    const int c[3] = {me / 4, (me / 2) % 2, me % 2};
    for (int d = 0; d < 3; d++) {
        int color = 0, key = c[d];
        for (int e = 0; e < 3; e++)
            if (e != d)
                color = color * 2 + c[e];
        dt_comm *g = NULL;
        CT_OK(dt_comm_split(w, color, key, &g));
        int ranks[2];
        for (int k = 0; k < 2; k++) {
            int cc[3] = {c[0], c[1], c[2]};
            cc[d] = k;
            ranks[k] = cc[0] * 4 + cc[1] * 2 + cc[2];
        }
        check_group(g, ranks, 2, "2x2x2 mesh dim group");
        dt_comm_destroy(g);
    }
}

static void test_split_order_nocolor_nested(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    int *ranks = calloc((size_t)p, sizeof(int));
    /* keys reverse the order */
    dt_comm *rev = NULL;
    CT_OK(dt_comm_split(w, 0, -me, &rev));
    for (int k = 0; k < p; k++)
        ranks[k] = p - 1 - k;
    check_group(rev, ranks, p, "reversed keys");
    /* equal keys keep the old order */
    dt_comm *same = NULL;
    CT_OK(dt_comm_split(rev, 3, 0, &same));
    check_group(same, ranks, p, "equal keys");
    /* odd ranks opt out */
    dt_comm *even = NULL;
    CT_OK(dt_comm_split(w, me % 2 ? DT_COMM_SPLIT_NOCOLOR : 7, me, &even));
    int n = 0;
    for (int k = 0; k < p; k += 2)
        ranks[n++] = k;
    if (me % 2)
        assert_null(even);
    else
        check_group(even, ranks, n, "even ranks");
    /* split of a split: the even ranks halve again */
    if (!(me % 2) && n >= 2) {
        dt_comm *half = NULL;
        int er = dt_comm_rank(even);
        CT_OK(dt_comm_split(even, er < n / 2, er, &half));
        int m = 0;
        for (int k = 0; k < n; k++)
            if ((k < n / 2) == (er < n / 2))
                ranks[m++] = 2 * k;
        check_group(half, ranks, m, "split of a split");
        dt_comm_destroy(half);
    }
    assert_int_equal(dt_comm_split(w, -5, 0, &rev), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "-5"));
    dt_comm_destroy(even);
    dt_comm_destroy(same);
    dt_comm_destroy(rev);
    free(ranks);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_2d),
        cmocka_unit_test(test_split_3d),
        cmocka_unit_test(test_split_order_nocolor_nested),
    };
    return cmocka_run_group_tests(tests, ct_setup, ct_teardown);
}
