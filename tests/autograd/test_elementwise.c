/* Element-wise ops, masked fill, reductions: forward vs float64, gradients vs finite differences.
 */
#include "ag_test_util.h"

/* ------------------------------------------------------------ binary with broadcasting */

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV };

static dt_status f_binary(dt_tensor **in, void *ctx, dt_tensor **out)
{
    switch (*(int *)ctx) {
    case OP_ADD:
        return dt_add(in[0], in[1], out);
    case OP_SUB:
        return dt_sub(in[0], in[1], out);
    case OP_MUL:
        return dt_mul(in[0], in[1], out);
    default:
        return dt_div(in[0], in[1], out);
    }
}

static double ref_binary(int op, double a, double b)
{
    switch (op) {
    case OP_ADD:
        return a + b;
    case OP_SUB:
        return a - b;
    case OP_MUL:
        return a * b;
    default:
        return a / b;
    }
}

static void check_binary(int op, int na, const int64_t *sa, int nb, const int64_t *sb, int no,
                         const int64_t *so)
{
    dt_tensor *in[2] = {ag_rand_tensor(na, sa, -1.0, 1.0), ag_rand_tensor(nb, sb, 0.5, 1.5)};
    dt_tensor *y = NULL;
    AG_OK(f_binary(in, &op, &y));
    ag_expect_shape(y, no, so);
    double *a = ag_vals(in[0]), *b = ag_vals(in[1]);
    int64_t n = ag_numel(no, so);
    double *ref = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        ref[i] = ref_binary(op, a[ag_bcast_index(i, no, so, na, sa)],
                            b[ag_bcast_index(i, no, so, nb, sb)]);
    ag_expect_close("binary forward", ref, y, AG_FWD_RTOL, AG_FWD_ATOL);
    bool check[2] = {true, true};
    ag_gradcheck("binary", f_binary, &op, 2, in, check);
    free(ref);
    free(a);
    free(b);
    dt_tensor_release(y);
    ag_release_all(2, in);
}

static void test_binary_broadcast(void **state)
{
    (void)state;
    int64_t s234[3] = {2, 3, 4}, s31[2] = {3, 1}, s4[1] = {4}, s214[3] = {2, 1, 4},
            s131[3] = {1, 3, 1};
    for (int op = OP_ADD; op <= OP_DIV; op++) {
        check_binary(op, 3, s234, 2, s31, 3, s234);
        check_binary(op, 1, s4, 3, s234, 3, s234);
        check_binary(op, 3, s214, 3, s131, 3, s234);
        check_binary(op, 3, s234, 3, s234, 3, s234);
        check_binary(op, 0, NULL, 3, s234, 3, s234); /* a 0-d operand */
        check_binary(op, 3, s234, 0, NULL, 3, s234);
    }
}

static dt_status f_square(dt_tensor **in, void *ctx, dt_tensor **out)
{
    (void)ctx;
    return dt_mul(in[0], in[0], out); /* the same tensor on both sides: two contributions */
}

static void test_mul_same_input(void **state)
{
    (void)state;
    int64_t s[2] = {3, 5};
    dt_tensor *x = ag_rand_tensor(2, s, -1.0, 1.0);
    bool check[1] = {true};
    ag_gradcheck("x*x", f_square, NULL, 1, &x, check);
    dt_tensor_release(x);
}

/* ------------------------------------------------------------ unary */

enum { U_SCALE, U_ADD_SCALAR, U_GELU, U_RELU };

static dt_status f_unary(dt_tensor **in, void *ctx, dt_tensor **out)
{
    switch (*(int *)ctx) {
    case U_SCALE:
        return dt_scale(in[0], -2.5, out);
    case U_ADD_SCALAR:
        return dt_add_scalar(in[0], 0.75, out);
    case U_GELU:
        return dt_gelu_tanh(in[0], out);
    default:
        return dt_relu(in[0], out);
    }
}

static double ref_unary(int op, double x)
{
    switch (op) {
    case U_SCALE:
        return -2.5 * x;
    case U_ADD_SCALAR:
        return x + 0.75;
    case U_GELU:
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    default:
        return x > 0 ? x : 0.0;
    }
}

static void test_unary(void **state)
{
    (void)state;
    int64_t s[3] = {2, 3, 5};
    for (int op = U_SCALE; op <= U_RELU; op++) {
        dt_tensor *x = ag_rand_tensor(3, s, -3.0, 3.0), *y = NULL;
        float *xv = dt_tensor_data(x);
        for (int i = 0; i < 30; i++) /* keep relu's kink further than eps away */
            if (fabsf(xv[i]) < 0.1f)
                xv[i] = xv[i] < 0 ? -0.1f - xv[i] : 0.1f + xv[i];
        AG_OK(f_unary(&x, &op, &y));
        double ref[30], *v = ag_vals(x);
        for (int i = 0; i < 30; i++)
            ref[i] = ref_unary(op, v[i]);
        ag_expect_close("unary forward", ref, y, AG_FWD_RTOL, AG_FWD_ATOL);
        bool check[1] = {true};
        ag_gradcheck("unary", f_unary, &op, 1, &x, check);
        free(v);
        dt_tensor_release(y);
        dt_tensor_release(x);
    }
}

/* ------------------------------------------------------------ masked fill */

static dt_status f_masked_fill(dt_tensor **in, void *ctx, dt_tensor **out)
{
    return dt_masked_fill(in[0], (dt_tensor *)ctx, -5.0, out);
}

static void test_masked_fill(void **state)
{
    (void)state;
    int64_t s[3] = {2, 3, 4}, sm[2] = {3, 1}, mv[3] = {1, 0, 1};
    dt_tensor *x = ag_rand_tensor(3, s, -1.0, 1.0), *mask = ag_ids(2, sm, DT_DTYPE_U8, mv);
    dt_tensor *y = NULL;
    AG_OK(dt_masked_fill(x, mask, -5.0, &y));
    double *v = ag_vals(x), ref[24];
    for (int i = 0; i < 24; i++)
        ref[i] = mv[(i / 4) % 3] ? -5.0 : v[i];
    ag_expect_close("masked_fill forward", ref, y, AG_FWD_RTOL, AG_FWD_ATOL);
    bool check[1] = {true};
    ag_gradcheck("masked_fill", f_masked_fill, mask, 1, &x, check);
    free(v);
    dt_tensor_release(y);
    dt_tensor_release(mask);
    dt_tensor_release(x);
}

/* ------------------------------------------------------------ reductions */

typedef struct red_ctx {
    int kind; /* 0 sum, 1 mean, 2 max */
    int dim;
    bool keepdim;
} red_ctx;

static dt_status f_reduce(dt_tensor **in, void *ctx, dt_tensor **out)
{
    red_ctx *c = ctx;
    if (c->kind == 0)
        return dt_sum(in[0], c->dim, c->keepdim, out);
    if (c->kind == 1)
        return dt_mean(in[0], c->dim, c->keepdim, out);
    return dt_max(in[0], c->dim, c->keepdim, out);
}

static void test_reductions(void **state)
{
    (void)state;
    int64_t s[3] = {2, 3, 4};
    /* distinct values 0.1 apart, shuffled: max has no ties within eps */
    float buf[24];
    for (int i = 0; i < 24; i++)
        buf[i] = (float)(0.1 * ((i * 7) % 24) - 1.2);
    dt_tensor *x = NULL;
    AG_OK(dt_tensor_from_buffer(3, s, DT_DTYPE_F32, buf, &x));
    for (int kind = 0; kind < 3; kind++)
        for (int dim = -1; dim < 3; dim++)
            for (int keep = 0; keep < 2; keep++) {
                red_ctx c = {kind, dim, keep != 0};
                int d = dim < 0 ? dim + 3 : dim;
                dt_tensor *y = NULL;
                AG_OK(f_reduce(&x, &c, &y));
                int64_t os[3];
                int on = 0;
                for (int i = 0; i < 3; i++)
                    if (i != d || keep)
                        os[on++] = i == d ? 1 : s[i];
                ag_expect_shape(y, on, os);
                double ref[24];
                int64_t inner = 1;
                for (int i = d + 1; i < 3; i++)
                    inner *= s[i];
                for (int64_t o = 0; o < 24 / s[d]; o++) {
                    int64_t base = (o / inner) * inner * s[d] + o % inner;
                    double acc = kind == 2 ? -INFINITY : 0.0;
                    for (int64_t j = 0; j < s[d]; j++) {
                        double v = buf[base + j * inner];
                        acc = kind == 2 ? fmax(acc, v) : acc + v;
                    }
                    ref[o] = kind == 1 ? acc / (double)s[d] : acc;
                }
                ag_expect_close("reduce forward", ref, y, AG_FWD_RTOL, AG_FWD_ATOL);
                dt_tensor_release(y);
                bool check[1] = {true};
                ag_gradcheck("reduce", f_reduce, &c, 1, &x, check);
            }
    dt_tensor_release(x);
}

static dt_status f_sum_all(dt_tensor **in, void *ctx, dt_tensor **out)
{
    (void)ctx;
    return dt_sum_all(in[0], out);
}

static void test_sum_all(void **state)
{
    (void)state;
    int64_t s[3] = {3, 2, 5};
    dt_tensor *x = ag_rand_tensor(3, s, -1.0, 1.0), *t = NULL, *y = NULL;
    AG_OK(dt_tensor_transpose(x, 0, 2, &t)); /* a strided input */
    AG_OK(dt_sum_all(t, &y));
    assert_int_equal(dt_tensor_numel(y), 1);
    double *v = ag_vals(x), ref = 0.0;
    for (int i = 0; i < 30; i++)
        ref += v[i];
    ag_expect_close("sum_all forward", &ref, y, 1e-5, 1e-5);
    bool check[1] = {true};
    ag_gradcheck("sum_all", f_sum_all, NULL, 1, &x, check);
    free(v);
    dt_tensor_release(y);
    dt_tensor_release(t);
    dt_tensor_release(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binary_broadcast),
        cmocka_unit_test(test_mul_same_input),
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_masked_fill),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_sum_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
