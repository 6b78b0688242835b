/*
 * A world of one process (no launcher): dt_init needs no store and no
 * transport, every collective is a local copy (or no-op), point-to-point to
 * rank 0 matches in memory, and splits give one-rank comms.
 */
#include "comm_test_util.h"

static void test_self_world(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    assert_int_equal(dt_runtime_size(ct_rt), 1);
    assert_int_equal(dt_runtime_rank(ct_rt), 0);
    assert_int_equal(dt_comm_size(w), 1);
    assert_string_equal(dt_comm_backend(w), "self");
    assert_null(dt_runtime_store(ct_rt));

    for (size_t d = 0; d < CT_NDTYPES; d++) {
        dt_dtype dt = ct_dtypes[d];
        for (int op = 0; op < DT_REDUCE_OP_COUNT; op++) {
            size_t n = 4095;
            void *a = ct_alloc(n, dt), *b = ct_alloc(n, dt), *want = ct_alloc(n, dt);
            ct_fill(a, n, 0, dt, 0, (dt_reduce_op)op);
            ct_want(want, n, 0, dt, 1, (dt_reduce_op)op);
            CT_OK(dt_comm_allreduce(w, a, b, n, dt, (dt_reduce_op)op, NULL));
            ct_expect_equal(b, want, n, dt, "self allreduce");
            CT_OK(dt_comm_reduce_scatter(w, a, b, n, dt, (dt_reduce_op)op, NULL));
            ct_expect_equal(b, want, n, dt, "self reduce_scatter");
            free(a);
            free(b);
            free(want);
        }
    }
    int32_t x[5] = {1, 2, 3, 4, 5}, y[5] = {0};
    CT_OK(dt_comm_allgather(w, x, y, 5, DT_DTYPE_I32, NULL));
    assert_memory_equal(x, y, sizeof(x));
    memset(y, 0, sizeof(y));
    CT_OK(dt_comm_alltoall(w, x, y, 5, DT_DTYPE_I32, NULL));
    assert_memory_equal(x, y, sizeof(x));
    CT_OK(dt_comm_broadcast(w, x, 5, DT_DTYPE_I32, 0, NULL));
    CT_OK(dt_comm_barrier(w, NULL));
    dt_work *work = NULL;
    CT_OK(dt_comm_barrier(w, &work));
    bool done = false;
    CT_OK(dt_work_test(work, &done));
    assert_true(done);
    dt_work_release(work);
}

static void test_self_p2p(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    int32_t a[3] = {7, 8, 9}, b[3] = {0}, c[3] = {0};
    dt_work *r1 = NULL, *r2 = NULL;
    CT_OK(dt_comm_recv(w, b, 3, DT_DTYPE_I32, 0, 4, &r1));
    CT_OK(dt_comm_recv(w, c, 3, DT_DTYPE_I32, 0, 4, &r2));
    bool done = true;
    CT_OK(dt_work_test(r1, &done));
    assert_false(done);
    CT_OK(dt_comm_send(w, a, 3, DT_DTYPE_I32, 0, 4, NULL));
    a[0] = 70;
    CT_OK(dt_comm_send(w, a, 3, DT_DTYPE_I32, 0, 4, NULL));
    CT_OK(dt_work_wait(r1, -1));
    CT_OK(dt_work_wait(r2, -1));
    assert_int_equal(b[0], 7);
    assert_int_equal(c[0], 70);
    dt_work_release(r1);
    dt_work_release(r2);
    dt_comm *sub = NULL;
    CT_OK(dt_comm_split(w, 0, 0, &sub));
    assert_int_equal(dt_comm_size(sub), 1);
    dt_comm_destroy(sub);
    CT_OK(dt_comm_split(w, DT_COMM_SPLIT_NOCOLOR, 0, &sub));
    assert_null(sub);
    /* a receive nobody sends to times out, naming the peer, and aborts its
     * comm (a duplicate with a family of its own: the world goes on) */
    sub = ct_isolated_dup();
    CT_OK(dt_comm_recv(sub, b, 3, DT_DTYPE_I32, 0, 9, &r1));
    assert_int_equal(dt_work_wait(r1, 0.05), DT_ERR_TIMEOUT);
    assert_non_null(strstr(dt_last_error(), "rank 0"));
    dt_work_release(r1);
    ct_expect_aborted(sub, DT_ERR_TIMEOUT);
}

int main(void)
{
    /* a single process even when started from a launcher's environment */
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMI_RANK");
    unsetenv("PMI_SIZE");
    unsetenv("SLURM_PROCID");
    unsetenv("SLURM_NTASKS");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_self_world),
        cmocka_unit_test(test_self_p2p),
    };
    return cmocka_run_group_tests(tests, ct_setup, ct_teardown);
}
