/*
 * No error path waits a second timeout (run with DT_TIMEOUT_S=5): the last
 * rank stops answering (sleeps 7 s) while the others wait, one by one, for
 * ten reductions in flight - as ZeRO's gradient finish does per parameter.
 * The first wait times out after 5 s and aborts the family; the other nine
 * fail at once, so the batch fails in under 2x the timeout, not 10x. The
 * sleeper, back, fails at once too: its family was aborted meanwhile.
 */
#include <unistd.h>

#include "failure/failure_util.h"

#define NWORK 10

static void test_one_deadline(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    float x[NWORK][4] = {{0}};
    CT_OK(dt_comm_barrier(w, NULL));
    if (me == p - 1)
        sleep(7);
    double t0 = ft_now();
    dt_work *work[NWORK] = {NULL};
    dt_status first = DT_OK;
    for (int i = 0; i < NWORK && first == DT_OK; i++)
        first = dt_comm_allreduce(w, x[i], x[i], 4, DT_DTYPE_F32, DT_REDUCE_OP_SUM, &work[i]);
    for (int i = 0; i < NWORK; i++) {
        dt_status st = work[i] != NULL ? dt_work_wait(work[i], -1) : DT_OK;
        if (first == DT_OK)
            first = st;
        dt_work_release(work[i]);
    }
    if (me == p - 1 && first == DT_OK) /* all it needed was already here: the next call */
        first = dt_comm_barrier(w, NULL);
    ft_expect_failed(first, t0, me == p - 1 ? 2.0 : 9.5, "ten waits after a stuck peer");
    assert_int_equal(first, DT_ERR_TIMEOUT);
    if (strstr(dt_last_error(), "timed out") == NULL)
        fail_msg("not the timeout's message: %s", dt_last_error());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_deadline),
    };
    return cmocka_run_group_tests(tests, ct_setup, ct_teardown);
}
