/*
 * Element-wise kernels vs float64 references: binary ops with broadcasting
 * and strided (transposed, narrowed, expanded) operands, unary ops and the
 * GELU/ReLU backward, fill and copy across dtypes, masked fill, empty tensors.
 */
#include <string.h>

#include "kernels_test_util.h"

static double bin_ref(dt_binary_op op, double x, double y)
{
    switch (op) {
    case DT_BINARY_ADD:
        return x + y;
    case DT_BINARY_SUB:
        return x - y;
    case DT_BINARY_MUL:
        return x * y;
    case DT_BINARY_DIV:
        return x / y;
    }
    return 0;
}

/* out[i] over out's shape reading a and b by broadcasting (row-major index math). */
static void check_binary(const char *what, dt_binary_op op, dt_tensor *a, dt_tensor *b, int on,
                         const int64_t *oshape)
{
    dt_tensor *out = ku_empty(on, oshape, DT_DTYPE_F32);
    int64_t n = dt_tensor_numel(out);
    double *va = ku_values(a), *vb = ku_values(b);
    double *want = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, ia = 0, ib = 0, ma = 1, mb = 1;
        for (int d = on - 1; d >= 0; d--) {
            int64_t k = rem % oshape[d];
            rem /= oshape[d];
            int da = d - (on - dt_tensor_ndim(a)), db = d - (on - dt_tensor_ndim(b));
            if (da >= 0) {
                ia += (dt_tensor_dim(a, da) == 1 ? 0 : k) * ma;
                ma *= dt_tensor_dim(a, da);
            }
            if (db >= 0) {
                ib += (dt_tensor_dim(b, db) == 1 ? 0 : k) * mb;
                mb *= dt_tensor_dim(b, db);
            }
        }
        want[i] = (float)bin_ref(op, va[ia], vb[ib]);
    }
    assert_int_equal(ku_cpu()->binary(op, a, b, out), DT_OK);
    ku_expect_close(what, out, want, 1e-6, 1e-6);
    free(va);
    free(vb);
    free(want);
    dt_tensor_release(out);
}

static void test_binary_broadcast(void **state)
{
    (void)state;
    int64_t s3[3] = {4, 5, 33}, row[1] = {33}, col[3] = {4, 5, 1}, mid[2] = {5, 1};
    dt_tensor *a = ku_rand(3, s3, -2, 2), *b = ku_rand(3, s3, 0.5, 2);
    dt_tensor *r = ku_rand(1, row, 0.5, 2), *c = ku_rand(3, col, 0.5, 2);
    dt_tensor *m = ku_rand(2, mid, 0.5, 2), *sc = ku_rand(0, NULL, 0.5, 2);
    for (int op = DT_BINARY_ADD; op <= DT_BINARY_DIV; op++) {
        check_binary("same shape", op, a, b, 3, s3);
        check_binary("bias row", op, a, r, 3, s3);
        check_binary("column", op, a, c, 3, s3);
        check_binary("column first", op, c, a, 3, s3);
        check_binary("middle", op, m, a, 3, s3);
        check_binary("scalar", op, a, sc, 3, s3);
        check_binary("scalar first", op, sc, a, 3, s3);
        check_binary("outer product", op, c, r, 3, s3);
    }
    dt_tensor *objs[] = {a, b, r, c, m, sc};
    for (size_t i = 0; i < 6; i++)
        dt_tensor_release(objs[i]);
}

static void test_binary_strided(void **state)
{
    (void)state;
    int64_t s[3] = {6, 7, 8};
    dt_tensor *a = ku_rand(3, s, -1, 1), *b = ku_rand(3, s, -1, 1), *t = NULL, *nar = NULL;
    assert_int_equal(dt_tensor_transpose(a, 0, 2, &t), DT_OK); /* [8, 7, 6] */
    int64_t ts[3] = {8, 7, 6};
    dt_tensor *c = ku_rand(3, ts, -1, 1);
    check_binary("transposed", DT_BINARY_SUB, t, c, 3, ts);
    check_binary("transposed second", DT_BINARY_DIV, c, t, 3, ts);
    assert_int_equal(dt_tensor_narrow(b, 2, 3, 4, &nar), DT_OK); /* [6, 7, 4] */
    dt_tensor *exp_ = NULL;
    int64_t es[4] = {3, 6, 7, 4};
    assert_int_equal(dt_tensor_expand(nar, 4, es, &exp_), DT_OK);
    dt_tensor *d = ku_rand(4, es, -1, 1);
    check_binary("narrowed + expanded", DT_BINARY_MUL, exp_, d, 4, es);
    /* empty tensors: nothing happens, no error */
    int64_t z[2] = {0, 5};
    dt_tensor *e1 = ku_rand(2, z, -1, 1), *e2 = ku_rand(2, z, -1, 1);
    check_binary("empty", DT_BINARY_ADD, e1, e2, 2, z);
    /* not broadcastable: error naming the dim */
    int64_t bad[2] = {6, 3};
    dt_tensor *x = ku_rand(2, bad, -1, 1), *out = ku_empty(3, s, DT_DTYPE_F32);
    assert_int_equal(ku_cpu()->binary(DT_BINARY_ADD, a, x, out), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "not broadcastable"));
    dt_tensor *objs[] = {a, b, t, nar, c, exp_, d, e1, e2, x, out};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        dt_tensor_release(objs[i]);
}

static double un_ref(dt_unary_op op, double x, double alpha)
{
    switch (op) {
    case DT_UNARY_SCALE:
        return alpha * x;
    case DT_UNARY_ADD_SCALAR:
        return x + alpha;
    case DT_UNARY_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case DT_UNARY_RELU:
        return x > 0 ? x : 0;
    case DT_UNARY_EXP:
        return exp(x);
    case DT_UNARY_LOG:
        return log(x);
    case DT_UNARY_NEG:
        return -x;
    case DT_UNARY_SQRT:
        return sqrt(x);
    case DT_UNARY_SQUARE:
        return x * x;
    case DT_UNARY_ROUND_BF16:
        return dt_bf16_to_f32(dt_f32_to_bf16((float)x));
    }
    return 0;
}

static void test_unary(void **state)
{
    (void)state;
    int64_t s[2] = {13, 67};
    dt_tensor *x = ku_rand(2, s, -6, 6), *pos = ku_rand(2, s, 0.01, 9), *xt = NULL;
    assert_int_equal(dt_tensor_transpose(x, 0, 1, &xt), DT_OK);
    for (int op = DT_UNARY_SCALE; op <= DT_UNARY_ROUND_BF16; op++) {
        dt_tensor *in = (op == DT_UNARY_LOG || op == DT_UNARY_SQRT) ? pos : x;
        for (int strided = 0; strided < 2; strided++) {
            dt_tensor *src = strided && in == x ? xt : in;
            dt_tensor *out = ku_empty(dt_tensor_ndim(src), dt_tensor_shape(src), DT_DTYPE_F32);
            double *v = ku_values(src);
            for (int64_t i = 0; i < dt_tensor_numel(src); i++)
                v[i] = un_ref(op, v[i], 0.75);
            assert_int_equal(ku_cpu()->unary(op, src, 0.75f, out), DT_OK);
            char what[48];
            snprintf(what, sizeof(what), "unary op %d strided %d", op, strided);
            ku_expect_close(what, out, v, 1e-6, 2e-6);
            free(v);
            dt_tensor_release(out);
        }
    }
    /* exp limits: large negative -> 0, -inf -> 0, NaN stays NaN */
    float edge[5] = {-200.0f, -INFINITY, NAN, 0.0f, 80.0f};
    double want[5] = {0, 0, NAN, 1, exp(80.0)};
    int64_t es[1] = {5};
    dt_tensor *e = NULL, *eo = ku_empty(1, es, DT_DTYPE_F32);
    assert_int_equal(dt_tensor_from_buffer(1, es, DT_DTYPE_F32, edge, &e), DT_OK);
    assert_int_equal(ku_cpu()->unary(DT_UNARY_EXP, e, 0, eo), DT_OK);
    ku_expect_close("exp edges", eo, want, 0, 2e-6);
    /* bf16 rounding: ties to even (down from 1 + 2^-8, up from 1 + 3 2^-8), NaN, inf */
    float redge[5] = {1.00390625f, 1.01171875f, NAN, INFINITY, -3.0e38f};
    double rwant[5] = {1.0, 1.015625, NAN, INFINITY, -3.00405527047391e38};
    dt_tensor *re = NULL;
    assert_int_equal(dt_tensor_from_buffer(1, es, DT_DTYPE_F32, redge, &re), DT_OK);
    assert_int_equal(ku_cpu()->unary(DT_UNARY_ROUND_BF16, re, 0, eo), DT_OK);
    ku_expect_close("round_bf16 edges", eo, rwant, 0, 1e-7);
    dt_tensor_release(re);
    dt_tensor *objs[] = {x, pos, xt, e, eo};
    for (size_t i = 0; i < 5; i++)
        dt_tensor_release(objs[i]);
}

static void test_unary_backward(void **state)
{
    (void)state;
    int64_t s[2] = {9, 41};
    dt_tensor *x = ku_rand(2, s, -5, 5), *gy = ku_rand(2, s, -1, 1);
    double *vx = ku_values(x), *vg = ku_values(gy);
    int64_t n = dt_tensor_numel(x);
    double *want = malloc((size_t)n * sizeof(double));
    for (int op = 0; op < 2; op++) {
        dt_unary_op u = op == 0 ? DT_UNARY_GELU_TANH : DT_UNARY_RELU;
        for (int64_t i = 0; i < n; i++) {
            double h = 1e-6, d;
            if (u == DT_UNARY_RELU)
                d = vx[i] > 0 ? 1 : 0;
            else
                d = (un_ref(u, vx[i] + h, 0) - un_ref(u, vx[i] - h, 0)) / (2 * h);
            want[i] = vg[i] * d;
        }
        dt_tensor *gx = ku_empty(2, s, DT_DTYPE_F32);
        assert_int_equal(ku_cpu()->unary_backward(u, x, gy, gx), DT_OK);
        ku_expect_close("unary backward", gx, want, 1e-5, 1e-5);
        dt_tensor_release(gx);
    }
    dt_tensor *gx = ku_empty(2, s, DT_DTYPE_F32);
    assert_int_equal(ku_cpu()->unary_backward(DT_UNARY_EXP, x, gy, gx), DT_ERR_UNSUPPORTED);
    free(vx);
    free(vg);
    free(want);
    dt_tensor_release(gx);
    dt_tensor_release(x);
    dt_tensor_release(gy);
}

static void test_fill_copy(void **state)
{
    (void)state;
    int64_t s[2] = {5, 6};
    const dt_dtype types[] = {DT_DTYPE_F32, DT_DTYPE_F64, DT_DTYPE_BF16, DT_DTYPE_F16,
                              DT_DTYPE_I32, DT_DTYPE_I64, DT_DTYPE_U16,  DT_DTYPE_U8};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        assert_true(ku_cpu()->supports(DT_KOP_FILL, types[i]));
        dt_tensor *t = ku_empty(2, s, types[i]), *v = NULL;
        assert_int_equal(ku_cpu()->fill(t, 3.0), DT_OK);
        double want[30];
        for (int j = 0; j < 30; j++)
            want[j] = 3.0;
        ku_expect_close("fill", t, want, 0, 0);
        /* a strided view: only its elements change */
        assert_int_equal(dt_tensor_narrow(t, 1, 2, 3, &v), DT_OK);
        assert_int_equal(ku_cpu()->fill(v, 7.0), DT_OK);
        for (int j = 0; j < 30; j++)
            want[j] = (j % 6 >= 2 && j % 6 < 5) ? 7.0 : 3.0;
        ku_expect_close("fill view", t, want, 0, 0);
        dt_tensor_release(v);
        dt_tensor_release(t);
    }
    /* copy: strided f32 source into bf16 and f32 destinations */
    dt_tensor *src = ku_rand(2, s, -4, 4), *tr = NULL;
    assert_int_equal(dt_tensor_transpose(src, 0, 1, &tr), DT_OK);
    int64_t ts[2] = {6, 5};
    dt_tensor *d32 = ku_empty(2, ts, DT_DTYPE_F32), *d16 = ku_empty(2, ts, DT_DTYPE_BF16);
    double *v = ku_values(tr);
    assert_int_equal(ku_cpu()->copy(d32, tr), DT_OK);
    ku_expect_close("copy f32", d32, v, 0, 0);
    assert_int_equal(ku_cpu()->copy(d16, tr), DT_OK);
    ku_expect_close("copy bf16", d16, v, 0, 1.0 / 128);
    assert_int_equal(ku_cpu()->copy(d32, src), DT_ERR_INVALID_ARG);
    free(v);
    dt_tensor *objs[] = {src, tr, d32, d16};
    for (size_t i = 0; i < 4; i++)
        dt_tensor_release(objs[i]);
}

static void test_masked_fill(void **state)
{
    (void)state;
    int64_t s[3] = {3, 4, 19}, ms[2] = {4, 19}, mc[3] = {3, 1, 1};
    dt_tensor *x = ku_rand(3, s, -1, 1);
    uint8_t mbuf[4 * 19], cbuf[3] = {1, 0, 1};
    for (int i = 0; i < 4 * 19; i++)
        mbuf[i] = (uint8_t)(ku_uniform() < 0.3);
    dt_tensor *m = NULL, *c = NULL;
    assert_int_equal(dt_tensor_from_buffer(2, ms, DT_DTYPE_U8, mbuf, &m), DT_OK);
    assert_int_equal(dt_tensor_from_buffer(3, mc, DT_DTYPE_U8, cbuf, &c), DT_OK);
    double *vx = ku_values(x), want[3 * 4 * 19];
    dt_tensor *out = ku_empty(3, s, DT_DTYPE_F32);
    for (int i = 0; i < 3 * 4 * 19; i++)
        want[i] = mbuf[i % (4 * 19)] ? -1e9 : vx[i];
    assert_int_equal(ku_cpu()->masked_fill(x, m, -1e9f, out), DT_OK);
    ku_expect_close("masked_fill", out, want, 0, 1e-7);
    for (int i = 0; i < 3 * 4 * 19; i++)
        want[i] = cbuf[i / (4 * 19)] ? -INFINITY : vx[i];
    assert_int_equal(ku_cpu()->masked_fill(x, c, -INFINITY, out), DT_OK);
    ku_expect_close("masked_fill broadcast scalar per batch", out, want, 0, 0);
    free(vx);
    dt_tensor_release(out);
    dt_tensor_release(m);
    dt_tensor_release(c);
    dt_tensor_release(x);
}

/* Bad arguments return DT_ERR_INVALID_ARG (or UNSUPPORTED) with a message, never crash. */
static void test_bad_inputs(void **state)
{
    (void)state;
    const dt_kernel_ops *k = ku_cpu();
    int64_t s[2] = {4, 6}, t[2] = {6, 4};
    dt_tensor *x = ku_rand(2, s, -1, 1), *y = ku_empty(2, s, DT_DTYPE_F32);
    dt_tensor *i32 = ku_empty(2, s, DT_DTYPE_I32), *xt = NULL,
              *wrong = ku_empty(2, t, DT_DTYPE_F32);
    assert_int_equal(dt_tensor_transpose(wrong, 0, 1, &xt), DT_OK); /* [4, 6], not contiguous */
    assert_int_equal(k->binary(DT_BINARY_ADD, x, i32, y), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "dtype i32"));
    assert_int_equal(k->binary(DT_BINARY_ADD, x, x, xt), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "not contiguous"));
    assert_int_equal(k->binary((dt_binary_op)42, x, x, y), DT_ERR_INVALID_ARG);
    assert_int_equal(k->binary(DT_BINARY_ADD, NULL, x, y), DT_ERR_INVALID_ARG);
    assert_int_equal(k->unary(DT_UNARY_EXP, x, 0, wrong), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "[4, 6]"));
    assert_int_equal(k->unary((dt_unary_op)99, x, 0, y), DT_ERR_INVALID_ARG);
    assert_int_equal(k->softmax(x, 1.0f, false, false, wrong), DT_ERR_INVALID_ARG);
    assert_int_equal(k->layer_norm(x, wrong, NULL, 1e-5f, y, NULL, NULL), DT_ERR_INVALID_ARG);
    assert_int_equal(k->reduce(DT_REDUCE_KIND_SUM, x, -3, y, NULL), DT_ERR_INVALID_ARG);
    assert_int_equal(k->masked_fill(x, x, 0.0f, y), DT_ERR_INVALID_ARG); /* mask not u8 */
    assert_int_equal(k->gemm(x, x, false, false, 1.0f, 0.0f, y), DT_ERR_INVALID_ARG);
    assert_int_equal(k->embedding(x, x, 0, y), DT_ERR_INVALID_ARG); /* f32 ids */
    assert_non_null(strstr(dt_last_error(), "ids"));
    assert_int_equal(k->cross_entropy(x, NULL, -100, y, y), DT_ERR_INVALID_ARG);
    assert_int_equal(k->sum_squares(x, NULL), DT_ERR_INVALID_ARG);
    assert_int_equal(k->sgd_step(x, x, NULL, 0.1f, 0.9f, 0.0f), DT_ERR_INVALID_ARG);
    assert_int_equal(k->copy(NULL, x), DT_ERR_INVALID_ARG);
    assert_int_equal(k->fill(NULL, 1.0), DT_ERR_INVALID_ARG);
    assert_false(k->supports(DT_KOP_GEMM, DT_DTYPE_F64));
    assert_true(k->supports(DT_KOP_GEMM, DT_DTYPE_BF16)); /* f32 accumulation */
    assert_true(k->supports(DT_KOP_GEMM, DT_DTYPE_F32));
    dt_tensor *objs[] = {x, y, i32, xt, wrong};
    for (size_t i = 0; i < 5; i++)
        dt_tensor_release(objs[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binary_broadcast),
        cmocka_unit_test(test_binary_strided),
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_unary_backward),
        cmocka_unit_test(test_fill_copy),
        cmocka_unit_test(test_masked_fill),
        cmocka_unit_test(test_bad_inputs),
    };
    return cmocka_run_group_tests_name("kernels_elementwise", tests, NULL, NULL);
}
