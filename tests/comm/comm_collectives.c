/*
 * All-gather(v), reduce-scatter(v), all-to-all(v), broadcast, barrier and
 * point-to-point on every dtype (reduce-scatter on every reduce op) and the
 * sizes 0, 1, 7, 4095, 1 MiB + 3 elements (the total across ranks, split as
 * evenly as possible, or unevenly for the v-variants), against references
 * each rank computes locally.
 */
#include <time.h>
#include <unistd.h>

#include "comm_test_util.h"

static size_t ceil_div(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

/* Uneven counts summing to about n: rank 1 gets nothing, rank 0 the remainder. */
static void uneven_counts(size_t n, int p, size_t *counts)
{
    size_t left = n;
    for (int r = p - 1; r >= 1; r--) {
        size_t c = (r == 1) ? 0 : ceil_div(n, 2 * (size_t)p) + (size_t)r;
        c = c < left ? c : left;
        counts[r] = c;
        left -= c;
    }
    counts[0] = left;
}

static void test_allgather(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    char what[128];
    for (size_t d = 0; d < CT_NDTYPES; d++) {
        dt_dtype dt = ct_dtypes[d];
        size_t esz = dt_dtype_size(dt);
        for (size_t s = 0; s < CT_NSIZES; s++) {
            size_t c = ceil_div(ct_sizes[s], (size_t)p);
            void *send = ct_alloc(c, dt), *recv = ct_alloc(c * p, dt), *want = ct_alloc(c * p, dt);
            for (int r = 0; r < p; r++)
                ct_fill((char *)want + (size_t)r * c * esz, c, 0, dt, r, DT_REDUCE_OP_SUM);
            ct_fill(send, c, 0, dt, me, DT_REDUCE_OP_SUM);
            snprintf(what, sizeof(what), "allgather %s count %zu", dt_dtype_name(dt), c);
            CT_OK(dt_comm_allgather(w, send, recv, c, dt, NULL));
            ct_expect_equal(recv, want, c * p, dt, what);
            /* in place (own block already in recv), non-blocking */
            memset(recv, 0x5a, c * p * esz);
            char *mine = (char *)recv + (size_t)me * c * esz;
            ct_fill(mine, c, 0, dt, me, DT_REDUCE_OP_SUM);
            dt_work *work = NULL;
            CT_OK(dt_comm_allgather(w, mine, recv, c, dt, &work));
            CT_OK(dt_work_wait(work, -1));
            dt_work_release(work);
            ct_expect_equal(recv, want, c * p, dt, what);
            free(send);
            free(recv);
            free(want);
        }
    }
}

static void test_allgatherv(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    size_t *counts = calloc((size_t)p, sizeof(size_t)), *displs = calloc((size_t)p, sizeof(size_t));
    char what[128];
    for (size_t d = 0; d < CT_NDTYPES; d++) {
        dt_dtype dt = ct_dtypes[d];
        size_t esz = dt_dtype_size(dt);
        for (size_t s = 0; s < CT_NSIZES; s++) {
            uneven_counts(ct_sizes[s], p, counts);
            size_t total = 0, span = 0;
            for (int r = 0; r < p; r++) {
                displs[r] = span + 2; /* gaps the collective must leave alone */
                span = displs[r] + counts[r];
                total += counts[r];
            }
            void *send = ct_alloc(counts[me], dt), *recv = ct_alloc(span, dt);
            void *want = ct_alloc(span, dt), *packed = ct_alloc(total, dt);
            void *want_packed = ct_alloc(total, dt);
            for (int r = 0, o = 0; r < p; o += (int)counts[r], r++) {
                ct_fill((char *)want + displs[r] * esz, counts[r], 7, dt, r, DT_REDUCE_OP_SUM);
                ct_fill((char *)want_packed + (size_t)o * esz, counts[r], 7, dt, r,
                        DT_REDUCE_OP_SUM);
            }
            memset(recv, 0x33, span * esz);
            for (int r = 0; r < p; r++) /* the gaps keep their bytes */
                memset((char *)want + (displs[r] - 2) * esz, 0x33, 2 * esz);
            ct_fill(send, counts[me], 7, dt, me, DT_REDUCE_OP_SUM);
            snprintf(what, sizeof(what), "allgatherv %s total %zu", dt_dtype_name(dt), total);
            CT_OK(dt_comm_allgatherv(w, send, recv, counts, displs, dt, NULL));
            ct_expect_equal(recv, want, span, dt, what);
            dt_work *work = NULL;
            CT_OK(dt_comm_allgatherv(w, send, packed, counts, NULL, dt, &work));
            CT_OK(dt_work_wait(work, -1));
            dt_work_release(work);
            ct_expect_equal(packed, want_packed, total, dt, what);
            free(send);
            free(recv);
            free(want);
            free(packed);
            free(want_packed);
        }
    }
    free(counts);
    free(displs);
}

static void test_reduce_scatter(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    size_t *counts = calloc((size_t)p, sizeof(size_t));
    char what[128];
    for (size_t d = 0; d < CT_NDTYPES; d++) {
        dt_dtype dt = ct_dtypes[d];
        for (int op = 0; op < DT_REDUCE_OP_COUNT; op++) {
            for (size_t s = 0; s < CT_NSIZES; s++) {
                /* equal blocks */
                size_t c = ceil_div(ct_sizes[s], (size_t)p);
                void *send = ct_alloc(c * p, dt), *recv = ct_alloc(c, dt), *want = ct_alloc(c, dt);
                ct_fill(send, c * p, 0, dt, me, (dt_reduce_op)op);
                ct_want(want, c, (size_t)me * c, dt, p, (dt_reduce_op)op);
                snprintf(what, sizeof(what), "reduce_scatter %s %s count %zu",
                         dt_reduce_op_name((dt_reduce_op)op), dt_dtype_name(dt), c);
                CT_OK(dt_comm_reduce_scatter(w, send, recv, c, dt, (dt_reduce_op)op, NULL));
                ct_expect_equal(recv, want, c, dt, what);
                if (c < 100000) { /* small: the automatic choice was direct, check the ring */
                    CT_OK(dt_comm_set_algo(w, "reduce_scatter:ring"));
                    CT_OK(dt_comm_reduce_scatter(w, send, recv, c, dt, (dt_reduce_op)op, NULL));
                    CT_OK(dt_comm_set_algo(w, NULL));
                    ct_expect_equal(recv, want, c, dt, what);
                }
                /* in place: the result replaces this rank's own block of send */
                char *own = (char *)send + (size_t)me * c * dt_dtype_size(dt);
                CT_OK(dt_comm_reduce_scatter(w, send, own, c, dt, (dt_reduce_op)op, NULL));
                ct_expect_equal(own, want, c, dt, what);
                free(send);
                free(recv);
                free(want);
                /* uneven blocks, non-blocking */
                uneven_counts(ct_sizes[s], p, counts);
                size_t total = 0, off = 0;
                for (int r = 0; r < p; r++) {
                    if (r == me)
                        off = total;
                    total += counts[r];
                }
                send = ct_alloc(total, dt);
                recv = ct_alloc(counts[me], dt);
                want = ct_alloc(counts[me], dt);
                ct_fill(send, total, 0, dt, me, (dt_reduce_op)op);
                ct_want(want, counts[me], off, dt, p, (dt_reduce_op)op);
                dt_work *work = NULL;
                CT_OK(dt_comm_reduce_scatterv(w, send, recv, counts, dt, (dt_reduce_op)op, &work));
                CT_OK(dt_work_wait(work, -1));
                dt_work_release(work);
                ct_expect_equal(recv, want, counts[me], dt, what);
                free(send);
                free(recv);
                free(want);
            }
        }
    }
    free(counts);
}

/* Element i of the block rank src sends to rank dst. */
static double a2a_value(int src, int dst, size_t i)
{
    return (double)((int)((src * 5 + dst * 3 + (int)(i % 11)) % 17) - 8);
}

static void test_alltoall(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    char what[128];
    for (size_t d = 0; d < CT_NDTYPES; d++) {
        dt_dtype dt = ct_dtypes[d];
        for (size_t s = 0; s < CT_NSIZES; s++) {
            size_t c = ceil_div(ct_sizes[s], (size_t)p * p);
            if (ct_sizes[s] > 0 && ct_sizes[s] < 100 && c == 0)
                c = 1;
            void *send = ct_alloc(c * p, dt), *recv = ct_alloc(c * p, dt);
            void *want = ct_alloc(c * p, dt);
            for (int r = 0; r < p; r++) {
                for (size_t i = 0; i < c; i++) {
                    ct_store(send, (size_t)r * c + i, dt, a2a_value(me, r, i));
                    ct_store(want, (size_t)r * c + i, dt, a2a_value(r, me, i));
                }
            }
            snprintf(what, sizeof(what), "alltoall %s count %zu", dt_dtype_name(dt), c);
            dt_work *work = NULL;
            CT_OK(dt_comm_alltoall(w, send, recv, c, dt, s % 2 ? &work : NULL));
            if (work != NULL) {
                CT_OK(dt_work_wait(work, -1));
                dt_work_release(work);
            }
            ct_expect_equal(recv, want, c * p, dt, what);
            free(send);
            free(recv);
            free(want);
        }
    }
}

static void test_alltoallv(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    size_t *sc = calloc((size_t)p, sizeof(size_t)), *sd = calloc((size_t)p, sizeof(size_t));
    size_t *rc = calloc((size_t)p, sizeof(size_t)), *rd = calloc((size_t)p, sizeof(size_t));
    for (size_t m = 0; m < 3; m++) {
        size_t unit = (size_t[]){1, 5, 3000}[m];
        /* rank a sends ((a + 2b) % 3) * unit elements to rank b */
        size_t so = 0, ro = 0;
        for (int b = 0; b < p; b++) {
            sc[b] = (size_t)((me + 2 * b) % 3) * unit;
            rc[b] = (size_t)((b + 2 * me) % 3) * unit;
            sd[b] = so + 1;
            rd[b] = ro + 3;
            so = sd[b] + sc[b];
            ro = rd[b] + rc[b];
        }
        for (size_t d = 0; d < CT_NDTYPES; d++) {
            dt_dtype dt = ct_dtypes[d];
            size_t esz = dt_dtype_size(dt);
            void *send = ct_alloc(so, dt), *recv = ct_alloc(ro, dt), *want = ct_alloc(ro, dt);
            memset(recv, 0x11, ro * esz);
            memset(want, 0x11, ro * esz);
            for (int b = 0; b < p; b++) {
                for (size_t i = 0; i < sc[b]; i++)
                    ct_store(send, sd[b] + i, dt, a2a_value(me, b, i));
                for (size_t i = 0; i < rc[b]; i++)
                    ct_store(want, rd[b] + i, dt, a2a_value(b, me, i));
            }
            CT_OK(dt_comm_alltoallv(w, send, sc, sd, recv, rc, rd, dt, NULL));
            ct_expect_equal(recv, want, ro, dt, "alltoallv");
            free(send);
            free(recv);
            free(want);
        }
    }
    free(sc);
    free(sd);
    free(rc);
    free(rd);
}

static void test_broadcast(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    static const char *const algos[] = {NULL, "broadcast:binomial", "broadcast:pipeline",
                                        "broadcast:direct", "broadcast:peer_copy"};
    char what[128];
    for (size_t d = 0; d < CT_NDTYPES; d++) {
        dt_dtype dt = ct_dtypes[d];
        for (size_t s = 0; s < CT_NSIZES; s++) {
            size_t n = ct_sizes[s];
            void *buf = ct_alloc(n, dt), *want = ct_alloc(n, dt);
            for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++) {
                if (n > 100000 && a != 0 && a != 2)
                    continue; /* the large size by the automatic choice and in segments */
                int root = (int)(a + s) % p;
                if (algos[a])
                    CT_OK(dt_comm_set_algo(w, algos[a]));
                else
                    CT_OK(dt_comm_set_algo(w, NULL));
                ct_fill(want, n, 0, dt, 100 + root, DT_REDUCE_OP_SUM);
                if (me == root)
                    ct_fill(buf, n, 0, dt, 100 + root, DT_REDUCE_OP_SUM);
                else
                    memset(buf, 0, n * dt_dtype_size(dt));
                snprintf(what, sizeof(what), "broadcast %s n %zu root %d algo %s",
                         dt_dtype_name(dt), n, root, algos[a] ? algos[a] : "auto");
                dt_work *work = NULL;
                CT_OK(dt_comm_broadcast(w, buf, n, dt, root, (a == 1 || a == 4) ? &work : NULL));
                if (work != NULL) {
                    CT_OK(dt_work_wait(work, -1));
                    dt_work_release(work);
                }
                ct_expect_equal(buf, want, n, dt, what);
            }
            CT_OK(dt_comm_set_algo(w, NULL));
            free(buf);
            free(want);
        }
    }
    float x = 0;
    assert_int_equal(dt_comm_broadcast(w, &x, 1, DT_DTYPE_F32, p, NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "root"));
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Nobody leaves a barrier before the last rank entered it. */
static void test_barrier(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    CT_OK(dt_comm_barrier(w, NULL));
    double t0 = now_s();
    if (me == p - 1)
        usleep(300 * 1000);
    CT_OK(dt_comm_barrier(w, NULL));
    double dt = now_s() - t0;
    if (dt < 0.25)
        fail_msg("rank %d left the barrier after %.3f s, before rank %d entered", me, dt, p - 1);
    /* non-blocking: test until done */
    dt_work *work = NULL;
    CT_OK(dt_comm_barrier(w, &work));
    bool done = false;
    while (!done)
        CT_OK(dt_work_test(work, &done));
    dt_work_release(work);
}

/* Ring exchange with several messages per (peer, tag): they match in order. */
static void test_send_recv(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    const int right = (me + 1) % p, left = (me + p - 1) % p;
    enum { NMSG = 4, LEN = 70000 };
    int32_t *out = malloc(NMSG * LEN * sizeof(int32_t)), *in = malloc(NMSG * LEN * sizeof(int32_t));
    dt_work *rw[NMSG], *sw[NMSG];
    for (int m = 0; m < NMSG; m++) /* receives first: a tag is matched in posting order */
        CT_OK(dt_comm_recv(w, in + m * LEN, (size_t)(m + 1) * 1000, DT_DTYPE_I32, left, 5, &rw[m]));
    for (int m = 0; m < NMSG; m++) {
        for (int i = 0; i < LEN; i++)
            out[m * LEN + i] = me * 1000000 + m * 100000 + i;
        CT_OK(
            dt_comm_send(w, out + m * LEN, (size_t)(m + 1) * 1000, DT_DTYPE_I32, right, 5, &sw[m]));
    }
    for (int m = 0; m < NMSG; m++) {
        CT_OK(dt_work_wait(rw[m], -1));
        CT_OK(dt_work_wait(sw[m], -1));
        dt_work_release(rw[m]);
        dt_work_release(sw[m]);
        for (int i = 0; i < (m + 1) * 1000; i++)
            assert_int_equal(in[m * LEN + i], left * 1000000 + m * 100000 + i);
    }
    /* blocking, large (rendezvous), different tag; even ranks send first */
    if (me % 2 == 0 || p == 1) {
        CT_OK(dt_comm_send(w, out, LEN, DT_DTYPE_I32, right, 77, NULL));
        CT_OK(dt_comm_recv(w, in, LEN, DT_DTYPE_I32, left, 77, NULL));
    } else {
        CT_OK(dt_comm_recv(w, in, LEN, DT_DTYPE_I32, left, 77, NULL));
        CT_OK(dt_comm_send(w, out, LEN, DT_DTYPE_I32, right, 77, NULL));
    }
    for (int i = 0; i < LEN; i++)
        assert_int_equal(in[i], left * 1000000 + i);
    assert_int_equal(dt_comm_send(w, out, 1, DT_DTYPE_I32, p, 0, NULL), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_comm_send(w, out, 1, DT_DTYPE_I32, 0, -3, NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "-3"));
    free(out);
    free(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allgather),      cmocka_unit_test(test_allgatherv),
        cmocka_unit_test(test_reduce_scatter), cmocka_unit_test(test_alltoall),
        cmocka_unit_test(test_alltoallv),      cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_barrier),        cmocka_unit_test(test_send_recv),
    };
    return cmocka_run_group_tests(tests, ct_setup, ct_teardown);
}
