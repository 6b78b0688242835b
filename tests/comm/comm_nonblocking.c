/*
 * Non-blocking collectives: several in flight at once on one comm (each gets
 * its own sequence tag), completed in a different order than posted, driven
 * only by dt_work_test while the rank computes, and released without a wait.
 */
#include "comm_test_util.h"

enum { N = (1 << 18) + 5 };

static void test_many_in_flight(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    const size_t c = N / (size_t)p;
    float *ar = ct_alloc(N, DT_DTYPE_F32), *ar_want = ct_alloc(N, DT_DTYPE_F32);
    float *ag_in = ct_alloc(c, DT_DTYPE_F32), *ag = ct_alloc(c * p, DT_DTYPE_F32);
    float *rs_in = ct_alloc(c * p, DT_DTYPE_F32), *rs = ct_alloc(c, DT_DTYPE_F32);
    float *rs_want = ct_alloc(c, DT_DTYPE_F32), *ag_want = ct_alloc(c * p, DT_DTYPE_F32);
    int64_t small = me, small_want = (int64_t)p * (p - 1) / 2;
    ct_fill(ar, N, 0, DT_DTYPE_F32, me, DT_REDUCE_OP_SUM);
    ct_want(ar_want, N, 0, DT_DTYPE_F32, p, DT_REDUCE_OP_SUM);
    ct_fill(ag_in, c, 0, DT_DTYPE_F32, me, DT_REDUCE_OP_MAX);
    for (int r = 0; r < p; r++)
        ct_fill(ag_want + (size_t)r * c, c, 0, DT_DTYPE_F32, r, DT_REDUCE_OP_MAX);
    ct_fill(rs_in, c * p, 0, DT_DTYPE_F32, me, DT_REDUCE_OP_MIN);
    ct_want(rs_want, c, (size_t)me * c, DT_DTYPE_F32, p, DT_REDUCE_OP_MIN);

    dt_work *wk[5] = {NULL};
    CT_OK(dt_comm_allreduce(w, ar, ar, N, DT_DTYPE_F32, DT_REDUCE_OP_SUM, &wk[0]));
    CT_OK(dt_comm_allgather(w, ag_in, ag, c, DT_DTYPE_F32, &wk[1]));
    CT_OK(dt_comm_reduce_scatter(w, rs_in, rs, c, DT_DTYPE_F32, DT_REDUCE_OP_MIN, &wk[2]));
    CT_OK(dt_comm_allreduce(w, &small, &small, 1, DT_DTYPE_I64, DT_REDUCE_OP_SUM, &wk[3]));
    CT_OK(dt_comm_barrier(w, &wk[4]));

    /* compute while polling: test alone must drive everything to completion */
    volatile double acc = 0;
    bool all = false;
    for (long it = 0; !all; it++) {
        for (int k = 0; k < 20000; k++)
            acc += k * 1e-9;
        all = true;
        for (int k = 4; k >= 0; k--) {
            bool done = false;
            CT_OK(dt_work_test(wk[k], &done));
            all = all && done;
        }
        if (it > 10000000)
            fail_msg("non-blocking collectives did not finish by polling");
    }
    for (int k = 0; k < 5; k++) {
        CT_OK(dt_work_wait(wk[k], -1)); /* finished: returns at once */
        dt_work_release(wk[k]);
    }
    ct_expect_equal(ar, ar_want, N, DT_DTYPE_F32, "allreduce in flight");
    ct_expect_equal(ag, ag_want, c * p, DT_DTYPE_F32, "allgather in flight");
    ct_expect_equal(rs, rs_want, c, DT_DTYPE_F32, "reduce_scatter in flight");
    assert_int_equal(small, small_want);

    /* release without waiting: it completes the work first */
    ct_fill(ar, N, 0, DT_DTYPE_F32, me, DT_REDUCE_OP_SUM);
    dt_work *late = NULL;
    CT_OK(dt_comm_allreduce(w, ar, ar, N, DT_DTYPE_F32, DT_REDUCE_OP_SUM, &late));
    dt_work_release(late);
    ct_expect_equal(ar, ar_want, N, DT_DTYPE_F32, "allreduce released");
    dt_work_release(NULL);
    free(ar);
    free(ar_want);
    free(ag_in);
    free(ag);
    free(rs_in);
    free(rs);
    free(rs_want);
    free(ag_want);
}

/* @p k all-reduces of @p n doubles posted in one order on two comms and
 * waited for in the reverse one. */
static void reverse_wait_two_comms(int k, int n)
{
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    dt_comm *dup = NULL;
    CT_OK(dt_comm_split(w, 0, me, &dup));
    double *x = malloc((size_t)k * (size_t)n * sizeof(double));
    dt_work **wk = malloc((size_t)k * sizeof(*wk));
    for (int j = 0; j < k; j++) {
        for (int i = 0; i < n; i++)
            x[j * n + i] = me * (j + 1) + i;
        CT_OK(dt_comm_allreduce(j % 2 ? dup : w, x + j * n, x + j * n, (size_t)n, DT_DTYPE_F64,
                                DT_REDUCE_OP_SUM, &wk[j]));
    }
    for (int j = k - 1; j >= 0; j--) {
        CT_OK(dt_work_wait(wk[j], -1));
        dt_work_release(wk[j]);
        for (int i = 0; i < n; i++)
            assert_true(x[j * n + i] == (double)(j + 1) * p * (p - 1) / 2 + (double)p * i);
    }
    free(wk);
    free(x);
    dt_comm_destroy(dup);
}

/* 8000-byte messages: UCX's path. */
static void test_reverse_wait_two_comms(void **state)
{
    (void)state;
    reverse_wait_two_comms(6, 1000);
}

/* 24-byte messages, more in flight than a shared-memory ring has slots:
 * they arrive before their receives are posted (ucx_shm.c). */
static void test_reverse_wait_two_comms_small(void **state)
{
    (void)state;
    reverse_wait_two_comms(40, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_in_flight),
        cmocka_unit_test(test_reverse_wait_two_comms),
        cmocka_unit_test(test_reverse_wait_two_comms_small),
    };
    return cmocka_run_group_tests(tests, ct_setup, ct_teardown);
}
