/*
 * Ranks that call a collective with different arguments: every rank fails
 * within 5 s (none returns DT_OK), the error names a world rank, and the comm
 * is aborted everywhere. All-reduce and all-gather run on duplicates of the
 * world with a family of their own; dt_from_local with inconsistent shards
 * fails on every rank naming the rank that is out of line (no comm breaks:
 * the shapes are swapped first); dt_redistribute to different placements
 * aborts the world's family (its mesh's comms are split from the world), so
 * it runs last.
 */
#include "failure/failure_util.h"

/* Rank 0 sums 16 elements where the others sum 8. */
static void test_allreduce_count(void **state)
{
    (void)state;
    dt_comm *c = ct_isolated_dup();
    float buf[16] = {0};
    double t0 = ft_now();
    dt_status st = dt_comm_allreduce(c, buf, buf, dt_comm_rank(c) == 0 ? 16 : 8, DT_DTYPE_F32,
                                     DT_REDUCE_OP_SUM, NULL);
    ft_expect_failed(st, t0, 5.0, "allreduce count");
    ct_expect_aborted(c, DT_OK);
}

/* The same byte counts, only the op differs: the call check alone sees it. */
static void test_allreduce_op(void **state)
{
    (void)state;
    dt_comm *c = ct_isolated_dup();
    float buf[8] = {0};
    double t0 = ft_now();
    dt_reduce_op op = dt_comm_rank(c) == dt_comm_size(c) - 1 ? DT_REDUCE_OP_MAX : DT_REDUCE_OP_SUM;
    dt_status st = dt_comm_allreduce(c, buf, buf, 8, DT_DTYPE_F32, op, NULL);
    ft_expect_failed(st, t0, 5.0, "allreduce op");
    ct_expect_aborted(c, DT_ERR_INVALID_ARG);
}

/* Same bytes, another dtype (i32 vs f32), non-blocking and released unwaited. */
static void test_allgather_dtype(void **state)
{
    (void)state;
    dt_comm *c = ct_isolated_dup();
    const int p = dt_comm_size(c);
    int32_t in[4] = {1, 2, 3, 4}, *out = calloc((size_t)p * 4, sizeof(int32_t));
    dt_dtype dt = dt_comm_rank(c) == 0 ? DT_DTYPE_I32 : DT_DTYPE_F32;
    dt_work *w = NULL;
    double t0 = ft_now();
    /* posting may fail at once when another rank's abort came first */
    if (dt_comm_allgather(c, in, out, 4, dt, &w) == DT_OK)
        dt_work_release(w); /* the failure is not lost: the next call reports it */
    int32_t x = 0;
    dt_status st = dt_comm_allreduce(c, &x, &x, 1, DT_DTYPE_I32, DT_REDUCE_OP_SUM, NULL);
    ft_expect_failed(st, t0, 5.0, "allgather dtype (released work)");
    assert_int_equal(st, DT_ERR_INVALID_ARG);
    free(out);
    ct_expect_aborted(c, DT_ERR_INVALID_ARG);
}

/* The last rank holds a 3-row shard where the others hold 2 rows: every rank
 * fails alike, naming the last rank (on 2 ranks either may be the odd one:
 * the message lists both). */
static void test_from_local_shapes(void **state)
{
    (void)state;
    const int p = dt_runtime_size(ct_rt), me = dt_runtime_rank(ct_rt);
    int shape[1] = {p};
    dt_mesh *mesh = NULL;
    CT_OK(dt_mesh_create(ct_rt, 1, shape, NULL, &mesh));
    int64_t ls[2] = {me == p - 1 ? 3 : 2, 4};
    dt_tensor *local = NULL, *d = NULL;
    CT_OK(dt_tensor_zeros(2, ls, DT_DTYPE_F32, dt_device_cpu(), &local));
    dt_placement pl[1] = {dt_shard(0)};
    double t0 = ft_now();
    dt_status st = dt_from_local(local, mesh, 1, pl, NULL, &d);
    assert_int_equal(st, DT_ERR_INVALID_ARG);
    assert_true(ft_now() - t0 < 5.0);
    char want[64];
    snprintf(want, sizeof(want),
             p > 2 ? "mesh rank %d holds a shard of shape [3, 4]" : "mesh rank %d [3, 4]", p - 1);
    if (strstr(dt_last_error(), want) == NULL)
        fail_msg("want \"%s\" in: %s", want, dt_last_error());
    dt_tensor_release(local);
    dt_mesh_release(mesh);
    CT_OK(dt_comm_barrier(dt_runtime_world(ct_rt), NULL)); /* nothing broke */
}

/* Rank 0 redistributes to R (R,R on a 2x2 mesh), the others to S(1)
 * (S(1),S(0)): every rank fails, and the world's family is aborted. */
static void test_redistribute_placements(void **state)
{
    (void)state;
    const int p = dt_runtime_size(ct_rt), me = dt_runtime_rank(ct_rt);
    const int nd = p == 4 ? 2 : 1;
    int shape[2] = {nd == 2 ? 2 : p, 2};
    dt_mesh *mesh = NULL;
    dt_tensor *full = NULL, *flat = NULL, *d = NULL, *y = NULL;
    int64_t fs[2] = {8, 8};
    CT_OK(dt_tensor_arange(64, DT_DTYPE_F32, &flat));
    CT_OK(dt_tensor_reshape(flat, 2, fs, &full));
    dt_placement src[2] = {dt_shard(0), dt_shard(1)}, to[2] = {dt_shard(1), dt_shard(0)};
    if (me == 0)
        to[0] = to[1] = dt_replicate();
    /* a rank still making the mesh when rank 0 fails fails there: also in time */
    double t0 = ft_now();
    dt_status st = dt_mesh_create(ct_rt, nd, shape, NULL, &mesh);
    if (st == DT_OK)
        st = dt_distribute(full, mesh, nd, src, &d);
    if (st == DT_OK)
        st = dt_redistribute(d, nd, to, &y);
    ft_expect_failed(st, t0, 5.0, "redistribute");
    dt_comm *w = dt_runtime_world(ct_rt);
    assert_int_not_equal(dt_comm_status(w), DT_OK);
    assert_non_null(strstr(dt_last_error(), "aborted after world rank"));
    assert_int_not_equal(dt_comm_barrier(w, NULL), DT_OK); /* at once */
    dt_tensor_release(y);
    dt_tensor_release(d);
    dt_tensor_release(full);
    dt_tensor_release(flat);
    dt_mesh_release(mesh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce_count),         cmocka_unit_test(test_allreduce_op),
        cmocka_unit_test(test_allgather_dtype),         cmocka_unit_test(test_from_local_shapes),
        cmocka_unit_test(test_redistribute_placements), /* last: it aborts the world */
    };
    return cmocka_run_group_tests(tests, ct_setup, ct_teardown);
}
