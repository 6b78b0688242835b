/*
 * All-reduce on every dtype, reduce op and size (0, 1, 7, 4095, 1 MiB + 3
 * elements), with the automatic algorithm and each one forced (dt_comm_set_algo),
 * out of place and in place, blocking and non-blocking, against a reference
 * each rank computes locally.
 */
#include "comm_test_util.h"

static const char *const algos[] = {NULL, "allreduce:ring", "allreduce:recursive_doubling",
                                    "allreduce:direct"};

static void check_one(dt_comm *w, dt_dtype dt, dt_reduce_op op, size_t n, const void *want)
{
    const int rank = dt_comm_rank(w);
    void *send = ct_alloc(n, dt), *recv = ct_alloc(n, dt);
    char what[160];
    /* 1 MiB: every (dtype, op) with the automatic choice; the forced algorithms and the
     * in-place form on a few, to keep the suite fast on oversubscribed runs */
    const bool big = n > 100000;
    const bool all_forms = !big || (dt == DT_DTYPE_F32 && op == DT_REDUCE_OP_SUM) ||
                           (dt == DT_DTYPE_BF16 && op == DT_REDUCE_OP_AVG) ||
                           (dt == DT_DTYPE_I64 && op == DT_REDUCE_OP_MAX);
    for (size_t a = 0; a < (all_forms ? sizeof(algos) / sizeof(algos[0]) : 1); a++) {
        if (big && algos[a] != NULL && strcmp(algos[a], "allreduce:direct") == 0)
            continue; /* (p-1) x 4 MiB per rank; the automatic choice uses it for small only */
        if (algos[a] != NULL)
            CT_OK(dt_comm_set_algo(w, algos[a]));
        else
            CT_OK(dt_comm_set_algo(w, NULL));
        snprintf(what, sizeof(what), "allreduce %s %s n=%zu algo=%s", dt_reduce_op_name(op),
                 dt_dtype_name(dt), n, algos[a] ? algos[a] : "auto");
        ct_fill(send, n, 0, dt, rank, op);
        CT_OK(dt_comm_allreduce(w, send, recv, n, dt, op, NULL));
        ct_expect_equal(recv, want, n, dt, what);
        if (!all_forms)
            continue;
        /* in place, non-blocking */
        ct_fill(recv, n, 0, dt, rank, op);
        dt_work *work = NULL;
        CT_OK(dt_comm_allreduce(w, recv, recv, n, dt, op, &work));
        CT_OK(dt_work_wait(work, -1));
        dt_work_release(work);
        ct_expect_equal(recv, want, n, dt, what);
    }
    CT_OK(dt_comm_set_algo(w, NULL));
    free(send);
    free(recv);
}

static void test_allreduce_all(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w);
    for (size_t d = 0; d < CT_NDTYPES; d++) {
        for (int op = 0; op < DT_REDUCE_OP_COUNT; op++) {
            for (size_t s = 0; s < CT_NSIZES; s++) {
                size_t n = ct_sizes[s];
                void *want = ct_alloc(n, ct_dtypes[d]);
                ct_want(want, n, 0, ct_dtypes[d], p, (dt_reduce_op)op);
                check_one(w, ct_dtypes[d], (dt_reduce_op)op, n, want);
                free(want);
            }
        }
    }
}

/* Bad arguments fail on every rank before any traffic, naming the value. */
static void test_allreduce_bad_args(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    float x[4] = {0};
    assert_int_equal(dt_comm_allreduce(w, x, x, 4, (dt_dtype)99, DT_REDUCE_OP_SUM, NULL),
                     DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "99"));
    assert_int_equal(dt_comm_allreduce(w, x, x, 4, DT_DTYPE_F32, (dt_reduce_op)7, NULL),
                     DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "7"));
    assert_int_equal(dt_comm_allreduce(w, NULL, x, 4, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL),
                     DT_ERR_INVALID_ARG);
    assert_int_equal(dt_comm_allreduce(w, x, x, 4, DT_DTYPE_U8, DT_REDUCE_OP_SUM, NULL),
                     DT_ERR_UNSUPPORTED);
    assert_int_equal(dt_comm_allreduce(NULL, x, x, 4, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL),
                     DT_ERR_INVALID_ARG);
    CT_OK(dt_comm_set_algo(w, "allreduce:bogus"));
    assert_int_equal(dt_comm_allreduce(w, x, x, 4, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL),
                     DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "bogus"));
    CT_OK(dt_comm_set_algo(w, NULL));
    /* the comm still works afterwards */
    CT_OK(dt_comm_allreduce(w, x, x, 4, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce_all),
        cmocka_unit_test(test_allreduce_bad_args),
    };
    return cmocka_run_group_tests(tests, ct_setup, ct_teardown);
}
