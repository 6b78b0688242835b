/*
 * dt_autocast_set(DT_DTYPE_BF16): dt_linear and dt_matmul multiply
 * bf16-rounded operands with f32 accumulation, forward and backward (the
 * backward in the dtype its forward ran in, whatever the setting is by then),
 * while results, gradients and everything else stay f32. References: the
 * same ops in f32 on operands rounded to bf16 by hand.
 */
#include "ag_test_util.h"

/* @p t's values rounded to bf16, as a new f32 tensor. */
static dt_tensor *rounded(const dt_tensor *t)
{
    dt_tensor *h = NULL, *f = NULL;
    assert_int_equal(dt_tensor_to_dtype(t, DT_DTYPE_BF16, &h), DT_OK);
    assert_int_equal(dt_tensor_to_dtype(h, DT_DTYPE_F32, &f), DT_OK);
    dt_tensor_release(h);
    return f;
}

/* loss = sum(y * g), so dL/dy = g. */
static dt_tensor *weighted(dt_tensor *y, dt_tensor *g)
{
    dt_tensor *p = NULL, *l = NULL;
    assert_int_equal(dt_mul(y, g, &p), DT_OK);
    assert_int_equal(dt_sum_all(p, &l), DT_OK);
    dt_tensor_release(p);
    return l;
}

/* @p got equals @p want to f32 accumulation error, and differs from @p unrounded. */
static void expect_bf16(const char *what, const dt_tensor *got, const dt_tensor *want,
                        const dt_tensor *unrounded)
{
    double *w = ag_vals(want), *u = ag_vals(unrounded);
    ag_expect_close(what, w, got, 1e-5, 1e-5);
    double diff = 0;
    for (int64_t i = 0; i < dt_tensor_numel(got); i++)
        diff = fmax(diff, fabs(dt_tensor_item_at(got, i) - u[i]));
    if (!(diff > 1e-4)) /* rounding to bf16 (8 bits) must show */
        fail_msg("%s: max |autocast - f32| is %.3g: the operands were not rounded", what, diff);
    free(w);
    free(u);
}

static void test_linear(void **state)
{
    (void)state;
    int64_t xs[3] = {2, 3, 32}, ws[2] = {24, 32}, bs[1] = {24}, ys[3] = {2, 3, 24};
    dt_tensor *x = ag_rand_tensor(3, xs, -1, 1), *w = ag_rand_tensor(2, ws, -1, 1);
    dt_tensor *b = ag_rand_tensor(1, bs, -1, 1), *g = ag_rand_tensor(3, ys, -1, 1);
    dt_tensor *xr = rounded(x), *wr = rounded(w), *gr = rounded(g);
    dt_tensor *in[3] = {x, w, b};
    for (int i = 0; i < 3; i++)
        assert_int_equal(dt_tensor_set_requires_grad(in[i], true), DT_OK);
    dt_dtype prev = DT_DTYPE_BF16;
    assert_int_equal(dt_autocast_set(DT_DTYPE_BF16, &prev), DT_OK);
    assert_int_equal(prev, DT_DTYPE_F32);
    assert_int_equal(dt_autocast_get(), DT_DTYPE_BF16);
    dt_tensor *y = NULL;
    assert_int_equal(dt_linear(x, w, b, &y), DT_OK);
    assert_int_equal(dt_tensor_dtype(y), DT_DTYPE_F32);
    assert_int_equal(dt_autocast_set(DT_DTYPE_F32, NULL), DT_OK); /* backward keeps bf16 */
    dt_tensor *loss = weighted(y, g);
    assert_int_equal(dt_backward(loss, NULL), DT_OK);

    dt_tensor *y_ref = NULL, *y32 = NULL, *gx_ref = NULL, *gx32 = NULL, *gw_ref = NULL;
    dt_tensor *gw32 = NULL;
    assert_int_equal(dt_grad_set_enabled(false), true);
    assert_int_equal(dt_linear(xr, wr, b, &y_ref), DT_OK);
    assert_int_equal(dt_linear(x, w, b, &y32), DT_OK);
    expect_bf16("linear forward", y, y_ref, y32);
    assert_int_equal(dt_matmul(gr, wr, false, false, &gx_ref), DT_OK); /* gx = g W */
    assert_int_equal(dt_matmul(g, w, false, false, &gx32), DT_OK);
    expect_bf16("linear dx", dt_tensor_grad(x), gx_ref, gx32);
    int64_t g2s[2] = {6, 24}, x2s[2] = {6, 32};
    dt_tensor *g2 = NULL, *x2 = NULL, *g2r = NULL, *x2r = NULL;
    assert_int_equal(dt_tensor_reshape(g, 2, g2s, &g2), DT_OK);
    assert_int_equal(dt_tensor_reshape(x, 2, x2s, &x2), DT_OK);
    assert_int_equal(dt_tensor_reshape(gr, 2, g2s, &g2r), DT_OK);
    assert_int_equal(dt_tensor_reshape(xr, 2, x2s, &x2r), DT_OK);
    assert_int_equal(dt_matmul(g2r, x2r, true, false, &gw_ref), DT_OK); /* gW = g^T x */
    assert_int_equal(dt_matmul(g2, x2, true, false, &gw32), DT_OK);
    expect_bf16("linear dW", dt_tensor_grad(w), gw_ref, gw32);
    dt_grad_set_enabled(true);
    dt_tensor *all[] = {x,   w,      b,    g,      xr,   wr, gr, y,   loss, y_ref,
                        y32, gx_ref, gx32, gw_ref, gw32, g2, x2, g2r, x2r};
    ag_release_all((int)(sizeof(all) / sizeof(all[0])), all);
}

/* A batched product with a shared 2-d b (its gradient is one flattened GEMM). */
static void test_matmul(void **state)
{
    (void)state;
    int64_t as[3] = {4, 5, 16}, bs[2] = {16, 12}, cs[3] = {4, 5, 12};
    dt_tensor *a = ag_rand_tensor(3, as, -1, 1), *b = ag_rand_tensor(2, bs, -1, 1);
    dt_tensor *g = ag_rand_tensor(3, cs, -1, 1);
    dt_tensor *ar = rounded(a), *br = rounded(b), *gr = rounded(g);
    assert_int_equal(dt_tensor_set_requires_grad(a, true), DT_OK);
    assert_int_equal(dt_tensor_set_requires_grad(b, true), DT_OK);
    assert_int_equal(dt_autocast_set(DT_DTYPE_BF16, NULL), DT_OK);
    dt_tensor *c = NULL;
    assert_int_equal(dt_matmul(a, b, false, false, &c), DT_OK);
    dt_tensor *loss = weighted(c, g);
    assert_int_equal(dt_backward(loss, NULL), DT_OK);
    assert_int_equal(dt_autocast_set(DT_DTYPE_F32, NULL), DT_OK);

    dt_tensor *c_ref = NULL, *c32 = NULL, *ga_ref = NULL, *ga32 = NULL;
    assert_int_equal(dt_grad_set_enabled(false), true);
    assert_int_equal(dt_matmul(ar, br, false, false, &c_ref), DT_OK);
    assert_int_equal(dt_matmul(a, b, false, false, &c32), DT_OK);
    expect_bf16("matmul forward", c, c_ref, c32);
    assert_int_equal(dt_matmul(gr, br, false, true, &ga_ref), DT_OK); /* dA = dC B^T */
    assert_int_equal(dt_matmul(g, b, false, true, &ga32), DT_OK);
    expect_bf16("matmul da", dt_tensor_grad(a), ga_ref, ga32);
    /* dB = sum over the batch of A^T dC: f32 sums of bf16 products */
    int64_t a2s[2] = {20, 16}, g2s[2] = {20, 12};
    dt_tensor *a2r = NULL, *g2r = NULL, *a2 = NULL, *g2 = NULL, *gb_ref = NULL, *gb32 = NULL;
    assert_int_equal(dt_tensor_reshape(ar, 2, a2s, &a2r), DT_OK);
    assert_int_equal(dt_tensor_reshape(gr, 2, g2s, &g2r), DT_OK);
    assert_int_equal(dt_tensor_reshape(a, 2, a2s, &a2), DT_OK);
    assert_int_equal(dt_tensor_reshape(g, 2, g2s, &g2), DT_OK);
    assert_int_equal(dt_matmul(a2r, g2r, true, false, &gb_ref), DT_OK);
    assert_int_equal(dt_matmul(a2, g2, true, false, &gb32), DT_OK);
    expect_bf16("matmul db", dt_tensor_grad(b), gb_ref, gb32);
    dt_grad_set_enabled(true);
    dt_tensor *all[] = {a,   b,      g,    ar,  br,  gr, c,  loss,   c_ref,
                        c32, ga_ref, ga32, a2r, g2r, a2, g2, gb_ref, gb32};
    ag_release_all((int)(sizeof(all) / sizeof(all[0])), all);
}

/* Live bytes of the activation category. */
static int64_t activation_bytes(void)
{
    dt_memory_stats ms;
    assert_int_equal(dt_memory_stats_get(dt_device_cpu(), &ms), DT_OK);
    return ms.current[DT_MEM_ACTIVATION];
}

/*
 * Operands that are activations (attention's q, k, v, probabilities), one
 * of them a transposed view: the node keeps their bf16 copies (half the
 * bytes, the f32 ones are freed) and the gradients are those of the rounded
 * operands.
 */
static void test_matmul_activations(void **state)
{
    (void)state;
    int64_t as[3] = {4, 5, 16}, bs[3] = {4, 12, 16}, cs[3] = {4, 5, 12};
    dt_tensor *a0 = ag_rand_tensor(3, as, -1, 1), *b0 = ag_rand_tensor(3, bs, -1, 1);
    dt_tensor *g = ag_rand_tensor(3, cs, -1, 1);
    dt_tensor *ar = rounded(a0), *br = rounded(b0), *gr = rounded(g);
    assert_int_equal(dt_tensor_set_requires_grad(a0, true), DT_OK);
    assert_int_equal(dt_tensor_set_requires_grad(b0, true), DT_OK);
    int64_t before = activation_bytes();
    dt_tensor *a = NULL, *b1 = NULL, *b = NULL, *c = NULL;
    assert_int_equal(dt_scale(a0, 1.0, &a), DT_OK); /* activations */
    assert_int_equal(dt_scale(b0, 1.0, &b1), DT_OK);
    assert_int_equal(dt_transpose(b1, 1, 2, &b), DT_OK); /* [4, 16, 12], a view */
    assert_int_equal(dt_autocast_set(DT_DTYPE_BF16, NULL), DT_OK);
    assert_int_equal(dt_matmul(a, b, false, false, &c), DT_OK);
    assert_int_equal(dt_autocast_set(DT_DTYPE_F32, NULL), DT_OK);
    dt_tensor_release(a);
    dt_tensor_release(b);
    dt_tensor_release(b1);
    /* c in f32, the saved a and b in bf16 */
    int64_t want = 4 * 5 * 12 * 4 + (4 * 5 * 16 + 4 * 16 * 12) * 2;
    assert_int_equal(activation_bytes() - before, want);
    dt_tensor *loss = weighted(c, g);
    assert_int_equal(dt_backward(loss, NULL), DT_OK);

    dt_tensor *c_ref = NULL, *c32 = NULL, *ga_ref = NULL, *ga32 = NULL, *gb_ref = NULL;
    dt_tensor *gb32 = NULL;
    assert_int_equal(dt_grad_set_enabled(false), true);
    assert_int_equal(dt_matmul(ar, br, false, true, &c_ref), DT_OK);
    assert_int_equal(dt_matmul(a0, b0, false, true, &c32), DT_OK);
    expect_bf16("activations forward", c, c_ref, c32);
    assert_int_equal(dt_matmul(gr, br, false, false, &ga_ref), DT_OK); /* dA = dC B */
    assert_int_equal(dt_matmul(g, b0, false, false, &ga32), DT_OK);
    expect_bf16("activations da", dt_tensor_grad(a0), ga_ref, ga32);
    assert_int_equal(dt_matmul(gr, ar, true, false, &gb_ref), DT_OK); /* dB = dC^T A */
    assert_int_equal(dt_matmul(g, a0, true, false, &gb32), DT_OK);
    expect_bf16("activations db", dt_tensor_grad(b0), gb_ref, gb32);
    dt_grad_set_enabled(true);
    dt_tensor *all[] = {a0, b0, g, ar, br, gr, c, loss, c_ref, c32, ga_ref, ga32, gb_ref, gb32};
    ag_release_all((int)(sizeof(all) / sizeof(all[0])), all);
}

/* dt_round_to_dtype: bf16 values forward, the gradient rounded likewise. */
static void test_round_to_dtype(void **state)
{
    (void)state;
    int64_t xs[2] = {7, 33};
    dt_tensor *x = ag_rand_tensor(2, xs, -3, 3), *g = ag_rand_tensor(2, xs, -1, 1);
    dt_tensor *xr = rounded(x), *gr = rounded(g), *y = NULL, *same = NULL;
    assert_int_equal(dt_tensor_set_requires_grad(x, true), DT_OK);
    assert_int_equal(dt_round_to_dtype(x, DT_DTYPE_BF16, &y), DT_OK);
    assert_true(dt_tensor_equal(y, xr));
    assert_false(dt_tensor_equal(y, x)); /* the rounding shows */
    dt_tensor *loss = weighted(y, g);
    assert_int_equal(dt_backward(loss, NULL), DT_OK);
    assert_true(dt_tensor_equal(dt_tensor_grad(x), gr));
    assert_int_equal(dt_round_to_dtype(x, DT_DTYPE_F32, &same), DT_OK);
    assert_ptr_equal(same, x);
    assert_int_equal(dt_round_to_dtype(x, DT_DTYPE_F16, &same), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "dtype f16, expected bf16 or f32"));
    dt_tensor *all[] = {x, g, xr, gr, y, loss, same}; /* same is x, a second reference */
    ag_release_all((int)(sizeof(all) / sizeof(all[0])), all);
}

static void test_bad_dtype(void **state)
{
    (void)state;
    assert_int_equal(dt_autocast_get(), DT_DTYPE_F32);
    assert_int_equal(dt_autocast_set(DT_DTYPE_F16, NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "dtype f16, expected f32 (off) or bf16"));
    assert_int_equal(dt_autocast_get(), DT_DTYPE_F32);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_matmul_activations),
        cmocka_unit_test(test_round_to_dtype),
        cmocka_unit_test(test_bad_dtype),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
