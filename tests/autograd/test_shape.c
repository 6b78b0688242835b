/* Differentiable views and copies: reshape, permute, transpose, narrow, contiguous, concat, split.
 */
#include "ag_test_util.h"

/* y (any layout) must hold ref in row-major order */
static void expect_vals(const char *what, dt_tensor *y, const double *ref)
{
    ag_expect_close(what, ref, y, 0, 0);
}

static int64_t s234[3] = {2, 3, 4};

static dt_status f_reshape(dt_tensor **in, void *ctx, dt_tensor **out)
{
    int64_t shape[2] = {4, -1};
    dt_tensor *t = NULL;
    if (ctx == NULL)
        return dt_reshape(in[0], 2, shape, out);
    dt_status s = dt_transpose(in[0], 0, 2, &t); /* strided: reshape must copy */
    if (s == DT_OK)
        s = dt_reshape(t, 2, shape, out);
    dt_tensor_release(t);
    return s;
}

static void test_reshape(void **state)
{
    (void)state;
    dt_tensor *x = ag_rand_tensor(3, s234, -1, 1), *y = NULL;
    double *v = ag_vals(x), ref[24];
    int64_t s46[2] = {4, 6};
    AG_OK(f_reshape(&x, NULL, &y));
    ag_expect_shape(y, 2, s46);
    expect_vals("reshape", y, v);
    dt_tensor_release(y);
    AG_OK(f_reshape(&x, (void *)1, &y)); /* x^T [4,3,2] -> [4,6] */
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < 2; i++)
                ref[k * 6 + j * 2 + i] = v[i * 12 + j * 4 + k];
    expect_vals("reshape of a transposed view", y, ref);
    dt_tensor_release(y);
    bool check[1] = {true};
    ag_gradcheck("reshape", f_reshape, NULL, 1, &x, check);
    ag_gradcheck("reshape strided", f_reshape, (void *)1, 1, &x, check);
    free(v);
    dt_tensor_release(x);
}

static dt_status f_permute(dt_tensor **in, void *ctx, dt_tensor **out)
{
    static const int perm[3] = {2, 0, 1};
    (void)ctx;
    return dt_permute(in[0], perm, out);
}

static dt_status f_transpose(dt_tensor **in, void *ctx, dt_tensor **out)
{
    (void)ctx;
    return dt_transpose(in[0], 0, -1, out);
}

static dt_status f_contiguous(dt_tensor **in, void *ctx, dt_tensor **out)
{
    dt_tensor *t = NULL;
    (void)ctx;
    dt_status s = dt_transpose(in[0], 1, 2, &t);
    if (s == DT_OK)
        s = dt_contiguous(t, out);
    dt_tensor_release(t);
    return s;
}

static void test_permute_transpose_contiguous(void **state)
{
    (void)state;
    dt_tensor *x = ag_rand_tensor(3, s234, -1, 1), *y = NULL;
    double *v = ag_vals(x), ref[24];
    AG_OK(f_permute(&x, NULL, &y)); /* y[k,i,j] = x[i,j,k] */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                ref[k * 6 + i * 3 + j] = v[i * 12 + j * 4 + k];
    expect_vals("permute", y, ref);
    dt_tensor_release(y);
    AG_OK(f_transpose(&x, NULL, &y)); /* y[k,j,i] = x[i,j,k] */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                ref[k * 6 + j * 2 + i] = v[i * 12 + j * 4 + k];
    expect_vals("transpose", y, ref);
    dt_tensor_release(y);
    AG_OK(f_contiguous(&x, NULL, &y)); /* y[i,k,j] = x[i,j,k], contiguous */
    assert_true(dt_tensor_is_contiguous(y));
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                ref[i * 12 + k * 3 + j] = v[i * 12 + j * 4 + k];
    expect_vals("contiguous", y, ref);
    dt_tensor_release(y);
    bool check[1] = {true};
    ag_gradcheck("permute", f_permute, NULL, 1, &x, check);
    ag_gradcheck("transpose", f_transpose, NULL, 1, &x, check);
    ag_gradcheck("contiguous", f_contiguous, NULL, 1, &x, check);
    free(v);
    dt_tensor_release(x);
}

static void test_contiguous_of_contiguous_is_new_handle(void **state)
{
    (void)state;
    dt_tensor *x = ag_rand_tensor(3, s234, -1, 1), *y = NULL;
    AG_OK(dt_tensor_set_requires_grad(x, true));
    AG_OK(dt_contiguous(x, &y));
    assert_ptr_not_equal(x, y); /* recording on y must not turn x into a non-leaf */
    AG_OK(dt_tensor_set_requires_grad(x, false));
    dt_tensor_release(y);
    dt_tensor_release(x);
}

static dt_status f_narrow(dt_tensor **in, void *ctx, dt_tensor **out)
{
    (void)ctx;
    return dt_narrow(in[0], 1, 1, 2, out);
}

static void test_narrow(void **state)
{
    (void)state;
    dt_tensor *x = ag_rand_tensor(3, s234, -1, 1), *y = NULL;
    double *v = ag_vals(x), ref[16];
    AG_OK(f_narrow(&x, NULL, &y));
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 4; k++)
                ref[i * 8 + j * 4 + k] = v[i * 12 + (j + 1) * 4 + k];
    expect_vals("narrow", y, ref);
    bool check[1] = {true};
    ag_gradcheck("narrow", f_narrow, NULL, 1, &x, check);
    free(v);
    dt_tensor_release(y);
    dt_tensor_release(x);
}

static dt_status f_concat(dt_tensor **in, void *ctx, dt_tensor **out)
{
    return dt_concat(3, in, *(int *)ctx, out);
}

static void test_concat(void **state)
{
    (void)state;
    int64_t sa[3] = {2, 1, 4}, sb[3] = {2, 2, 4}, sc[3] = {2, 3, 4}, so[3] = {2, 6, 4};
    dt_tensor *in[3] = {ag_rand_tensor(3, sa, -1, 1), ag_rand_tensor(3, sb, -1, 1),
                        ag_rand_tensor(3, sc, -1, 1)};
    dt_tensor *y = NULL;
    int dim = 1;
    AG_OK(f_concat(in, &dim, &y));
    ag_expect_shape(y, 3, so);
    double *a = ag_vals(in[0]), *b = ag_vals(in[1]), *c = ag_vals(in[2]), ref[48];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 6; j++)
            for (int k = 0; k < 4; k++)
                ref[i * 24 + j * 4 + k] = j < 1   ? a[i * 4 + k]
                                          : j < 3 ? b[i * 8 + (j - 1) * 4 + k]
                                                  : c[i * 12 + (j - 3) * 4 + k];
    expect_vals("concat", y, ref);
    bool check[3] = {true, true, true};
    ag_gradcheck("concat", f_concat, &dim, 3, in, check);
    free(a);
    free(b);
    free(c);
    dt_tensor_release(y);
    ag_release_all(3, in);
}

/* split into 3 pieces, use pieces 0 and 2 (piece 1 gets no gradient: zeros) */
static dt_status f_split(dt_tensor **in, void *ctx, dt_tensor **out)
{
    static const int64_t sizes[3] = {1, 3, 2};
    dt_tensor *p[3] = {NULL, NULL, NULL};
    (void)ctx;
    dt_status s = dt_split(in[0], 1, 3, sizes, p);
    if (s != DT_OK)
        return s;
    dt_tensor *two[2] = {p[2], p[0]};
    s = dt_concat(2, two, 1, out);
    ag_release_all(3, p);
    return s;
}

static void test_split(void **state)
{
    (void)state;
    int64_t sx[3] = {2, 6, 4}, sizes[3] = {1, 3, 2};
    dt_tensor *x = ag_rand_tensor(3, sx, -1, 1), *p[3] = {NULL, NULL, NULL};
    double *v = ag_vals(x);
    AG_OK(dt_split(x, -2, 3, sizes, p));
    int64_t start = 0;
    for (int q = 0; q < 3; q++) {
        double ref[24];
        int n = 0;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < sizes[q]; j++)
                for (int k = 0; k < 4; k++)
                    ref[n++] = v[i * 24 + (start + j) * 4 + k];
        assert_int_equal(dt_tensor_dim(p[q], 1), sizes[q]);
        expect_vals("split piece", p[q], ref);
        start += sizes[q];
    }
    ag_release_all(3, p);
    bool check[1] = {true};
    ag_gradcheck("split", f_split, NULL, 1, &x, check);
    free(v);
    dt_tensor_release(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reshape),
        cmocka_unit_test(test_permute_transpose_contiguous),
        cmocka_unit_test(test_contiguous_of_contiguous_is_new_handle),
        cmocka_unit_test(test_narrow),
        cmocka_unit_test(test_concat),
        cmocka_unit_test(test_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
