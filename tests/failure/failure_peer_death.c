/*
 * A rank dies (exits) while the others hold non-blocking work they release
 * without waiting: the failure the release meets is not lost (no warning
 * while training goes on): every survivor's next call fails at once with
 * DT_ERR_PEER_LOST naming the dead world rank, within seconds.
 */
#include <unistd.h>

#include "failure/failure_util.h"

static void test_released_work_then_death(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w), victim = p - 1;
    float x[16] = {0};
    CT_OK(dt_comm_allreduce(w, x, x, 16, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL)); /* wired up */
    if (me == victim) {
        fflush(stdout);
        _exit(0); /* gone, mid-job; dtrun keeps the others running */
    }
    double t0 = ft_now();
    dt_work *work = NULL;
    dt_status st = dt_comm_allreduce(w, x, x, 16, DT_DTYPE_F32, DT_REDUCE_OP_SUM, &work);
    if (st == DT_OK) {
        bool done = false;
        (void)dt_work_test(work, &done);
        dt_work_release(work); /* never waited for by the caller */
    }
    st = dt_comm_allreduce(w, x, x, 16, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL);
    ft_expect_failed(st, t0, 10.0, "next call after the death");
    assert_int_equal(st, DT_ERR_PEER_LOST);
    char dead[32];
    snprintf(dead, sizeof(dead), "world rank %d", victim);
    if (strstr(dt_last_error(), dead) == NULL)
        fail_msg("the error does not name the dead %s: %s", dead, dt_last_error());
    /* and everything after it, at once */
    t0 = ft_now();
    assert_int_equal(dt_comm_barrier(w, NULL), DT_ERR_PEER_LOST);
    assert_int_equal(dt_comm_status(w), DT_ERR_PEER_LOST);
    assert_true(ft_now() - t0 < 1.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_released_work_then_death),
    };
    return cmocka_run_group_tests(tests, ct_setup, ct_teardown);
}
