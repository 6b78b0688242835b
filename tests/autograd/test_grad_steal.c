/*
 * A leaf's first gradient takes the storage of the gradient the engine
 * computed when nothing else references it (no copy: PyTorch's AccumulateGrad
 * does the same), and is copied otherwise: a gradient the user passed to
 * dt_backward, one handed to two inputs, one that is a view. Checked through
 * the memory accounting (peak and per category, exact at the end), data
 * pointers and values over two backwards.
 */
#include "ag_test_util.h"

#define N_OUT 512
#define N_IN  1024
#define BATCH 8

static const int64_t sw[2] = {N_OUT, N_IN}, sx[2] = {BATCH, N_IN};
static const int64_t gw_bytes = (int64_t)sizeof(float) * N_OUT * N_IN;

static dt_memory_stats stats(void)
{
    dt_memory_stats st;
    AG_OK(dt_memory_stats_get(dt_device_cpu(), &st));
    return st;
}

static dt_tensor *leaf(int nd, const int64_t *s)
{
    dt_tensor *t = ag_rand_tensor(nd, s, -1, 1);
    AG_OK(dt_tensor_set_requires_grad(t, true));
    return t;
}

/* loss = sum(x W^T) */
static dt_tensor *linear_loss(dt_tensor *x, dt_tensor *w)
{
    dt_tensor *y = NULL, *l = NULL;
    AG_OK(dt_linear(x, w, NULL, &y));
    AG_OK(dt_sum_all(y, &l));
    dt_tensor_release(y);
    return l;
}

/* d sum(x W^T) / dW[j, k] = times * sum_b x[b, k], for every j */
static void expect_linear_grad(dt_tensor *w, dt_tensor *x, double times)
{
    dt_tensor *g = dt_tensor_grad(w);
    assert_non_null(g);
    double col[N_IN] = {0};
    for (int b = 0; b < BATCH; b++)
        for (int k = 0; k < N_IN; k++)
            col[k] += dt_tensor_item_at(x, (int64_t)b * N_IN + k);
    const float *p = dt_tensor_data(g);
    for (int64_t j = 0; j < N_OUT; j++)
        for (int64_t k = 0; k < N_IN; k++) {
            double want = times * col[k], got = p[j * N_IN + k];
            if (fabs(got - want) > 1e-4 * (1 + fabs(want)))
                fail_msg("W.grad[%lld, %lld] = %g, want %g", (long long)j, (long long)k, got, want);
        }
}

static void test_first_grad_not_copied(void **state)
{
    (void)state;
    dt_memory_stats st0 = stats();
    dt_tensor *w = leaf(2, sw), *x = ag_rand_tensor(2, sx, -1, 1);
    dt_tensor *l = linear_loss(x, w);
    dt_memory_stats st1 = stats();
    dt_memory_reset_peak(dt_device_cpu());
    AG_OK(dt_backward(l, NULL));
    dt_memory_stats st2 = stats();
    /* the matmul's dW (activation) becomes W.grad: one gradient's size at the
     * peak, not two (computed one + its copy), plus the small dY */
    int64_t rise = st2.total_peak - st1.total_current;
    assert_true(rise >= gw_bytes);
    if (rise >= gw_bytes + gw_bytes / 2)
        fail_msg("backward peaked %lld bytes over its start, W.grad is %lld", (long long)rise,
                 (long long)gw_bytes);
    assert_int_equal(dt_tensor_mem_category(dt_tensor_grad(w)), DT_MEM_GRADIENT);
    assert_int_equal(st2.current[DT_MEM_GRADIENT] - st0.current[DT_MEM_GRADIENT], gw_bytes);
    assert_int_equal(st2.current[DT_MEM_ACTIVATION] - st1.current[DT_MEM_ACTIVATION],
                     -(st1.current[DT_MEM_ACTIVATION] - st0.current[DT_MEM_ACTIVATION]) +
                         (int64_t)sizeof(float)); /* only the loss scalar is left */
    expect_linear_grad(w, x, 1.0);
    dt_tensor *ts[3] = {l, x, w};
    ag_release_all(3, ts);
    dt_memory_stats st3 = stats();
    for (int c = 0; c < DT_MEM_CATEGORY_COUNT; c++)
        assert_int_equal(st3.current[c], st0.current[c]);
}

static void test_second_backward_accumulates_in_place(void **state)
{
    (void)state;
    dt_memory_stats st0 = stats();
    dt_tensor *w = leaf(2, sw), *x = ag_rand_tensor(2, sx, -1, 1);
    dt_tensor *l = linear_loss(x, w);
    AG_OK(dt_backward(l, NULL));
    dt_tensor_release(l);
    const void *first = dt_tensor_data(dt_tensor_grad(w));
    l = linear_loss(x, w);
    AG_OK(dt_backward(l, NULL));
    dt_tensor_release(l);
    assert_ptr_equal(dt_tensor_data(dt_tensor_grad(w)), first);
    expect_linear_grad(w, x, 2.0);
    dt_memory_stats st1 = stats();
    assert_int_equal(st1.current[DT_MEM_GRADIENT] - st0.current[DT_MEM_GRADIENT], gw_bytes);
    assert_int_equal(st1.current[DT_MEM_ACTIVATION], st0.current[DT_MEM_ACTIVATION]);
    AG_OK(dt_tensor_set_grad(w, NULL));
    assert_int_equal(stats().current[DT_MEM_GRADIENT], st0.current[DT_MEM_GRADIENT]);
    dt_tensor *ts[2] = {x, w};
    ag_release_all(2, ts);
    dt_memory_stats st2 = stats();
    for (int c = 0; c < DT_MEM_CATEGORY_COUNT; c++)
        assert_int_equal(st2.current[c], st0.current[c]);
}

/* u unchanged and x.grad == times * u, in its own storage */
static void expect_user_grad_kept(dt_tensor *x, dt_tensor *u, const float *u0, double times)
{
    dt_tensor *g = dt_tensor_grad(x);
    assert_non_null(g);
    assert_ptr_not_equal(dt_tensor_data(g), dt_tensor_data(u));
    for (int64_t i = 0; i < dt_tensor_numel(u); i++) {
        assert_true(dt_tensor_item_at(u, i) == u0[i]);
        assert_true(fabs(dt_tensor_item_at(g, i) - times * u0[i]) < 1e-6);
    }
}

typedef dt_status (*unary_fn)(dt_tensor *x, dt_tensor **out);

static dt_status plus_zero(dt_tensor *x, dt_tensor **out)
{
    return dt_add_scalar(x, 0.0, out);
}

static dt_status same_shape_reshape(dt_tensor *x, dt_tensor **out)
{
    return dt_reshape(x, 2, dt_tensor_shape(x), out);
}

static void test_user_grad_never_stolen(void **state)
{
    (void)state;
    static const int64_t s[2] = {4, 6};
    dt_memory_stats st0 = stats();
    unary_fn fns[3] = {NULL, plus_zero, same_shape_reshape}; /* NULL: the leaf is the root */
    for (int f = 0; f < 3; f++) {
        dt_tensor *x = leaf(2, s), *u = ag_rand_tensor(2, s, -1, 1);
        float u0[24];
        memcpy(u0, dt_tensor_data(u), sizeof(u0));
        for (int pass = 1; pass <= 2; pass++) {
            dt_tensor *y = NULL;
            if (fns[f] == NULL)
                y = dt_tensor_retain(x);
            else
                AG_OK(fns[f](x, &y));
            AG_OK(dt_backward(y, u));
            dt_tensor_release(y);
            expect_user_grad_kept(x, u, u0, pass);
        }
        dt_tensor *ts[2] = {x, u};
        ag_release_all(2, ts);
    }
    dt_memory_stats st1 = stats();
    for (int c = 0; c < DT_MEM_CATEGORY_COUNT; c++)
        assert_int_equal(st1.current[c], st0.current[c]);
}

/* a + b and x + x: a gradient handed to two inputs is not shared by them */
static void test_shared_gradient_not_aliased(void **state)
{
    (void)state;
    static const int64_t s[2] = {3, 5};
    dt_memory_stats st0 = stats();
    dt_tensor *a = leaf(2, s), *b = leaf(2, s), *y = NULL, *l = NULL;
    AG_OK(dt_add(a, b, &y));
    AG_OK(dt_sum_all(y, &l));
    AG_OK(dt_backward(l, NULL));
    dt_tensor_release(l);
    dt_tensor_release(y);
    assert_ptr_not_equal(dt_tensor_data(dt_tensor_grad(a)), dt_tensor_data(dt_tensor_grad(b)));
    AG_OK(dt_scale(a, 3.0, &y)); /* only a.grad moves */
    AG_OK(dt_sum_all(y, &l));
    AG_OK(dt_backward(l, NULL));
    ag_release_all(1, &l);
    ag_release_all(1, &y);
    for (int64_t i = 0; i < 15; i++) {
        assert_true(fabs(dt_tensor_item_at(dt_tensor_grad(a), i) - 4.0) < 1e-6);
        assert_true(fabs(dt_tensor_item_at(dt_tensor_grad(b), i) - 1.0) < 1e-6);
    }
    AG_OK(dt_add(a, a, &y));
    AG_OK(dt_sum_all(y, &l));
    AG_OK(dt_tensor_set_grad(a, NULL));
    AG_OK(dt_backward(l, NULL));
    for (int64_t i = 0; i < 15; i++)
        assert_true(fabs(dt_tensor_item_at(dt_tensor_grad(a), i) - 2.0) < 1e-6);
    dt_tensor *ts[4] = {l, y, a, b};
    ag_release_all(4, ts);
    dt_memory_stats st1 = stats();
    for (int c = 0; c < DT_MEM_CATEGORY_COUNT; c++)
        assert_int_equal(st1.current[c], st0.current[c]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_grad_not_copied),
        cmocka_unit_test(test_second_backward_accumulates_in_place),
        cmocka_unit_test(test_user_grad_never_stolen),
        cmocka_unit_test(test_shared_gradient_not_aliased),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
