/*
 * Ranks that sleep on the shared-memory rings are woken (ucx_shm_sleep.c).
 * Run with DT_SPIN_US=0, so every wait that finds nothing sleeps at once and
 * every hand-off below races a sender's store against a receiver's sleep
 * announcement. A lost wake-up does not hang (a sleep ends after 0.1 s) but
 * costs that 0.1 s: a round that slow is counted, and more than a few of
 * them (a descheduled rank on a loaded host) fail the test. Under ctest with
 * fences on both sides (the default) and with the sleepers' membarrier
 * (DT_SHM_MEMBARRIER=1).
 */
#include "comm_test_util.h"

#include "comm/ucx/ucx_shm_impl.h"
#include "core/clock.h"

enum { ROUNDS = 1500, RING_MSGS = 600 };
#define LOST_S    0.09 /* a round this slow slept through its message */
#define MAX_SLOWS 3

/* Which barrier the sleepers use is what DT_SHM_MEMBARRIER asks for, when
 * this kernel has it (agreed: a fence on every side otherwise). */
static void test_protocol_agreed(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    if (dt_comm_size(w) == 1)
        skip();
    const dt_ucx_shm *shm = ((dt_ucx_comm *)w->impl)->shared->shm;
    assert_true(shm->on);
    const char *env = getenv("DT_SHM_MEMBARRIER");
    if (env == NULL || strcmp(env, "0") == 0)
        assert_false(shm->asym);
    int32_t asym = shm->asym, v[2] = {asym, -asym};
    CT_OK(dt_comm_allreduce(w, v, v, 2, DT_DTYPE_I32, DT_REDUCE_OP_MAX, NULL));
    assert_int_equal(v[0], -v[1]); /* the same on every rank */
    fprintf(stderr, "rank %d: sleepers %s\n", dt_comm_rank(w), asym ? "membarrier" : "fence");
}

/* Count a round that took @p t seconds into *@p slow; fail at once past
 * MAX_SLOWS (a broken protocol would take 0.1 s a round, minutes in all). */
static void slow_round(int *slow, double t)
{
    if (t <= LOST_S)
        return;
    fprintf(stderr, "a round took %.3f s (lost wake-up?)\n", t);
    if (++*slow > MAX_SLOWS)
        fail_msg("more than %d rounds slept through their message", MAX_SLOWS);
}

/* A token goes round the ranks ROUNDS times: each hand-off wakes a sleeper. */
static void test_token_ring(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int me = dt_comm_rank(w), n = dt_comm_size(w);
    if (n == 1)
        skip();
    int slow = 0;
    for (int i = 0; i < ROUNDS; i++) {
        double t0 = dt__clock_now();
        int64_t tok = i;
        if (me == 0)
            CT_OK(dt_comm_send(w, &tok, 1, DT_DTYPE_I64, 1, 5, NULL));
        CT_OK(dt_comm_recv(w, &tok, 1, DT_DTYPE_I64, (me + n - 1) % n, 5, NULL));
        if (me != 0)
            CT_OK(dt_comm_send(w, &tok, 1, DT_DTYPE_I64, (me + 1) % n, 5, NULL));
        assert_int_equal(tok, i);
        slow_round(&slow, dt__clock_now() - t0);
    }
}

/* Small all-reduces: every rank sends and sleeps in every round. */
static void test_allreduce_rounds(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int n = dt_comm_size(w);
    int slow = 0;
    for (int i = 0; i < ROUNDS; i++) {
        double t0 = dt__clock_now();
        int32_t x[2] = {i, 1};
        CT_OK(dt_comm_allreduce(w, x, x, 2, DT_DTYPE_I32, DT_REDUCE_OP_SUM, NULL));
        assert_int_equal(x[0], i * n);
        assert_int_equal(x[1], n);
        slow_round(&slow, dt__clock_now() - t0);
    }
}

/* Rank 0 sends more messages than a ring holds while rank 1 sleeps before
 * receiving: rank 0 sleeps on a full ring and the receiver's consumed slots
 * (its tail) must wake it. */
static void test_full_ring_sender_sleeps(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int me = dt_comm_rank(w);
    if (dt_comm_size(w) == 1 || me > 1)
        goto out;
    double t0 = dt__clock_now();
    for (int64_t m = 0; m < RING_MSGS; m++) {
        int64_t v = m;
        if (me == 0)
            CT_OK(dt_comm_send(w, &v, 1, DT_DTYPE_I64, 1, 6, NULL));
        else {
            struct timespec nap = {0, 20000000}; /* rank 0 fills the ring and sleeps */
            if (m == 0)
                nanosleep(&nap, NULL);
            CT_OK(dt_comm_recv(w, &v, 1, DT_DTYPE_I64, 0, 6, NULL));
            assert_int_equal(v, m);
        }
    }
    assert_true(dt__clock_now() - t0 < 0.02 + MAX_SLOWS * 0.1);
out:
    CT_OK(dt_comm_barrier(w, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protocol_agreed),
        cmocka_unit_test(test_token_ring),
        cmocka_unit_test(test_allreduce_rounds),
        cmocka_unit_test(test_full_ring_sender_sleeps),
    };
    return cmocka_run_group_tests(tests, ct_setup, ct_teardown);
}
