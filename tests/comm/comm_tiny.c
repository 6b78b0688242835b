/*
 * Tiny collectives (src/comm/comm_tiny.c): blocking collectives of at most
 * 256-byte messages skip the schedule engine. Their results must be the
 * normal path's bit for bit (the same call as a dt_work takes the normal
 * path), on inputs whose sums round (bf16, f16) as well as exact ones; they
 * must stay in step with normal calls interleaved in any order (one rank
 * blocking, another with a work, a large collective in flight around them:
 * a sequence or tag slip hangs or fails); and a mismatched call must fail on
 * every rank.
 */
#include "comm_test_util.h"

enum { K_ALLREDUCE, K_ALLGATHER, K_REDUCE_SCATTER, K_ALLTOALL, K_BROADCAST, K_COUNT };
static const char *const kind_name[K_COUNT] = {"allreduce", "allgather", "reduce_scatter",
                                               "alltoall", "broadcast"};
static const dt_reduce_op ops[] = {DT_REDUCE_OP_SUM, DT_REDUCE_OP_AVG, DT_REDUCE_OP_MIN,
                                   DT_REDUCE_OP_MAX, DT_REDUCE_OP_PROD};

/* Elements a rank's input holds for @p kind with @p count per message. */
static size_t in_len(int kind, size_t count, int p)
{
    return kind == K_REDUCE_SCATTER || kind == K_ALLTOALL ? count * (size_t)p : count;
}

static size_t out_len(int kind, size_t count, int p)
{
    return kind == K_ALLGATHER || kind == K_ALLTOALL ? count * (size_t)p : count;
}

/* Inputs whose sums round in every float dtype (non-integer, mixed signs). */
static void fill_rough(void *buf, size_t n, dt_dtype dt, int rank, int salt)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t h = (uint32_t)(rank * 2654435761u) ^ (uint32_t)(i * 40503u) ^ (uint32_t)salt;
        h = (h ^ (h >> 15)) * 2246822519u;
        double v = ((double)(h % 20011) - 10005.0) / 1237.0;
        ct_store(buf, i, dt, dt == DT_DTYPE_I32 || dt == DT_DTYPE_I64 ? (double)(int)v : v);
    }
}

/* One call of @p kind; with @p work set, as a dt_work waited for at once. */
static dt_status call(dt_comm *c, int kind, const void *in, void *out, size_t count, dt_dtype dt,
                      dt_reduce_op op, int root, bool nonblocking)
{
    dt_work *w = NULL, **wp = nonblocking ? &w : NULL;
    dt_status st;
    switch (kind) {
    case K_ALLREDUCE:
        st = dt_comm_allreduce(c, in, out, count, dt, op, wp);
        break;
    case K_ALLGATHER:
        st = dt_comm_allgather(c, in, out, count, dt, wp);
        break;
    case K_REDUCE_SCATTER:
        st = dt_comm_reduce_scatter(c, in, out, count, dt, op, wp);
        break;
    case K_ALLTOALL:
        st = dt_comm_alltoall(c, in, out, count, dt, wp);
        break;
    default:
        memcpy(out, in, count * dt_dtype_size(dt));
        st = dt_comm_broadcast(c, out, count, dt, root, wp);
        break;
    }
    if (st == DT_OK && w != NULL)
        st = dt_work_wait(w, -1);
    dt_work_release(w);
    return st;
}

/* Every kind, dtype, op and tiny count, plain and in place: blocking (the
 * tiny path) against the same call as a work (the normal path), bit for bit. */
static void test_tiny_matches_normal(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    char what[160];
    for (int kind = 0; kind < K_COUNT; kind++) {
        bool reduces = kind == K_ALLREDUCE || kind == K_REDUCE_SCATTER;
        for (size_t d = 0; d < CT_NDTYPES; d++) {
            dt_dtype dt = ct_dtypes[d];
            size_t esz = dt_dtype_size(dt), counts[] = {1, 2, 3, 7, 256 / esz};
            for (size_t o = 0; o < (reduces ? sizeof(ops) / sizeof(ops[0]) : 1); o++) {
                for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
                    size_t n = counts[ci], nin = in_len(kind, n, p), nout = out_len(kind, n, p);
                    void *in = ct_alloc(nin, dt), *a = ct_alloc(nout, dt), *b = ct_alloc(nout, dt);
                    fill_rough(in, nin, dt, me, (int)(ci * 31 + o));
                    int root = (int)(ci % (size_t)p);
                    snprintf(what, sizeof(what), "%s %s %s count %zu", kind_name[kind],
                             dt_dtype_name(dt), dt_reduce_op_name(ops[o]), n);
                    CT_OK(call(w, kind, in, a, n, dt, ops[o], root, false));
                    CT_OK(call(w, kind, in, b, n, dt, ops[o], root, true));
                    ct_expect_equal(a, b, nout, dt, what);
                    if (kind == K_ALLREDUCE) { /* in place */
                        memcpy(a, in, n * esz);
                        CT_OK(call(w, kind, a, a, n, dt, ops[o], root, false));
                        ct_expect_equal(a, b, nout, dt, what);
                    }
                    if (kind == K_REDUCE_SCATTER) { /* in place: recv is my block of send */
                        char *io = (char *)in + (size_t)me * n * esz;
                        CT_OK(call(w, kind, in, io, n, dt, ops[o], root, false));
                        ct_expect_equal(io, b, nout, dt, what);
                    }
                    free(in);
                    free(a);
                    free(b);
                }
            }
        }
    }
}

/* The exact reference: allreduce and reduce-scatter of integer-valued inputs. */
static void test_tiny_exact(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    for (size_t d = 0; d < CT_NDTYPES; d++) {
        dt_dtype dt = ct_dtypes[d];
        size_t n = 32 / dt_dtype_size(dt);
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            void *in = ct_alloc(n * p, dt), *got = ct_alloc(n * p, dt), *want = ct_alloc(n, dt);
            ct_fill(in, n, 0, dt, me, ops[o]);
            ct_want(want, n, 0, dt, p, ops[o]);
            CT_OK(dt_comm_allreduce(w, in, got, n, dt, ops[o], NULL));
            ct_expect_equal(got, want, n, dt, "tiny allreduce");
            ct_fill(in, n * p, 0, dt, me, ops[o]);
            ct_want(want, n, (size_t)me * n, dt, p, ops[o]);
            CT_OK(dt_comm_reduce_scatter(w, in, got, n, dt, ops[o], NULL));
            ct_expect_equal(got, want, n, dt, "tiny reduce_scatter");
            free(in);
            free(got);
            free(want);
        }
    }
}

/* A deterministic sequence (the same on every rank) of tiny and normal
 * calls of every kind; each rank picks blocking or a work on its own (so
 * ranks mix the tiny and the normal path within one call), and a large
 * all-reduce started as a work stays in flight around some of them. */
static void test_tiny_interleaved(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    const size_t counts[] = {1, 2, 64, 65, 1000};
    const size_t big = 100000;
    const dt_dtype dt = DT_DTYPE_F32;
    float *bin = malloc(big * sizeof(float)), *bout = malloc(big * sizeof(float));
    float *bwant = malloc(big * sizeof(float));
    assert_true(bin != NULL && bout != NULL && bwant != NULL);
    ct_fill(bin, big, 0, dt, me, DT_REDUCE_OP_SUM);
    ct_want(bwant, big, 0, dt, p, DT_REDUCE_OP_SUM);
    uint32_t rng = 12345;
    char what[128];
    for (int it = 0; it < 300; it++) {
        rng = rng * 1664525u + 1013904223u;
        int kind = (int)((rng >> 8) % K_COUNT);
        size_t n = counts[(rng >> 16) % 5];
        bool nonblocking = ((rng >> 24) + (uint32_t)me) % 3 == 0;
        bool around = (rng >> 28) % 4 == 0;
        int root = (int)((rng >> 4) % (uint32_t)p);
        size_t nin = in_len(kind, n, p), nout = out_len(kind, n, p);
        float *in = ct_alloc(nin, dt), *got = ct_alloc(nout, dt), *want = ct_alloc(nout, dt);
        if (kind == K_ALLREDUCE || kind == K_REDUCE_SCATTER) {
            ct_fill(in, nin, 0, dt, me, DT_REDUCE_OP_SUM);
            ct_want(want, n, kind == K_ALLREDUCE ? 0 : (size_t)me * n, dt, p, DT_REDUCE_OP_SUM);
        } else if (kind == K_BROADCAST) {
            ct_fill(in, n, 0, dt, me, DT_REDUCE_OP_SUM);
            ct_fill(want, n, 0, dt, root, DT_REDUCE_OP_SUM);
        } else { /* block q of rank r: r's values at base q * n */
            for (int q = 0; q < (kind == K_ALLTOALL ? p : 1); q++)
                ct_fill(in + (size_t)q * n, n, (size_t)q * n, dt, me, DT_REDUCE_OP_SUM);
            for (int r = 0; r < p; r++)
                ct_fill(want + (size_t)r * n, n, kind == K_ALLTOALL ? (size_t)me * n : 0, dt, r,
                        DT_REDUCE_OP_SUM);
        }
        dt_work *bw = NULL;
        if (around)
            CT_OK(dt_comm_allreduce(w, bin, bout, big, dt, DT_REDUCE_OP_SUM, &bw));
        snprintf(what, sizeof(what), "call %d: %s count %zu (%s)", it, kind_name[kind], n,
                 nonblocking ? "work" : "blocking");
        CT_OK(call(w, kind, in, got, n, dt, DT_REDUCE_OP_SUM, root, nonblocking));
        ct_expect_equal(got, want, nout, dt, what);
        if (bw != NULL) {
            CT_OK(dt_work_wait(bw, -1));
            dt_work_release(bw);
            ct_expect_equal(bout, bwant, big, dt, "the large all-reduce around");
        }
        free(in);
        free(got);
        free(want);
    }
    free(bin);
    free(bout);
    free(bwant);
}

/* Forced algorithms take the normal path; the results stay exact. */
static void test_tiny_forced(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    float in[4], got[4], want[4];
    ct_fill(in, 4, 0, DT_DTYPE_F32, me, DT_REDUCE_OP_SUM);
    ct_want(want, 4, 0, DT_DTYPE_F32, p, DT_REDUCE_OP_SUM);
    const char *algos[] = {"allreduce:ring", "allreduce:recursive_doubling", "allreduce:direct"};
    for (size_t a = 0; a < 3; a++) {
        CT_OK(dt_comm_set_algo(w, algos[a]));
        CT_OK(dt_comm_allreduce(w, in, got, 4, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL));
        ct_expect_equal(got, want, 4, DT_DTYPE_F32, algos[a]);
    }
    CT_OK(dt_comm_set_algo(w, ""));
    CT_OK(dt_comm_allreduce(w, in, got, 4, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL));
    ct_expect_equal(got, want, 4, DT_DTYPE_F32, "after the forced ones");
}

/* Rank 0 calls an all-reduce where the others call an all-gather whose
 * messages have the same length: every rank fails, and the comm is aborted
 * everywhere, naming the rank that failed first. */
static void test_tiny_mismatch(void **state)
{
    (void)state;
    dt_comm *w = ct_isolated_dup();
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    float in[2] = {1, 2}, out[2 * 8];
    dt_status st = me == 0 ? dt_comm_allreduce(w, in, out, 2, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL)
                           : dt_comm_allgather(w, in, out, 2, DT_DTYPE_F32, NULL);
    (void)p;
    assert_int_equal(st, DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "different collectives"));
    ct_expect_aborted(w, DT_ERR_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_matches_normal), cmocka_unit_test(test_tiny_exact),
        cmocka_unit_test(test_tiny_interleaved),    cmocka_unit_test(test_tiny_forced),
        cmocka_unit_test(test_tiny_mismatch),
    };
    return cmocka_run_group_tests(tests, ct_setup, ct_teardown);
}
