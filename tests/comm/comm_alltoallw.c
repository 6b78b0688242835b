/*
 * dt_comm_alltoallw: 2-D block all-to-alls as a redistribute runs them, on
 * every path (rows streamed through shared memory, same-host peer copies, and
 * pack + pairwise, dt_comm_set_algo forcing each), blocking and not, for uneven and empty blocks,
 * with rows short enough to be staged and long enough to be listed, in every dtype size. A matrix
 * G[i][j] = f(i * N + j) of M x N is split by rows over the ranks (torch.chunk sizes) and moved to
 * a split by columns (S(0) -> S(1)), back (S(1) -> S(0)), and into every third element of a padded
 * buffer (runs of different lengths on the two sides; the gaps must stay untouched).
 */
#include "comm_test_util.h"

/* torch.chunk: ceil(n / p) per chunk, the last ones short or empty. */
static void chunk(size_t n, int p, int q, size_t *size, size_t *off)
{
    size_t c = (n + (size_t)p - 1) / (size_t)p;
    size_t o = c * (size_t)q < n ? c * (size_t)q : n;
    *off = o;
    *size = (o + c < n ? o + c : n) - o;
}

static void put(void *buf, size_t at, dt_dtype dt, size_t global)
{
    ct_store(buf, at, dt, (double)(global % 251)); /* exact in bf16 and f16 */
}

typedef enum { ROWS_TO_COLS, COLS_TO_ROWS, TO_GAPPED } pattern;

typedef struct exchange {
    size_t M, N;
    int p, me;
    dt_dtype dt;
    size_t in_n, out_n; /* elements of the local buffers */
    dt_comm_block sb[16], rb[16];
} exchange;

/* The blocks and buffer sizes of @p pat on this rank. */
static void plan(exchange *x, pattern pat)
{
    size_t mr, mro, mc, mco;
    chunk(x->M, x->p, x->me, &mr, &mro);
    chunk(x->N, x->p, x->me, &mc, &mco);
    for (int q = 0; q < x->p; q++) {
        size_t qr, qro, qc, qco;
        chunk(x->M, x->p, q, &qr, &qro);
        chunk(x->N, x->p, q, &qc, &qco);
        if (pat == COLS_TO_ROWS) { /* I hold G[:, my cols] (M x mc), want G[my rows, :] */
            x->sb[q] = (dt_comm_block){qro * mc, qr, mc, mc};
            x->rb[q] = (dt_comm_block){qco, mr, qc, x->N};
        } else { /* I hold G[my rows, :] (mr x N) */
            x->sb[q] = (dt_comm_block){qco, mr, qc, x->N};
            x->rb[q] = pat == ROWS_TO_COLS ? (dt_comm_block){qro * mc, qr, mc, mc}
                                           /* q's qr x mc elements, one per row, every third slot */
                                           : (dt_comm_block){3 * qro * mc, qr * mc, 1, 3};
        }
    }
    x->in_n = pat == COLS_TO_ROWS ? x->M * mc : mr * x->N;
    x->out_n = pat == COLS_TO_ROWS ? mr * x->N : (pat == ROWS_TO_COLS ? x->M * mc : 3 * x->M * mc);
}

/* Fill the input and the expected output (gap slots keep ct_alloc's garbage). */
static void fill(const exchange *x, pattern pat, void *in, void *want)
{
    size_t mr, mro, mc, mco, esz = dt_dtype_size(x->dt);
    chunk(x->M, x->p, x->me, &mr, &mro);
    chunk(x->N, x->p, x->me, &mc, &mco);
    if (pat == COLS_TO_ROWS) {
        for (size_t i = 0; i < x->M; i++)
            for (size_t j = 0; j < mc; j++)
                put(in, i * mc + j, x->dt, i * x->N + mco + j);
        for (size_t i = 0; i < mr; i++)
            for (size_t j = 0; j < x->N; j++)
                put(want, i * x->N + j, x->dt, (mro + i) * x->N + j);
        return;
    }
    for (size_t i = 0; i < mr; i++)
        for (size_t j = 0; j < x->N; j++)
            put(in, i * x->N + j, x->dt, (mro + i) * x->N + j);
    memset(want, 0xA5, x->out_n * esz);
    for (size_t i = 0; i < x->M; i++)
        for (size_t j = 0; j < mc; j++)
            put(want, (pat == TO_GAPPED ? 3 : 1) * (i * mc + j), x->dt, i * x->N + mco + j);
}

static const char *current_algo = "auto"; /* for messages */

static void run_case(size_t M, size_t N, dt_dtype dt, pattern pat, bool nonblocking)
{
    dt_comm *w = dt_runtime_world(ct_rt);
    exchange x = {.M = M, .N = N, .p = dt_comm_size(w), .me = dt_comm_rank(w), .dt = dt};
    plan(&x, pat);
    void *in = ct_alloc(x.in_n, dt), *out = ct_alloc(x.out_n, dt), *want = ct_alloc(x.out_n, dt);
    fill(&x, pat, in, want);
    dt_work *work = NULL;
    CT_OK(dt_comm_alltoallw(w, in, x.sb, out, x.rb, dt, nonblocking ? &work : NULL));
    if (nonblocking) {
        CT_OK(dt_work_wait(work, -1));
        dt_work_release(work);
    }
    char what[160];
    snprintf(what, sizeof(what), "alltoallw %zux%zu pattern %d %s (algo %s)", M, N, (int)pat,
             nonblocking ? "non-blocking" : "blocking", current_algo);
    ct_expect_equal(out, want, x.out_n, dt, what);
    free(in);
    free(out);
    free(want);
}

static const size_t shapes[][2] = {{1, 1}, {2, 5}, {7, 5}, {64, 300}, {515, 1030}, {33, 4099}};

static void sweep(void)
{
    const dt_dtype dts[] = {DT_DTYPE_F32, DT_DTYPE_F64, DT_DTYPE_BF16};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (size_t d = 0; d < 3; d++)
            for (int pat = 0; pat < 3; pat++)
                run_case(shapes[s][0], shapes[s][1], dts[d], (pattern)pat, (s + d) % 2 == 1);
}

/* Force @p spec (NULL: the automatic choice) on the world. */
static void use_algo(const char *spec)
{
    CT_OK(dt_comm_set_algo(dt_runtime_world(ct_rt), spec));
    current_algo = spec != NULL ? spec : "auto";
}

static void test_default_path(void **state)
{
    (void)state;
    use_algo(NULL);
    sweep();
}

static void test_pack_path(void **state)
{
    (void)state;
    use_algo("alltoallw:pack");
    sweep();
    use_algo(NULL);
}

/* Force @p algo, which may be refused on this machine (then the test is
 * skipped, @p unavailable saying why): a one-element probe first tells. */
static void use_algo_if_available(const char *algo, const char *unavailable)
{
    use_algo(algo);
    dt_comm *w = dt_runtime_world(ct_rt);
    float a = 1, b = 0;
    dt_comm_block one = {0, 1, 1, 1}, none = {0, 0, 0, 0};
    dt_comm_block sb[16], rb[16];
    for (int q = 0; q < dt_comm_size(w); q++)
        sb[q] = rb[q] = (q == dt_comm_rank(w)) ? one : none;
    dt_status st = dt_comm_alltoallw(w, &a, sb, &b, rb, DT_DTYPE_F32, NULL);
    if (st == DT_ERR_UNSUPPORTED) {
        print_message("%s: %s\n", unavailable, dt_last_error());
        use_algo(NULL);
        skip();
    }
    CT_OK(st);
    assert_true(b == 1.0f);
}

/* The sweep on @p algo (see use_algo_if_available). */
static void sweep_if_available(const char *algo, const char *unavailable)
{
    use_algo_if_available(algo, unavailable);
    sweep();
    use_algo(NULL);
}

static void test_peer_copy_path(void **state)
{
    (void)state;
    /* unavailable without cross-memory attach (ptrace rules) */
    sweep_if_available("alltoallw:peer_copy", "peer copies unavailable");
}

static void test_stream_path(void **state)
{
    (void)state;
    /* unavailable on one rank, or without shared memory (DT_SHM=0) */
    sweep_if_available("alltoallw:stream", "streamed rows unavailable");
}

/* Streamed rows of many chunks: each stripe passes through its pair's window
 * several times over, so windows fill and a pass over the rows stages the
 * stripes of full ones (ucx_shm_bulk.c); stripes of one width (4 ranks:
 * every peer's in one pass) and of two (3 ranks), both directions, blocking
 * and not, repeated: which windows are full differs from run to run. */
static void test_stream_many_chunks(void **state)
{
    (void)state;
    use_algo_if_available("alltoallw:stream", "streamed rows unavailable");
    for (int rep = 0; rep < 3; rep++) {
        run_case(4096, 1024, DT_DTYPE_F32, ROWS_TO_COLS, rep == 1);
        run_case(4096, 1024, DT_DTYPE_F32, COLS_TO_ROWS, rep == 2);
    }
    run_case(4099, 1030, DT_DTYPE_F32, ROWS_TO_COLS, false);
    use_algo(NULL);
}

/* Streamed rows: rank 0 sends rank 1 a strided block one column short of
 * what rank 1 expects (big enough to be gathered into the window): rank 1
 * fails naming the lengths, and the comm is aborted on every rank. */
static void test_stream_size_mismatch(void **state)
{
    (void)state;
    dt_comm *w = ct_isolated_dup();
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    if (p == 1 || dt_comm_set_algo(w, "alltoallw:stream") != DT_OK) {
        dt_comm_destroy(w);
        skip();
    }
    enum { ROWS = 256, COLS = 64 }; /* p column stripes of ROWS rows, 64 KiB and more */
    float *in = calloc((size_t)ROWS * COLS * p, sizeof(float));
    float *out = calloc((size_t)ROWS * COLS * p, sizeof(float));
    assert_non_null(in);
    assert_non_null(out);
    dt_comm_block sb[16], rb[16];
    for (int q = 0; q < p; q++) {
        sb[q] = (dt_comm_block){(size_t)q * COLS, ROWS, COLS, (size_t)COLS * p};
        rb[q] = (dt_comm_block){(size_t)q * ROWS * COLS, 1, (size_t)ROWS * COLS, 0};
    }
    if (me == 0)
        sb[1].row_count = COLS - 1;
    dt_status st = dt_comm_alltoallw(w, in, sb, out, rb, DT_DTYPE_F32, NULL);
    if (st == DT_ERR_UNSUPPORTED) { /* no shared memory here: nothing moved */
        free(in);
        free(out);
        dt_comm_destroy(w);
        skip();
    }
    if (me == 1 && st == DT_OK)
        fail_msg("rank 1 received a short message without an error");
    free(in);
    free(out);
    ct_expect_aborted(w, DT_OK);
}

/* Rank 0 sends rank 1 one element fewer than rank 1 expects: with peer
 * copies every rank fails, the pair naming the mismatch, the others rank
 * 0's or 1's status; nobody waits for a timeout, and the comm is aborted on
 * every rank (a duplicate of the world with a family of its own). A pair
 * rank may report the abort of a rank that saw the failed status word first. */
static void test_size_mismatch(void **state)
{
    (void)state;
    dt_comm *w = ct_isolated_dup();
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    CT_OK(dt_comm_set_algo(w, "alltoallw:peer_copy"));
    float in[64] = {0}, out[64];
    dt_comm_block sb[16], rb[16];
    for (int q = 0; q < p; q++) {
        sb[q] = (dt_comm_block){(size_t)q * 4, 1, 4, 4};
        rb[q] = (dt_comm_block){(size_t)q * 4, 1, 4, 4};
    }
    if (me == 0)
        sb[1].row_count = 3;
    dt_status st = dt_comm_alltoallw(w, in, sb, out, rb, DT_DTYPE_F32, NULL);
    if (st == DT_ERR_UNSUPPORTED) { /* no peer copies here: nothing moved, nothing broke */
        dt_comm_destroy(w);
        skip();
    }
    assert_int_equal(st, DT_ERR_INVALID_ARG);
    /* the pair names the sizes - unless the abort of a rank that learnt of it
     * from the status words came first: that one names rank 0 */
    if (me <= 1 &&
        strstr(dt_last_error(), "rank 0 sends 12 bytes to rank 1, which expects 16") == NULL &&
        strstr(dt_last_error(), "rank 0 of") == NULL)
        fail_msg("rank %d: the error names neither the sizes nor rank 0: %s", me, dt_last_error());
    if (p > 1)
        ct_expect_aborted(w, DT_ERR_INVALID_ARG);
    else
        dt_comm_destroy(w);
}

/* A broadcast by peer copies where rank 1 expects one element fewer than
 * the root sends: the counts differ, so the call check (comm_check.h) finds
 * it before the copies' size check does - rank 1 names world rank 0's call;
 * the root fails with rank 1's status, the others receive the data or fail
 * with the abort it sends them; the comm is aborted everywhere. */
static void test_broadcast_size_mismatch(void **state)
{
    (void)state;
    dt_comm *w0 = dt_runtime_world(ct_rt);
    float probe = 0, buf[4] = {0};
    dt_comm_block none = {0, 0, 0, 0}, sb[16];
    for (int q = 0; q < dt_comm_size(w0); q++)
        sb[q] = none;
    CT_OK(dt_comm_set_algo(w0, "alltoallw:peer_copy"));
    dt_status st = dt_comm_alltoallw(w0, &probe, sb, &probe, sb, DT_DTYPE_F32, NULL);
    CT_OK(dt_comm_set_algo(w0, NULL));
    if (st == DT_ERR_UNSUPPORTED) /* the broadcast would take another path */
        skip();
    dt_comm *w = ct_isolated_dup();
    const int me = dt_comm_rank(w);
    CT_OK(dt_comm_set_algo(w, "broadcast:peer_copy"));
    if (me == 0)
        buf[3] = 7;
    st = dt_comm_broadcast(w, buf, me == 1 ? 3 : 4, DT_DTYPE_F32, 0, NULL);
    if (me <= 1) {
        assert_int_equal(st, DT_ERR_INVALID_ARG);
        if (me == 1)
            assert_non_null(strstr(dt_last_error(), "different collectives: world rank 0's call "
                                                    "differs from this rank's dt_comm_broadcast"));
    } else if (st == DT_OK) {
        assert_true(buf[3] == 7.0f);
    } else {
        assert_int_equal(st, DT_ERR_INVALID_ARG);
    }
    if (dt_comm_size(w) > 1)
        ct_expect_aborted(w, DT_ERR_INVALID_ARG);
    else
        dt_comm_destroy(w);
}

static void test_bad_blocks(void **state)
{
    (void)state;
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w);
    float in[64] = {0}, out[64];
    dt_comm_block sb[16], rb[16];
    for (int q = 0; q < p; q++)
        sb[q] = rb[q] = (dt_comm_block){(size_t)q * 4, 2, 2, 2};
    sb[p - 1].stride = 1;
    assert_int_equal(dt_comm_alltoallw(w, in, sb, out, rb, DT_DTYPE_F32, NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "stride 1 < row_count 2"));
    assert_int_equal(dt_comm_alltoallw(w, in, NULL, out, rb, DT_DTYPE_F32, NULL),
                     DT_ERR_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_path),       cmocka_unit_test(test_pack_path),
        cmocka_unit_test(test_peer_copy_path),     cmocka_unit_test(test_stream_path),
        cmocka_unit_test(test_stream_many_chunks), cmocka_unit_test(test_stream_size_mismatch),
        cmocka_unit_test(test_size_mismatch),      cmocka_unit_test(test_broadcast_size_mismatch),
        cmocka_unit_test(test_bad_blocks),
    };
    return cmocka_run_group_tests(tests, ct_setup, ct_teardown);
}
