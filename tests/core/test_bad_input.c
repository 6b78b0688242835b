/*
 * Bad input to every core entry point: the right status, a message naming the
 * value, outputs untouched, no crash (run under DT_SANITIZE=ON too).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "core/tensor_impl.h"
#include "dtensor.h"

#define OK(call) assert_int_equal((call), DT_OK)

/* Expect @p st == INVALID_ARG, the message to contain @p text and *out still NULL. */
#define EXPECT_BAD(call, text, out)                                                                \
    do {                                                                                           \
        dt_clear_error();                                                                          \
        assert_int_equal((call), DT_ERR_INVALID_ARG);                                              \
        if (strstr(dt_last_error(), (text)) == NULL)                                               \
            fail_msg("error '%s' does not contain '%s'", dt_last_error(), (text));                 \
        assert_null(out);                                                                          \
    } while (0)

static const dt_device cpu = {DT_DEVICE_CPU, 0};

static void test_creation(void **state)
{
    (void)state;
    dt_tensor *t = NULL;
    int64_t s2[2] = {2, 3};
    EXPECT_BAD(dt_tensor_empty(2, s2, DT_DTYPE_F32, cpu, NULL), "'out' is NULL", t);
    EXPECT_BAD(dt_tensor_empty(-1, s2, DT_DTYPE_F32, cpu, &t), "ndim -1", t);
    EXPECT_BAD(dt_tensor_empty(9, s2, DT_DTYPE_F32, cpu, &t), "ndim 9", t);
    EXPECT_BAD(dt_tensor_empty(2, NULL, DT_DTYPE_F32, cpu, &t), "shape is NULL", t);
    EXPECT_BAD(dt_tensor_empty(2, (int64_t[]){2, -3}, DT_DTYPE_F32, cpu, &t),
               "dim 1 has negative size -3", t);
    EXPECT_BAD(dt_tensor_empty(2, (int64_t[]){INT64_MAX, 2}, DT_DTYPE_F32, cpu, &t),
               "[9223372036854775807, 2]", t);
    /* empty, but the strides of the other dims would overflow (found by the fuzzer) */
    EXPECT_BAD(dt_tensor_empty(3, (int64_t[]){0, 4294967296, 4000000006}, DT_DTYPE_F32, cpu, &t),
               "its non-zero sizes multiply past INT64_MAX", t);
    EXPECT_BAD(dt_tensor_empty(1, (int64_t[]){INT64_MAX / 4}, DT_DTYPE_F64, cpu, &t),
               "overflows the byte count", t);
    EXPECT_BAD(dt_tensor_empty(2, s2, (dt_dtype)42, cpu, &t), "unknown dtype value 42", t);
    EXPECT_BAD(dt_tensor_empty(2, s2, (dt_dtype)-1, cpu, &t), "unknown dtype value -1", t);
    EXPECT_BAD(dt_tensor_zeros(2, (int64_t[]){-5, 1}, DT_DTYPE_F32, cpu, &t), "-5", t);
    EXPECT_BAD(dt_tensor_ones(2, s2, DT_DTYPE_COUNT, cpu, &t), "unknown dtype value 8", t);
    EXPECT_BAD(dt_tensor_full(1, (int64_t[]){-1}, DT_DTYPE_F32, cpu, 1.0, &t), "-1", t);
    EXPECT_BAD(dt_tensor_from_buffer(2, s2, DT_DTYPE_F32, NULL, &t), "data is NULL for 24 bytes",
               t);
    EXPECT_BAD(dt_tensor_from_buffer(2, s2, (dt_dtype)9, "x", &t), "dtype value 9", t);
    EXPECT_BAD(dt_tensor_arange(-4, DT_DTYPE_F32, &t), "n -4 is negative", t);
    EXPECT_BAD(dt_tensor_arange(4, (dt_dtype)12, &t), "dtype value 12", t);
    EXPECT_BAD(dt_tensor_arange(4, DT_DTYPE_F32, NULL), "'out' is NULL", t);
    /* a 0-element tensor may come from a NULL buffer */
    OK(dt_tensor_from_buffer(2, (int64_t[]){0, 3}, DT_DTYPE_F32, NULL, &t));
    dt_tensor_release(t);
}

static void test_null_tensors(void **state)
{
    (void)state;
    dt_tensor *o = NULL;
    double v = 0;
    EXPECT_BAD(dt_tensor_view(NULL, 1, (int64_t[]){1}, &o), "tensor 't' is NULL", o);
    EXPECT_BAD(dt_tensor_reshape(NULL, 1, (int64_t[]){1}, &o), "'t' is NULL", o);
    EXPECT_BAD(dt_tensor_permute(NULL, (int[]){0}, &o), "'t' is NULL", o);
    EXPECT_BAD(dt_tensor_transpose(NULL, 0, 1, &o), "'t' is NULL", o);
    EXPECT_BAD(dt_tensor_narrow(NULL, 0, 0, 1, &o), "'t' is NULL", o);
    EXPECT_BAD(dt_tensor_expand(NULL, 1, (int64_t[]){1}, &o), "'t' is NULL", o);
    EXPECT_BAD(dt_tensor_squeeze(NULL, 0, &o), "'t' is NULL", o);
    EXPECT_BAD(dt_tensor_unsqueeze(NULL, 0, &o), "'t' is NULL", o);
    EXPECT_BAD(dt_tensor_contiguous(NULL, &o), "'t' is NULL", o);
    EXPECT_BAD(dt_tensor_clone(NULL, &o), "'t' is NULL", o);
    EXPECT_BAD(dt_tensor_to_dtype(NULL, DT_DTYPE_F32, &o), "'t' is NULL", o);
    EXPECT_BAD(dt_tensor_copy_(NULL, NULL), "'dst' is NULL", o);
    EXPECT_BAD(dt_tensor_fill(NULL, 1.0), "'t' is NULL", o);
    EXPECT_BAD(dt_tensor_item(NULL, &v), "'t' is NULL", o);
    EXPECT_BAD(dt_tensor_fill_uniform(NULL, 0, 1, 1, NULL, NULL), "'t' is NULL", o);
    assert_true(isnan(dt_tensor_item_at(NULL, 0)));
    assert_false(dt_tensor_equal(NULL, NULL));
    assert_int_equal(dt_tensor_ndim(NULL), 0);
    assert_int_equal(dt_tensor_dim(NULL, 0), -1);
    assert_null(dt_tensor_shape(NULL));
    assert_null(dt_tensor_strides(NULL));
    assert_int_equal(dt_tensor_numel(NULL), 0);
    assert_int_equal(dt_tensor_nbytes(NULL), 0);
    assert_null(dt_tensor_data(NULL));
    assert_false(dt_tensor_is_contiguous(NULL));
    assert_false(dt_tensor_is_distributed(NULL));
    assert_int_equal(dt_tensor_mem_category(NULL), DT_MEM_OTHER);
    dt_tensor_set_mem_category(NULL, DT_MEM_PARAMETER);
    dt_tensor_print(NULL, stderr, 3);
    dt_tensor_release(NULL);
}

static void test_views(void **state)
{
    (void)state;
    dt_tensor *a = NULL, *o = NULL, *t = NULL;
    OK(dt_tensor_zeros(3, (int64_t[]){2, 3, 4}, DT_DTYPE_F32, cpu, &a));
    EXPECT_BAD(dt_tensor_view(a, 2, (int64_t[]){5, 5}, &o), "[5, 5] (25 elements)", o);
    EXPECT_BAD(dt_tensor_view(a, 2, (int64_t[]){-1, -1}, &o), "dims 0 and 1 are both -1", o);
    EXPECT_BAD(dt_tensor_view(a, 2, (int64_t[]){-1, 5}, &o), "cannot infer dim 0", o);
    EXPECT_BAD(dt_tensor_view(a, 2, (int64_t[]){-2, -12}, &o), "negative size -2", o);
    EXPECT_BAD(dt_tensor_view(a, 9, (int64_t[9]){0}, &o), "ndim 9", o);
    EXPECT_BAD(dt_tensor_view(a, 2, NULL, &o), "shape is NULL", o);
    EXPECT_BAD(dt_tensor_view(a, 1, (int64_t[]){24}, NULL), "'out' is NULL", o);
    EXPECT_BAD(dt_tensor_reshape(a, 1, (int64_t[]){23}, &o), "(23 elements)", o);

    EXPECT_BAD(dt_tensor_permute(a, (int[]){0, 1, 1}, &o), "dim 1 appears twice", o);
    EXPECT_BAD(dt_tensor_permute(a, (int[]){0, 1, 3}, &o), "dim 3 is out of range", o);
    EXPECT_BAD(dt_tensor_permute(a, (int[]){0, -4, 1}, &o), "dim -4 is out of range", o);
    EXPECT_BAD(dt_tensor_permute(a, NULL, &o), "perm is NULL", o);
    EXPECT_BAD(dt_tensor_transpose(a, 0, 7, &o), "dim 7 is out of range for a 3-dim", o);

    EXPECT_BAD(dt_tensor_narrow(a, 1, 2, 2, &o), "[2, 2 + 2) is out of range for dim 1 of size 3",
               o);
    EXPECT_BAD(dt_tensor_narrow(a, 1, -1, 1, &o), "[-1, -1 + 1)", o);
    EXPECT_BAD(dt_tensor_narrow(a, 1, 0, -1, &o), "0 + -1", o);
    EXPECT_BAD(dt_tensor_narrow(a, 1, 1, INT64_MAX, &o), "out of range", o); /* no overflow */
    EXPECT_BAD(dt_tensor_narrow(a, 5, 0, 1, &o), "dim 5", o);
    OK(dt_tensor_narrow(a, 1, 3, 0, &o)); /* empty at the end is fine */
    assert_int_equal(dt_tensor_numel(o), 0);
    dt_tensor_release(o);
    o = NULL;

    EXPECT_BAD(dt_tensor_expand(a, 3, (int64_t[]){2, 5, 4}, &o),
               "dim 1 of size 3 cannot expand to 5", o);
    EXPECT_BAD(dt_tensor_expand(a, 2, (int64_t[]){3, 4}, &o),
               "cannot expand a 3-dim tensor to "
               "ndim 2",
               o);
    EXPECT_BAD(dt_tensor_expand(a, 4, (int64_t[]){-1, 2, 3, 4}, &o), "leading dim 0 has size -1",
               o);
    EXPECT_BAD(dt_tensor_expand(a, 3, NULL, &o), "shape is NULL", o);
    EXPECT_BAD(dt_tensor_expand(a, 3, (int64_t[]){2, 3, -7}, &o), "cannot expand to -7", o);

    EXPECT_BAD(dt_tensor_squeeze(a, 0, &o), "dim 0 has size 2, not 1", o);
    EXPECT_BAD(dt_tensor_squeeze(a, 3, &o), "dim 3 is out of range", o);
    EXPECT_BAD(dt_tensor_unsqueeze(a, 4, &o), "dim 4 is out of range for a 4-dim", o);
    EXPECT_BAD(dt_tensor_unsqueeze(a, -5, &o), "dim -5", o);

    /* view of an incompatible layout */
    OK(dt_tensor_transpose(a, 1, 2, &t));
    EXPECT_BAD(dt_tensor_view(t, 2, (int64_t[]){2, 12}, &o), "cannot be viewed as [2, 12]", o);
    assert_non_null(strstr(dt_last_error(), "strides [12, 1, 4]"));
    dt_tensor_release(t);

    /* 8 dims is the limit */
    dt_tensor *d8 = NULL;
    OK(dt_tensor_zeros(8, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 2}, DT_DTYPE_U8, cpu, &d8));
    EXPECT_BAD(dt_tensor_unsqueeze(d8, 0, &o), "no room for another dim", o);
    EXPECT_BAD(dt_tensor_expand(d8, 9, (int64_t[9]){1, 1, 1, 1, 1, 1, 1, 1, 2}, &o), "ndim 9", o);
    dt_tensor_release(d8);
    dt_tensor_release(a);
}

static void test_copies(void **state)
{
    (void)state;
    dt_tensor *a = NULL, *b = NULL, *o = NULL;
    OK(dt_tensor_zeros(2, (int64_t[]){2, 3}, DT_DTYPE_F32, cpu, &a));
    OK(dt_tensor_zeros(2, (int64_t[]){3, 2}, DT_DTYPE_BF16, cpu, &b));
    EXPECT_BAD(dt_tensor_copy_(a, b), "dst shape [2, 3] differs from src shape [3, 2]", o);
    EXPECT_BAD(dt_tensor_copy_(a, NULL), "'src' is NULL", o);
    EXPECT_BAD(dt_tensor_to_dtype(a, (dt_dtype)77, &o), "unknown dtype value 77", o);
    EXPECT_BAD(dt_tensor_to_dtype(a, DT_DTYPE_F16, NULL), "'out' is NULL", o);
    EXPECT_BAD(dt_tensor_clone(a, NULL), "'out' is NULL", o);
    double v = 0;
    EXPECT_BAD(dt_tensor_item(a, NULL), "'out' is NULL", o);
    EXPECT_BAD(dt_tensor_item(a, &v), "6 elements, not 1", o);
    assert_true(isnan(dt_tensor_item_at(a, -1)));
    assert_non_null(strstr(dt_last_error(), "index -1"));
    assert_false(dt_tensor_equal(a, b));
    dt_tensor_release(b);
    dt_tensor_release(a);
}

static void fake_dist_release(void *self)
{
    (*(int *)((char *)self + sizeof(dt_refobj)))++;
}

/* A distributed handle (storage NULL) is refused by the local-only functions. */
static void test_distributed_handle(void **state)
{
    (void)state;
    struct {
        dt_refobj base;
        int released;
    } fake = {{fake_dist_release}, 0};
    dt_tensor *d = NULL, *o = NULL;
    OK(dt__tensor_alloc_handle(2, (int64_t[]){4, 4}, DT_DTYPE_F32, cpu, &d));
    d->dist = (struct dt_spec *)&fake;
    OK(dt_tensor_zeros(2, (int64_t[]){2, 4}, DT_DTYPE_F32, cpu, &d->local));
    assert_true(dt_tensor_is_distributed(d));
    assert_null(dt_tensor_data(d));
    EXPECT_BAD(dt_tensor_view(d, 1, (int64_t[]){16}, &o), "distributed", o);
    EXPECT_BAD(dt_tensor_clone(d, &o), "distributed", o);
    EXPECT_BAD(dt_tensor_fill(d, 0.0), "use dt_to_local", o);
    /* categories follow the local shard */
    dt_tensor_set_mem_category(d, DT_MEM_GRADIENT);
    assert_int_equal(dt_tensor_mem_category(d), DT_MEM_GRADIENT);
    assert_int_equal(dt_tensor_mem_category(d->local), DT_MEM_GRADIENT);
    dt_tensor_release(d); /* drops dist through its release hook, and local */
    assert_int_equal(fake.released, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_creation),
        cmocka_unit_test(test_null_tensors),
        cmocka_unit_test(test_views),
        cmocka_unit_test(test_copies),
        cmocka_unit_test(test_distributed_handle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
