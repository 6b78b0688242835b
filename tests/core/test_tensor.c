/* Local tensors: creation, queries, views (no copy), copies and conversions. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/tensor_impl.h"
#include "dtensor.h"

#define OK(call) assert_int_equal((call), DT_OK)

/* t[i] for every flat index equals want[i] */
static void assert_values(const dt_tensor *t, const double *want, int64_t n)
{
    assert_int_equal(dt_tensor_numel(t), n);
    for (int64_t i = 0; i < n; i++)
        assert_true(dt_tensor_item_at(t, i) == want[i]);
}

static dt_tensor *arange_f32(int ndim, const int64_t *shape)
{
    dt_tensor *a = NULL, *v = NULL;
    OK(dt_tensor_arange(dt__shape_numel(ndim, shape), DT_DTYPE_F32, &a));
    OK(dt_tensor_view(a, ndim, shape, &v));
    dt_tensor_release(a);
    return v;
}

static void test_create_query(void **state)
{
    (void)state;
    int64_t shape[3] = {2, 3, 4};
    dt_tensor *t = NULL;
    OK(dt_tensor_zeros(3, shape, DT_DTYPE_F32, dt_device_cpu(), &t));
    assert_int_equal(dt_tensor_ndim(t), 3);
    assert_int_equal(dt_tensor_dim(t, 1), 3);
    assert_int_equal(dt_tensor_dim(t, -1), 4);
    assert_int_equal(dt_tensor_dim(t, 3), -1);
    assert_int_equal(dt_tensor_dim(t, -4), -1);
    assert_int_equal(dt_tensor_numel(t), 24);
    assert_int_equal(dt_tensor_nbytes(t), 96);
    assert_int_equal(dt_tensor_strides(t)[0], 12);
    assert_int_equal(dt_tensor_strides(t)[1], 4);
    assert_int_equal(dt_tensor_strides(t)[2], 1);
    assert_true(dt_tensor_is_contiguous(t));
    assert_false(dt_tensor_is_distributed(t));
    assert_int_equal(dt_tensor_dtype(t), DT_DTYPE_F32);
    assert_int_equal(dt_tensor_device(t).type, DT_DEVICE_CPU);
    assert_true(((uintptr_t)dt_tensor_data(t) % 64) == 0);
    for (int i = 0; i < 24; i++)
        assert_true(((float *)dt_tensor_data(t))[i] == 0.0f);
    dt_tensor_release(t);

    OK(dt_tensor_full(2, shape, DT_DTYPE_BF16, dt_device_cpu(), 1.5, &t));
    assert_int_equal(((uint16_t *)dt_tensor_data(t))[5], 0x3fc0);
    dt_tensor_release(t);
    OK(dt_tensor_ones(1, shape, DT_DTYPE_I64, dt_device_cpu(), &t));
    assert_int_equal(((int64_t *)dt_tensor_data(t))[1], 1);
    dt_tensor_release(t);

    /* scalar */
    double v = 0;
    OK(dt_tensor_full(0, NULL, DT_DTYPE_F64, dt_device_cpu(), -2.25, &t));
    assert_int_equal(dt_tensor_numel(t), 1);
    OK(dt_tensor_item(t, &v));
    assert_true(v == -2.25);
    dt_tensor_release(t);

    /* empty tensor */
    int64_t zshape[2] = {0, 5};
    OK(dt_tensor_empty(2, zshape, DT_DTYPE_F32, dt_device_cpu(), &t));
    assert_int_equal(dt_tensor_numel(t), 0);
    assert_true(dt_tensor_is_contiguous(t));
    dt_tensor_release(t);

    float buf[6] = {1, 2, 3, 4, 5, 6};
    OK(dt_tensor_from_buffer(2, (int64_t[]){2, 3}, DT_DTYPE_F32, buf, &t));
    buf[0] = 100; /* it is a copy */
    assert_true(dt_tensor_item_at(t, 0) == 1.0);
    assert_true(dt_tensor_item_at(t, 5) == 6.0);
    dt_tensor_release(t);

    OK(dt_tensor_arange(5, DT_DTYPE_U16, &t));
    assert_values(t, (double[]){0, 1, 2, 3, 4}, 5);
    dt_tensor_release(t);
}

static void test_retain_release(void **state)
{
    (void)state;
    dt_tensor *t = arange_f32(1, (int64_t[]){4});
    assert_ptr_equal(dt_tensor_retain(t), t);
    dt_tensor_release(t);
    assert_true(dt_tensor_item_at(t, 3) == 3.0);
    /* a view keeps the storage alive after the base is gone */
    dt_tensor *v = NULL;
    OK(dt_tensor_narrow(t, 0, 1, 2, &v));
    dt_tensor_release(t);
    assert_values(v, (double[]){1, 2}, 2);
    dt_tensor_release(v);
    dt_tensor_release(NULL);
    assert_null(dt_tensor_retain(NULL));
}

static void test_views(void **state)
{
    (void)state;
    dt_tensor *a = arange_f32(2, (int64_t[]){2, 3}); /* [[0 1 2] [3 4 5]] */
    dt_tensor *t = NULL, *n = NULL, *r = NULL, *e = NULL, *u = NULL, *s = NULL;

    OK(dt_tensor_transpose(a, 0, 1, &t)); /* [[0 3] [1 4] [2 5]] */
    assert_int_equal(dt_tensor_dim(t, 0), 3);
    assert_int_equal(dt_tensor_strides(t)[0], 1);
    assert_int_equal(dt_tensor_strides(t)[1], 3);
    assert_false(dt_tensor_is_contiguous(t));
    assert_ptr_equal(dt_tensor_data(t), dt_tensor_data(a)); /* no copy */
    assert_values(t, (double[]){0, 3, 1, 4, 2, 5}, 6);

    OK(dt_tensor_narrow(t, 0, 1, 2, &n)); /* [[1 4] [2 5]] */
    assert_values(n, (double[]){1, 4, 2, 5}, 4);
    assert_ptr_equal(dt_tensor_data(n), (float *)dt_tensor_data(a) + 1);

    /* view of a transposed layout fails and names the shapes; reshape copies */
    assert_int_equal(dt_tensor_view(t, 1, (int64_t[]){6}, &r), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "[3, 2]"));
    assert_non_null(strstr(dt_last_error(), "[6]"));
    assert_null(r);
    OK(dt_tensor_reshape(t, 1, (int64_t[]){-1}, &r));
    assert_true(dt_tensor_is_contiguous(r));
    assert_ptr_not_equal(dt_tensor_data(r), dt_tensor_data(a));
    assert_values(r, (double[]){0, 3, 1, 4, 2, 5}, 6);
    dt_tensor_release(r);
    /* reshape of a contiguous tensor is a view */
    OK(dt_tensor_reshape(a, 3, (int64_t[]){3, 1, 2}, &r));
    assert_ptr_equal(dt_tensor_data(r), dt_tensor_data(a));
    assert_int_equal(dt_tensor_strides(r)[0], 2);
    assert_int_equal(dt_tensor_strides(r)[2], 1);
    dt_tensor_release(r);

    /* a view that splits a transposed dim is still a view */
    dt_tensor *b = arange_f32(3, (int64_t[]){2, 3, 4}), *bt = NULL;
    OK(dt_tensor_transpose(b, 0, 2, &bt)); /* [4, 3, 2], strides [1, 4, 12] */
    OK(dt_tensor_view(bt, 4, (int64_t[]){2, 2, 3, 2}, &r));
    assert_int_equal(dt_tensor_strides(r)[0], 2);
    assert_int_equal(dt_tensor_strides(r)[1], 1);
    assert_int_equal(dt_tensor_strides(r)[2], 4);
    assert_int_equal(dt_tensor_strides(r)[3], 12);
    /* element [1,0,2,1] = bt[2,2,1] = b[1,2,2] = 12 + 8 + 2 = 22 */
    assert_true(dt_tensor_item_at(r, 1 * 12 + 0 * 6 + 2 * 2 + 1) == 22.0);
    dt_tensor_release(r);
    dt_tensor_release(bt);

    int perm[3] = {2, 0, 1};
    OK(dt_tensor_permute(b, perm, &r)); /* [4, 2, 3]: r[i,j,k] = b[j,k,i] */
    assert_int_equal(dt_tensor_dim(r, 0), 4);
    assert_true(dt_tensor_item_at(r, 3 * 6 + 1 * 3 + 2) == 1 * 12 + 2 * 4 + 3);
    dt_tensor_release(r);
    dt_tensor_release(b);

    /* expand a [3, 1] column to [2, 3, 4] */
    dt_tensor *c = arange_f32(2, (int64_t[]){3, 1});
    OK(dt_tensor_expand(c, 3, (int64_t[]){2, -1, 4}, &e));
    assert_int_equal(dt_tensor_strides(e)[0], 0);
    assert_int_equal(dt_tensor_strides(e)[2], 0);
    assert_int_equal(dt_tensor_numel(e), 24);
    assert_true(dt_tensor_item_at(e, 12 + 2 * 4 + 3) == 2.0);
    dt_tensor *ec = NULL;
    OK(dt_tensor_contiguous(e, &ec));
    assert_true(dt_tensor_is_contiguous(ec));
    assert_true(((float *)dt_tensor_data(ec))[23] == 2.0f);
    assert_true(((float *)dt_tensor_data(ec))[4] == 1.0f);
    dt_tensor_release(ec);
    dt_tensor_release(e);
    dt_tensor_release(c);

    OK(dt_tensor_unsqueeze(a, 1, &u)); /* [2, 1, 3] */
    assert_int_equal(dt_tensor_ndim(u), 3);
    assert_int_equal(dt_tensor_dim(u, 1), 1);
    assert_int_equal(dt_tensor_strides(u)[1], 3);
    OK(dt_tensor_squeeze(u, -2, &s));
    assert_int_equal(dt_tensor_ndim(s), 2);
    assert_true(dt_tensor_equal(s, a));
    dt_tensor_release(s);
    OK(dt_tensor_unsqueeze(a, -1, &s)); /* [2, 3, 1] */
    assert_int_equal(dt_tensor_dim(s, 2), 1);
    assert_int_equal(dt_tensor_strides(s)[2], 1);
    dt_tensor_release(s);

    dt_tensor_release(u);
    dt_tensor_release(n);
    dt_tensor_release(t);
    dt_tensor_release(a);
}

static void test_copies(void **state)
{
    (void)state;
    dt_tensor *a = arange_f32(2, (int64_t[]){2, 3});
    dt_tensor *t = NULL, *c = NULL, *h = NULL, *back = NULL, *d = NULL;
    OK(dt_tensor_transpose(a, 0, 1, &t));
    OK(dt_tensor_clone(t, &c));
    assert_true(dt_tensor_is_contiguous(c));
    assert_true(dt_tensor_equal(c, t));
    float *cd = dt_tensor_data(c);
    float want[6] = {0, 3, 1, 4, 2, 5};
    assert_memory_equal(cd, want, sizeof(want));
    cd[0] = 42;
    assert_true(dt_tensor_item_at(a, 0) == 0.0); /* clone owns its storage */
    assert_false(dt_tensor_equal(c, t));

    /* contiguous of a contiguous tensor is the same handle */
    OK(dt_tensor_contiguous(a, &d));
    assert_ptr_equal(d, a);
    dt_tensor_release(d);

    /* dtype round trips through bf16, f16, i32, u8 */
    OK(dt_tensor_to_dtype(t, DT_DTYPE_BF16, &h));
    assert_int_equal(dt_tensor_dtype(h), DT_DTYPE_BF16);
    assert_values(h, (double[]){0, 3, 1, 4, 2, 5}, 6);
    OK(dt_tensor_to_dtype(h, DT_DTYPE_F32, &back));
    assert_true(dt_tensor_equal(back, c) == false); /* c[0] = 42 */
    cd[0] = 0;
    assert_true(dt_tensor_equal(back, c));
    dt_tensor_release(back);
    dt_tensor_release(h);

    float vals[4] = {1.5f, -2.5f, 300.7f, 1e10f};
    dt_tensor *f = NULL, *i32 = NULL, *u8 = NULL, *i64 = NULL, *f16 = NULL;
    OK(dt_tensor_from_buffer(1, (int64_t[]){4}, DT_DTYPE_F32, vals, &f));
    OK(dt_tensor_to_dtype(f, DT_DTYPE_I32, &i32));
    assert_values(i32, (double[]){1, -2, 300, 2147483647.0}, 4); /* truncation, saturation */
    OK(dt_tensor_to_dtype(f, DT_DTYPE_U8, &u8));
    assert_values(u8, (double[]){1, 0, 255, 255}, 4);
    OK(dt_tensor_to_dtype(f, DT_DTYPE_F16, &f16));
    assert_values(f16, (double[]){1.5, -2.5, 300.75, INFINITY}, 4);
    int64_t big[2] = {INT64_MAX, (int64_t)1 << 60};
    dt_tensor *bi = NULL, *bi2 = NULL;
    OK(dt_tensor_from_buffer(1, (int64_t[]){2}, DT_DTYPE_I64, big, &bi));
    OK(dt_tensor_to_dtype(bi, DT_DTYPE_I32, &bi2));
    assert_int_equal(((int32_t *)dt_tensor_data(bi2))[0], INT32_MAX);
    dt_tensor_release(bi2);
    OK(dt_tensor_to_dtype(i32, DT_DTYPE_I64, &i64));
    OK(dt_tensor_empty(1, (int64_t[]){2}, DT_DTYPE_I64, dt_device_cpu(), &bi2));
    OK(dt_tensor_copy_(bi2, bi)); /* i64 -> i64 exact beyond 2^53 */
    assert_int_equal(((int64_t *)dt_tensor_data(bi2))[0], INT64_MAX);
    assert_int_equal(((int64_t *)dt_tensor_data(bi2))[1], (int64_t)1 << 60);
    dt_tensor_release(bi2);
    dt_tensor_release(bi);
    dt_tensor_release(i64);
    dt_tensor_release(f16);
    dt_tensor_release(u8);
    dt_tensor_release(i32);
    dt_tensor_release(f);

    /* copy_ into a strided destination with conversion */
    dt_tensor *z = NULL, *zt = NULL;
    OK(dt_tensor_zeros(2, (int64_t[]){3, 2}, DT_DTYPE_F64, dt_device_cpu(), &z));
    OK(dt_tensor_transpose(z, 0, 1, &zt)); /* [2, 3] view */
    OK(dt_tensor_copy_(zt, a));
    double wz[6] = {0, 3, 1, 4, 2, 5};
    assert_memory_equal(dt_tensor_data(z), wz, sizeof(wz));
    assert_int_equal(dt_tensor_copy_(z, a), DT_ERR_INVALID_ARG); /* [3,2] vs [2,3] */
    assert_non_null(strstr(dt_last_error(), "[3, 2]"));

    /* fill of a strided view touches only the view */
    dt_tensor *col = NULL;
    OK(dt_tensor_narrow(z, 1, 1, 1, &col));
    OK(dt_tensor_fill(col, 7.0));
    double wf[6] = {0, 7, 1, 7, 2, 7};
    assert_memory_equal(dt_tensor_data(z), wf, sizeof(wf));
    dt_tensor_release(col);
    dt_tensor_release(zt);
    dt_tensor_release(z);

    double item = 0;
    assert_int_equal(dt_tensor_item(a, &item), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "6 elements"));
    assert_true(isnan(dt_tensor_item_at(a, 6)));
    assert_non_null(strstr(dt_last_error(), "index 6"));

    char *text = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&text, &len);
    dt_tensor_print(t, mf, 4);
    fclose(mf);
    assert_string_equal(text, "tensor(shape=[3, 2], dtype=f32, device=cpu:0, values=[0, 3, 1, "
                              "4, ...])\n");
    free(text);

    dt_tensor_release(c);
    dt_tensor_release(t);
    dt_tensor_release(a);
}

/* Big transposed copies take the tiled path; check every element against its source. */
static void test_tiled_transpose_copy(void **state)
{
    (void)state;
    int64_t shape[3] = {3, 40, 50};
    dt_tensor *a = arange_f32(3, shape), *p = NULL, *c = NULL, *h = NULL;
    OK(dt_tensor_permute(a, (int[]){0, 2, 1}, &p)); /* [3, 50, 40] */
    OK(dt_tensor_clone(p, &c));
    OK(dt_tensor_to_dtype(p, DT_DTYPE_BF16, &h));
    const float *cd = dt_tensor_data(c);
    const uint16_t *hd = dt_tensor_data(h);
    for (int64_t b = 0; b < 3; b++)
        for (int64_t i = 0; i < 50; i++)
            for (int64_t j = 0; j < 40; j++) {
                float want = (float)(b * 2000 + j * 50 + i);
                assert_true(cd[(b * 50 + i) * 40 + j] == want);
                assert_int_equal(hd[(b * 50 + i) * 40 + j], dt_f32_to_bf16(want));
            }
    /* and into a strided destination: write the transpose back through a view */
    dt_tensor *z = NULL, *zt = NULL;
    OK(dt_tensor_zeros(3, shape, DT_DTYPE_F32, dt_device_cpu(), &z));
    OK(dt_tensor_permute(z, (int[]){0, 2, 1}, &zt));
    OK(dt_tensor_copy_(zt, c));
    assert_true(dt_tensor_equal(z, a));
    dt_tensor_release(zt);
    dt_tensor_release(z);
    dt_tensor_release(h);
    dt_tensor_release(c);
    dt_tensor_release(p);
    dt_tensor_release(a);
}

static void test_mem_category(void **state)
{
    (void)state;
    dt_tensor *t = NULL, *v = NULL;
    dt_mem_category prev = dt_memory_set_default_category(DT_MEM_ACTIVATION);
    OK(dt_tensor_empty(1, (int64_t[]){10}, DT_DTYPE_F32, dt_device_cpu(), &t));
    assert_int_equal(dt_memory_set_default_category(prev), DT_MEM_ACTIVATION);
    assert_int_equal(dt_tensor_mem_category(t), DT_MEM_ACTIVATION);
    OK(dt_tensor_narrow(t, 0, 2, 3, &v));
    dt_tensor_set_mem_category(v, DT_MEM_PARAMETER); /* tags the shared storage */
    assert_int_equal(dt_tensor_mem_category(t), DT_MEM_PARAMETER);
    dt_tensor_release(v);
    dt_tensor_release(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_query),
        cmocka_unit_test(test_retain_release),
        cmocka_unit_test(test_views),
        cmocka_unit_test(test_copies),
        cmocka_unit_test(test_tiled_transpose_copy),
        cmocka_unit_test(test_mem_category),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
