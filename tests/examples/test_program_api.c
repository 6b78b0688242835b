/*
 * What the examples are written with (include/dtensor/scope.h and the batch
 * helpers of nn.h), on 1 to 3 dtrun ranks: scopes release exactly the
 * references given to them; DT_TRY_RETURN / DT_TRY_GOTO propagate; dt_set_error
 * reads back; dt_dp_rows / dt_dp_batch split a batch as train_gpt does; dt_item
 * reads local, Replicate and Partial scalars; dt_dp_mean_loss is the global
 * batch's loss.
 */
#include "common/multirank.h"

/* Live host bytes: what a release gives back. */
static int64_t live(void)
{
    dt_memory_stats s;
    MR_OK(dt_memory_stats_get(dt_device_cpu(), &s));
    return s.total_current;
}

static dt_tensor *vec(int64_t n, double value)
{
    dt_tensor *t = NULL;
    MR_OK(dt_tensor_full(1, &n, DT_DTYPE_F32, dt_device_cpu(), value, &t));
    return t;
}

/* ---------------------------------------------------------------- scopes */

static void test_scope_end_releases_what_it_got(void **state)
{
    (void)state;
    int64_t base = live();
    MR_OK(dt_scope_begin());
    assert_int_equal(dt_scope_depth(), 1);
    dt_tensor *a = dt_scope_add(vec(1000, 1.0));
    dt_scope_add(vec(500, 2.0));
    assert_non_null(a);
    assert_int_equal(live(), base + 6000);
    dt_scope_end();
    assert_int_equal(dt_scope_depth(), 0);
    assert_int_equal(live(), base);
}

static void test_scope_retained_and_kept_survive(void **state)
{
    (void)state;
    int64_t base = live();
    MR_OK(dt_scope_begin());
    dt_tensor *r = dt_tensor_retain(dt_scope_add(vec(100, 3.0))); /* a second reference */
    dt_tensor *k = dt_scope_keep(dt_scope_add(vec(200, 4.0)));    /* taken back */
    dt_tensor *twice = dt_scope_add(vec(300, 5.0));
    dt_scope_add(dt_tensor_retain(twice)); /* two references, both the scope's */
    dt_scope_end();
    assert_int_equal(live(), base + 1200);
    assert_float_equal(dt_tensor_item_at(r, 99), 3.0, 0.0);
    assert_float_equal(dt_tensor_item_at(k, 199), 4.0, 0.0);
    dt_tensor_release(r);
    dt_tensor_release(k);
    assert_int_equal(live(), base);
    /* keep of a tensor no scope holds changes nothing: the caller owns it already */
    dt_tensor *own = vec(10, 1.0);
    MR_OK(dt_scope_begin());
    assert_ptr_equal(dt_scope_keep(own), own);
    assert_null(dt_scope_keep(NULL));
    assert_null(dt_scope_add(NULL));
    dt_scope_end();
    dt_tensor_release(own);
    assert_int_equal(live(), base);
}

static void test_scope_nesting(void **state)
{
    (void)state;
    int64_t base = live();
    MR_OK(dt_scope_begin());
    dt_scope_add(vec(100, 1.0));
    MR_OK(dt_scope_begin());
    dt_tensor *inner = dt_scope_add(vec(50, 2.0));
    dt_tensor *out = dt_scope_keep(inner); /* handed to the outer scope, as a result is */
    dt_scope_end();
    assert_int_equal(dt_scope_depth(), 1);
    assert_int_equal(live(), base + 600);
    dt_scope_add(out);
    dt_scope_end();
    assert_int_equal(live(), base);
}

static void test_scope_misuse_is_harmless(void **state)
{
    (void)state;
    int64_t base = live();
    dt_scope_end(); /* nothing open: a warning only */
    dt_tensor *t = vec(10, 1.0);
    assert_ptr_equal(dt_scope_add(t), t); /* no scope: stays the caller's */
    assert_int_equal(live(), base + 40);
    dt_tensor_release(t);
    assert_int_equal(live(), base);
    assert_int_equal(dt_scope_depth(), 0);
}

/* ---------------------------------------------------------------- errors */

static dt_status fails_with_return(void)
{
    dt_tensor *t = NULL;
    int64_t bad = -3;
    DT_TRY_RETURN(dt_tensor_empty(1, &bad, DT_DTYPE_F32, dt_device_cpu(), &t));
    return DT_ERR_INTERNAL; /* not reached */
}

static dt_status fails_with_goto(int *cleaned)
{
    dt_status s = DT_OK;
    DT_TRY_GOTO(dt_set_error(DT_ERR_NOT_FOUND, "no layer named '%s'", "fc9"), s, out);
    s = DT_ERR_INTERNAL; /* not reached */
out:
    *cleaned = 1;
    return s;
}

static void test_try_macros_and_set_error(void **state)
{
    (void)state;
    assert_int_equal(fails_with_return(), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "-3"));
    int cleaned = 0;
    assert_int_equal(fails_with_goto(&cleaned), DT_ERR_NOT_FOUND);
    assert_int_equal(cleaned, 1);
    assert_non_null(strstr(dt_last_error(), "no layer named 'fc9'"));
    assert_int_equal(dt_set_error(DT_OK, "%s", "x"), DT_OK);
}

/* ---------------------------------------------------------------- batches */

static void test_dp_rows_and_batch(void **state)
{
    (void)state;
    int64_t lo = -1, hi = -1;
    MR_OK(dt_dp_rows(NULL, "dp", 10, &lo, &hi));
    assert_true(lo == 0 && hi == 10);
    const int64_t want[3][2] = {{0, 3}, {3, 6}, {6, 10}}; /* r*B/R: train_gpt's split */
    int shape[2] = {3, 2};
    const char *names[2] = {"dp", "tp"};
    int64_t rows[2] = {10, 2};
    dt_tensor *ar = NULL, *b = NULL;
    MR_OK(dt_tensor_arange(20, DT_DTYPE_F32, &ar));
    MR_OK(dt_tensor_view(ar, 2, rows, &b));
    for (int rank = 0; rank < 6; rank++) {
        dt_mesh *m = NULL;
        dt_tensor *mine = NULL;
        MR_OK(dt_mesh_create_virtual(2, shape, names, rank, &m));
        MR_OK(dt_dp_rows(m, "dp", 10, &lo, &hi));
        assert_true(lo == want[rank / 2][0] && hi == want[rank / 2][1]);
        MR_OK(dt_dp_batch(b, m, "dp", &mine));
        assert_int_equal(dt_tensor_dim(mine, 0), hi - lo);
        assert_float_equal(dt_tensor_item_at(mine, 0), (double)(2 * lo), 0.0);
        dt_tensor_release(mine);
        assert_int_equal(dt_dp_rows(m, "pd", 10, &lo, &hi), DT_ERR_NOT_FOUND);
        assert_non_null(strstr(dt_last_error(), "pd"));
        assert_int_equal(dt_dp_rows(m, "dp", -1, &lo, &hi), DT_ERR_INVALID_ARG);
        dt_mesh_release(m);
    }
    dt_tensor *same = NULL;
    MR_OK(dt_dp_batch(b, NULL, NULL, &same));
    assert_ptr_equal(same, b);
    dt_tensor_release(same);
    dt_tensor_release(b);
    dt_tensor_release(ar);
}

/* ---------------------------------------------------------------- items and losses */

static void test_item_local_replicate_partial(void **state)
{
    (void)state;
    double v = 0.0;
    dt_tensor *two = vec(2, 1.0), *scalar = NULL, *rep = NULL, *part = NULL, *mine = NULL;
    assert_int_equal(dt_item(two, &v), DT_ERR_INVALID_ARG);
    MR_OK(dt_tensor_full(0, NULL, DT_DTYPE_F32, dt_device_cpu(), 3.5, &scalar));
    MR_OK(dt_item(scalar, &v));
    assert_float_equal(v, 3.5, 0.0);

    dt_mesh *mesh = mr_world_mesh("dp");
    int w = dt_mesh_size(mesh), r = dt_mesh_rank(mesh);
    dt_placement R = dt_replicate(), P = dt_partial(DT_REDUCE_OP_SUM);
    MR_OK(dt_distribute(scalar, mesh, 1, &R, &rep));
    MR_OK(dt_item(rep, &v)); /* not collective: the local value */
    assert_float_equal(v, 3.5, 0.0);
    MR_OK(dt_tensor_full(0, NULL, DT_DTYPE_F32, dt_device_cpu(), r + 1.0, &mine));
    MR_OK(dt_from_local(mine, mesh, 1, &P, NULL, &part));
    MR_OK(dt_item(part, &v)); /* collective: the sum over ranks */
    assert_float_equal(v, w * (w + 1) / 2.0, 0.0);

    /* rank r's mean loss r + 1 over its rows of 10: the global batch's mean */
    double want = 0.0;
    for (int q = 0; q < w; q++)
        want += (q + 1.0) * (double)((q + 1) * 10 / w - q * 10 / w) / 10.0;
    MR_OK(dt_dp_mean_loss(mine, mesh, "dp", 10, &v));
    assert_float_equal(v, want, 1e-12);
    MR_OK(dt_dp_mean_loss(rep, NULL, NULL, 10, &v));
    assert_float_equal(v, 3.5, 0.0);
    assert_int_equal(dt_dp_mean_loss(mine, mesh, "dp", 0, &v), DT_ERR_INVALID_ARG);

    dt_tensor_release(part);
    dt_tensor_release(mine);
    dt_tensor_release(rep);
    dt_mesh_release(mesh);
    dt_tensor_release(scalar);
    dt_tensor_release(two);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scope_end_releases_what_it_got),
        cmocka_unit_test(test_scope_retained_and_kept_survive),
        cmocka_unit_test(test_scope_nesting),
        cmocka_unit_test(test_scope_misuse_is_harmless),
        cmocka_unit_test(test_try_macros_and_set_error),
        cmocka_unit_test(test_dp_rows_and_batch),
        cmocka_unit_test(test_item_local_replicate_partial),
    };
    return cmocka_run_group_tests(tests, mr_setup, mr_teardown);
}
