/*
 * Small messages between ranks of one host, which travel through the
 * shared-memory rings of the UCX backend (ucx_shm.c) unless DT_SHM=0 (the
 * same tests then run on UCX's own path: ctest's comm_small_messages_noshm):
 * more messages in flight than a ring has slots, messages that arrive before
 * their receive is posted, matching per (comm, tag) in posting order, both
 * sides of the 4080-byte limit under one tag, and a length mismatch that
 * fails with both sizes named instead of hanging. (Small collectives waited
 * for out of order: comm_nonblocking.)
 */
#include "comm_test_util.h"

#include "comm/ucx/ucx_impl.h"

enum { NMSG = 80 }; /* ~380 ring slots: more than a ring holds */

/* Bytes of message @p m: both sides of DT_UCX_SHM_MAX_BYTES, some tiny. */
static size_t msg_len(int m)
{
    static const size_t lens[] = {8, 1, 4080, 4081, 64, 5000, 200, 4000};
    return lens[m % 8];
}

/* The rings are in use exactly when DT_SHM is not 0 (all ranks run here). */
static void test_rings_in_use(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    if (dt_comm_size(w) == 1)
        skip();
    const dt_ucx_shared *sh = ((dt_ucx_comm *)w->impl)->shared;
    const char *env = getenv("DT_SHM");
    bool want = env == NULL || strcmp(env, "0") != 0;
    int peer = (dt_comm_rank(w) + 1) % dt_comm_size(w);
    assert_int_equal(dt__ucx_shm_carries(sh, peer), want);
}

/* Every rank sends NMSG messages to its right on two comms with one tag
 * before it posts a receive; they must arrive intact and in order. */
static void test_sent_before_received(void **state)
{
    (void)state;
    size_t lens[NMSG];
    for (int m = 0; m < NMSG; m++)
        lens[m] = msg_len(m);
    ct_sent_before_received(lens, NMSG, 3, 9);
}

/* Rank 0 sends 8 bytes where rank 1 expects 12: rank 1 gets an error naming
 * both lengths, nobody waits for a timeout, and the comm is aborted on every
 * rank (later calls fail at once naming rank 1); the world goes on. */
static void test_length_mismatch(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int me = dt_comm_rank(w);
    if (dt_comm_size(w) < 2)
        skip();
    dt_comm *c = ct_isolated_dup();
    int32_t buf[3] = {1, 2, 3};
    if (me == 0) {
        dt_status st = dt_comm_send(c, buf, 2, DT_DTYPE_I32, 1, 11, NULL);
        assert_true(st == DT_OK || st == DT_ERR_INVALID_ARG); /* the abort may come first */
    }
    if (me == 1) {
        dt_status st = dt_comm_recv(c, buf, 3, DT_DTYPE_I32, 0, 11, NULL);
        assert_int_equal(st, DT_ERR_INVALID_ARG);
        assert_non_null(strstr(dt_last_error(), "got 8 bytes, expected 12"));
    }
    ct_expect_aborted(c, DT_ERR_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rings_in_use),
        cmocka_unit_test(test_sent_before_received),
        cmocka_unit_test(test_length_mismatch),
    };
    return cmocka_run_group_tests(tests, ct_setup, ct_teardown);
}
