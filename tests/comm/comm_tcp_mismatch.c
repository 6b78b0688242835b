/*
 * The direct TCP path (src/comm/ucx/ucx_tcp.c) with calls whose message sizes
 * differ between two ranks across DT_TCP_DIRECT_MIN_KB (64 KiB): one end
 * takes the sockets, the other UCX. The markers (ucx_tcp_mark.c) must make
 * every such call fail on every rank within seconds, with an error naming
 * the world rank, both ways round, though DT_TIMEOUT_S is 120 (a hang would
 * show as this test's timeout). Sizes that agree but straddle the threshold
 * within one (peer, tag) stream must still arrive intact and in order.
 * Runs between ranks of one host over loopback (DT_TEST_TCP_LOCAL=1).
 */
#include <time.h>

#include "comm_test_util.h"

#define BIG   (128u * 1024u) /* direct */
#define SMALL (1u * 1024u)   /* UCX */
#define QUICK 10.0           /* seconds a failure may take to reach every rank */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void expect_named(const char *what, dt_status st, double t0)
{
    if (st == DT_OK)
        fail_msg("%s: succeeded", what);
    if (strstr(dt_last_error(), "world rank") == NULL)
        fail_msg("%s: the error names no world rank: %s", what, dt_last_error());
    if (now_s() - t0 > QUICK)
        fail_msg("%s: failed only after %.1f s: %s", what, now_s() - t0, dt_last_error());
}

/* Rank 0 sends @p sent bytes where rank 1 expects @p want: rank 1's receive
 * fails at once naming world rank 0 and @p text, and the comm is aborted on
 * every rank within seconds (the sender's too). */
static void p2p_mismatch(size_t sent, size_t want, const char *text)
{
    dt_comm *c = ct_isolated_dup();
    const int me = dt_comm_rank(c);
    unsigned char *buf = ct_msg_filled(0, 3, sent > want ? sent : want);
    double t0 = now_s();
    if (me == 0) {
        dt_status st = dt_comm_send(c, buf, sent, DT_DTYPE_U8, 1, 5, NULL);
        assert_true(st == DT_OK || st == DT_ERR_INVALID_ARG); /* the abort may come first */
    } else if (me == 1) {
        dt_status st = dt_comm_recv(c, buf, want, DT_DTYPE_U8, 0, 5, NULL);
        expect_named("the mismatched receive", st, t0);
        assert_int_equal(st, DT_ERR_INVALID_ARG);
        if (strstr(dt_last_error(), "world rank 0") == NULL ||
            strstr(dt_last_error(), text) == NULL)
            fail_msg("want \"world rank 0\" and \"%s\" in: %s", text, dt_last_error());
    }
    ct_expect_aborted(c, DT_ERR_INVALID_ARG);
    if (now_s() - t0 > QUICK)
        fail_msg("the abort took %.1f s", now_s() - t0);
    free(buf);
}

static void test_sender_bigger(void **state)
{
    (void)state;
    if (dt_comm_size(dt_runtime_world(ct_rt)) < 2)
        skip();
    p2p_mismatch(BIG, SMALL, "expected 1024");
}

static void test_sender_smaller(void **state)
{
    (void)state;
    if (dt_comm_size(dt_runtime_world(ct_rt)) < 2)
        skip();
    p2p_mismatch(SMALL, BIG, "expected 131072 bytes, the peer sent a message under 65536");
}

/* An empty message goes direct, a marker would pass for it on UCX. */
static void test_empty_against_small(void **state)
{
    (void)state;
    if (dt_comm_size(dt_runtime_world(ct_rt)) < 2)
        skip();
    p2p_mismatch(0, SMALL, "expected 1024");
    p2p_mismatch(SMALL, 0, "expected 0 bytes, the peer sent a message under 65536");
}

/* Rank 0 passes a count whose messages go direct, the others one whose
 * messages stay on UCX: every rank's call fails within seconds (but a
 * broadcast root's, see below), and the comm is aborted everywhere. */
static void test_collective_straddles(void **state)
{
    (void)state;
    const char *colls[] = {"allgather", "allreduce", "broadcast"};
    for (size_t k = 0; k < sizeof(colls) / sizeof(colls[0]); k++) {
        dt_comm *c = ct_isolated_dup();
        const int me = dt_comm_rank(c), n = dt_comm_size(c);
        if (n < 2) {
            dt_comm_destroy(c);
            skip();
        }
        /* per-message bytes: the whole count (all-gather, broadcast) or
         * about count / ranks (all-reduce's ring) */
        size_t count = me == 0 ? (size_t)n * BIG : SMALL / 4;
        float *in = calloc(count, sizeof(float)), *out = calloc(count * (size_t)n, sizeof(float));
        assert_true(in != NULL && out != NULL);
        double t0 = now_s();
        dt_status st;
        if (k == 0)
            st = dt_comm_allgather(c, in, out, count, DT_DTYPE_F32, NULL);
        else if (k == 1)
            st = dt_comm_allreduce(c, in, out, count, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL);
        else
            st = dt_comm_broadcast(c, in, count, DT_DTYPE_F32, 0, NULL);
        /* a broadcast root only sends: it may finish before a receiver
         * fails (as on UCX alone, whose eager sends finish alike), and then
         * its next call fails */
        if (k != 2 || me != 0 || st != DT_OK)
            expect_named(colls[k], st, t0);
        ct_expect_aborted(c, st);
        if (now_s() - t0 > QUICK)
            fail_msg("%s: the abort took %.1f s", colls[k], now_s() - t0);
        free(in);
        free(out);
    }
}

/* One (peer, tag) stream whose sizes agree but cross the threshold both
 * ways, posted all at once and one by one: intact, in order, no false alarm. */
static void test_agreeing_stream(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int me = dt_comm_rank(w);
    if (dt_comm_size(w) < 2)
        skip();
    const size_t sizes[] = {BIG, SMALL, 0, BIG + 1, 65535, 65536, 0, SMALL};
    enum { N = sizeof(sizes) / sizeof(sizes[0]) };
    for (int round = 0; round < 2 && me <= 1; round++) {
        unsigned char *bufs[N];
        dt_work *works[N];
        for (int i = 0; i < N; i++) {
            bufs[i] = me == 0 ? ct_msg_filled(0, i, sizes[i]) : calloc(1, sizes[i] + 1);
            assert_non_null(bufs[i]);
            dt_work **wk = round == 0 ? &works[i] : NULL;
            works[i] = NULL;
            if (me == 0)
                CT_OK(dt_comm_send(w, bufs[i], sizes[i], DT_DTYPE_U8, 1, 9, wk));
            else
                CT_OK(dt_comm_recv(w, bufs[i], sizes[i], DT_DTYPE_U8, 0, 9, wk));
        }
        if (round == 0)
            CT_OK(dt_work_wait_all(works, N, 60));
        for (int i = 0; i < N; i++) {
            if (me == 1)
                ct_msg_check(bufs[i], 0, i, sizes[i]);
            if (works[i] != NULL)
                dt_work_release(works[i]);
            free(bufs[i]);
        }
    }
    CT_OK(dt_comm_barrier(w, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_agreeing_stream),      cmocka_unit_test(test_sender_bigger),
        cmocka_unit_test(test_sender_smaller),       cmocka_unit_test(test_empty_against_small),
        cmocka_unit_test(test_collective_straddles), cmocka_unit_test(test_agreeing_stream),
    };
    return cmocka_run_group_tests(tests, ct_setup, ct_teardown);
}
