/* Counter-based RNG: Philox known answers, shard == slice of the full tensor, statistics. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/tensor_impl.h"
#include "dtensor.h"

#define OK(call) assert_int_equal((call), DT_OK)

static void test_philox_kat(void **state)
{
    (void)state;
    /* Random123 kat_vectors for philox4x32_10 */
    static const uint32_t v[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
         0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
         0x94fdcceb, 0x5001e420, 0x24126ea1},
    };
    for (int i = 0; i < 3; i++) {
        uint32_t out[4];
        dt__philox4x32_10(v[i], v[i] + 4, out);
        assert_memory_equal(out, v[i] + 6, sizeof(out));
    }
}

/* The documented formula, written out independently for one element. */
static void test_documented_formula(void **state)
{
    (void)state;
    uint64_t seed = 0x123456789abcdefULL;
    dt_tensor *t = NULL;
    OK(dt_tensor_empty(1, (int64_t[]){5}, DT_DTYPE_F64, dt_device_cpu(), &t));
    OK(dt_tensor_fill_uniform(t, -1.0, 3.0, seed, (int64_t[]){1000}, (int64_t[]){995}));
    uint32_t key[2] = {0x89abcdefu, 0x01234567u}, ctr[4] = {998, 0, 0, 0}, r[4];
    dt__philox4x32_10(ctr, key, r);
    double u = (double)(((uint64_t)r[0] << 21) | (r[1] >> 11)) / 9007199254740992.0;
    assert_true(dt_tensor_item_at(t, 3) == -1.0 + 4.0 * u);

    OK(dt_tensor_fill_normal(t, 0.5, 2.0, seed, (int64_t[]){1000}, (int64_t[]){995}));
    double u1 = 1.0 - u;
    double u2 = (double)(((uint64_t)r[2] << 21) | (r[3] >> 11)) / 9007199254740992.0;
    assert_true(dt_tensor_item_at(t, 3) == 0.5 + 2.0 * sqrt(-2.0 * log(u1)) * cos(2 * M_PI * u2));
    dt_tensor_release(t);
}

/* Fill every shard of a grid split of @p shape and compare with the full tensor's slices. */
static void check_shards(int ndim, const int64_t *shape, const int64_t *parts, dt_dtype dtype)
{
    dt_tensor *full = NULL;
    OK(dt_tensor_empty(ndim, shape, dtype, dt_device_cpu(), &full));
    OK(dt_tensor_fill_normal(full, 0.0, 1.0, 7, NULL, NULL));
    int64_t nshards = 1;
    for (int d = 0; d < ndim; d++)
        nshards *= parts[d];
    for (int64_t s = 0; s < nshards; s++) {
        int64_t off[DT_MAX_DIMS], len[DT_MAX_DIMS], rem = s;
        for (int d = ndim - 1; d >= 0; d--) { /* uneven chunks: torch.chunk-like */
            int64_t k = rem % parts[d], chunk = (shape[d] + parts[d] - 1) / parts[d];
            rem /= parts[d];
            off[d] = k * chunk < shape[d] ? k * chunk : shape[d];
            len[d] = off[d] + chunk <= shape[d] ? chunk : shape[d] - off[d];
        }
        dt_tensor *local = NULL, *slice = full, *next = NULL;
        dt_tensor_retain(slice);
        for (int d = 0; d < ndim; d++) {
            OK(dt_tensor_narrow(slice, d, off[d], len[d], &next));
            dt_tensor_release(slice);
            slice = next;
        }
        OK(dt_tensor_empty(ndim, len, dtype, dt_device_cpu(), &local));
        OK(dt_tensor_fill_normal(local, 0.0, 1.0, 7, shape, off));
        assert_true(dt_tensor_equal(local, slice));
        dt_tensor_release(local);
        dt_tensor_release(slice);
    }
    dt_tensor_release(full);
}

static void test_shard_equals_slice(void **state)
{
    (void)state;
    check_shards(1, (int64_t[]){11}, (int64_t[]){3}, DT_DTYPE_F32);
    check_shards(2, (int64_t[]){7, 5}, (int64_t[]){2, 1}, DT_DTYPE_F32);
    check_shards(2, (int64_t[]){7, 5}, (int64_t[]){1, 3}, DT_DTYPE_BF16);
    check_shards(3, (int64_t[]){3, 11, 4}, (int64_t[]){3, 2, 4}, DT_DTYPE_F64);
    check_shards(4, (int64_t[]){2, 3, 5, 7}, (int64_t[]){2, 2, 2, 2}, DT_DTYPE_F16);
}

/* A strided (transposed) destination gets the values of its logical positions. */
static void test_strided_destination(void **state)
{
    (void)state;
    dt_tensor *a = NULL, *b = NULL, *bt = NULL;
    OK(dt_tensor_empty(2, (int64_t[]){4, 6}, DT_DTYPE_F32, dt_device_cpu(), &a));
    OK(dt_tensor_fill_uniform(a, 0.0, 1.0, 99, NULL, NULL));
    OK(dt_tensor_empty(2, (int64_t[]){6, 4}, DT_DTYPE_F32, dt_device_cpu(), &b));
    OK(dt_tensor_transpose(b, 0, 1, &bt));
    OK(dt_tensor_fill_uniform(bt, 0.0, 1.0, 99, NULL, NULL));
    assert_true(dt_tensor_equal(a, bt));
    /* another seed differs */
    OK(dt_tensor_fill_uniform(bt, 0.0, 1.0, 100, NULL, NULL));
    assert_false(dt_tensor_equal(a, bt));
    dt_tensor_release(bt);
    dt_tensor_release(b);
    dt_tensor_release(a);
}

static void test_statistics(void **state)
{
    (void)state;
    const int64_t n = 200000;
    dt_tensor *t = NULL;
    OK(dt_tensor_empty(1, &n, DT_DTYPE_F32, dt_device_cpu(), &t));
    OK(dt_tensor_fill_normal(t, 1.0, 2.0, 1234, NULL, NULL));
    const float *p = dt_tensor_data(t);
    double sum = 0, sq = 0;
    int64_t within1 = 0;
    for (int64_t i = 0; i < n; i++) {
        sum += p[i];
        sq += (double)p[i] * p[i];
        within1 += fabs(p[i] - 1.0) < 2.0;
    }
    double mean = sum / (double)n, sd = sqrt(sq / (double)n - mean * mean);
    assert_true(fabs(mean - 1.0) < 0.02); /* 5 sigma: 2 / sqrt(n) = 0.0045 */
    assert_true(fabs(sd - 2.0) < 0.02);
    assert_true(fabs((double)within1 / (double)n - 0.6827) < 0.01);

    OK(dt_tensor_fill_uniform(t, -3.0, 5.0, 1234, NULL, NULL));
    double lo = 1e9, hi = -1e9;
    sum = 0;
    for (int64_t i = 0; i < n; i++) {
        lo = fmin(lo, p[i]);
        hi = fmax(hi, p[i]);
        sum += p[i];
    }
    assert_true(lo >= -3.0 && hi <= 5.0 && lo < -2.99 && hi > 4.99);
    assert_true(fabs(sum / (double)n - 1.0) < 0.05);
    dt_tensor_release(t);
}

static void test_bad_input(void **state)
{
    (void)state;
    dt_tensor *t = NULL, *i = NULL;
    OK(dt_tensor_empty(2, (int64_t[]){2, 3}, DT_DTYPE_F32, dt_device_cpu(), &t));
    assert_int_equal(dt_tensor_fill_normal(NULL, 0, 1, 1, NULL, NULL), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_tensor_fill_normal(t, 0, -1, 1, NULL, NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "std -1"));
    assert_int_equal(dt_tensor_fill_uniform(t, 2, 1, 1, NULL, NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "[2, 1)"));
    assert_int_equal(dt_tensor_fill_normal(t, 0, 1, 1, (int64_t[]){4, 3}, (int64_t[]){3, 0}),
                     DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "dim 0: local [3, 3 + 2)"));
    assert_int_equal(dt_tensor_fill_normal(t, 0, 1, 1, (int64_t[]){4, 3}, (int64_t[]){-1, 0}),
                     DT_ERR_INVALID_ARG);
    assert_int_equal(dt_tensor_fill_normal(t, 0, 1, 1, (int64_t[]){4, -3}, NULL),
                     DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "negative size -3"));
    OK(dt_tensor_arange(4, DT_DTYPE_I32, &i));
    assert_int_equal(dt_tensor_fill_normal(i, 0, 1, 1, NULL, NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "i32"));
    dt_tensor_release(i);
    dt_tensor_release(t);
}

/* `core_rng --dump SEED N`: print fill_normal(0, 1) and fill_uniform(0, 1) of
 * N f64 elements, for tests/core/rng_reference.py to check the documented formula. */
static int dump(uint64_t seed, int64_t n)
{
    dt_tensor *a = NULL, *b = NULL;
    if (dt_tensor_empty(1, &n, DT_DTYPE_F64, dt_device_cpu(), &a) != DT_OK ||
        dt_tensor_empty(1, &n, DT_DTYPE_F64, dt_device_cpu(), &b) != DT_OK ||
        dt_tensor_fill_normal(a, 0.0, 1.0, seed, NULL, NULL) != DT_OK ||
        dt_tensor_fill_uniform(b, 0.0, 1.0, seed, NULL, NULL) != DT_OK) {
        fprintf(stderr, "%s\n", dt_last_error());
        return 1;
    }
    for (int64_t i = 0; i < n; i++)
        printf("%.17g %.17g\n", dt_tensor_item_at(a, i), dt_tensor_item_at(b, i));
    dt_tensor_release(a);
    dt_tensor_release(b);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--dump") == 0)
        return dump(strtoull(argv[2], NULL, 0), strtoll(argv[3], NULL, 0));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_philox_kat),         cmocka_unit_test(test_documented_formula),
        cmocka_unit_test(test_shard_equals_slice), cmocka_unit_test(test_strided_destination),
        cmocka_unit_test(test_statistics),         cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
