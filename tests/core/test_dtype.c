/* dtypes: sizes, names, parsing, exact bf16/f16 conversion (exhaustive and ties). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dtensor.h"

static uint32_t fbits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float bitsf(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

static void test_sizes_names(void **state)
{
    (void)state;
    static const size_t sizes[DT_DTYPE_COUNT] = {4, 8, 2, 2, 4, 8, 2, 1};
    static const char *names[DT_DTYPE_COUNT] = {"f32", "f64", "f16", "bf16",
                                                "i32", "i64", "u16", "u8"};
    for (int d = 0; d < DT_DTYPE_COUNT; d++) {
        assert_int_equal(dt_dtype_size((dt_dtype)d), sizes[d]);
        assert_string_equal(dt_dtype_name((dt_dtype)d), names[d]);
        dt_dtype p = DT_DTYPE_COUNT;
        assert_int_equal(dt_dtype_parse(names[d], &p), DT_OK);
        assert_int_equal(p, d);
    }
    assert_int_equal(dt_dtype_size(DT_DTYPE_COUNT), 0);
    assert_int_equal(dt_dtype_size((dt_dtype)-1), 0);
    assert_string_equal(dt_dtype_name((dt_dtype)99), "invalid");
    assert_string_equal(dt_reduce_op_name(DT_REDUCE_OP_AVG), "avg");
    assert_string_equal(dt_reduce_op_name(DT_REDUCE_OP_PROD), "prod");
    assert_string_equal(dt_reduce_op_name((dt_reduce_op)17), "invalid");
}

static void test_parse(void **state)
{
    (void)state;
    dt_dtype d = DT_DTYPE_COUNT;
    assert_int_equal(dt_dtype_parse("BFloat16", &d), DT_OK);
    assert_int_equal(d, DT_DTYPE_BF16);
    assert_int_equal(dt_dtype_parse("float32", &d), DT_OK);
    assert_int_equal(d, DT_DTYPE_F32);
    assert_int_equal(dt_dtype_parse("HALF", &d), DT_OK);
    assert_int_equal(d, DT_DTYPE_F16);
    assert_int_equal(dt_dtype_parse("uint16", &d), DT_OK);
    assert_int_equal(d, DT_DTYPE_U16);
    d = DT_DTYPE_I64;
    assert_int_equal(dt_dtype_parse("f8", &d), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "'f8'"));
    assert_int_equal(d, DT_DTYPE_I64); /* untouched on error */
    assert_int_equal(dt_dtype_parse(NULL, &d), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "name"));
    assert_int_equal(dt_dtype_parse("f32", NULL), DT_ERR_INVALID_ARG);
}

/* Every one of the 65536 f16 bit patterns survives f16 -> f32 -> f16 bit-exactly,
 * and f16 -> f32 gives the exact value (checked against _Float16 and ldexp). */
static void test_f16_exhaustive(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = dt_f16_to_f32((uint16_t)h);
        uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
        double ref;
        if (e == 0x1f)
            ref = m ? NAN : INFINITY;
        else if (e == 0)
            ref = ldexp((double)m, -24);
        else
            ref = ldexp((double)(m | 0x400), (int)e - 25);
        if (h & 0x8000)
            ref = -ref;
        if (isnan(ref)) {
            assert_true(isnan(f));
        } else {
            assert_true((double)f == ref);
            assert_int_equal(signbit(f) != 0, (h & 0x8000) != 0);
        }
        assert_int_equal(dt_f32_to_f16(f), h);
#ifdef __FLT16_MAX__
        if (!isnan(ref)) {
            _Float16 x;
            uint16_t hb = (uint16_t)h;
            memcpy(&x, &hb, 2);
            assert_true((float)x == f);
        }
#endif
    }
}

static void test_bf16_exhaustive(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = dt_bf16_to_f32((uint16_t)h);
        assert_int_equal(fbits(f), h << 16);
        assert_int_equal(dt_f32_to_bf16(f), h);
    }
}

/* The tensor copy's vectorised f32 -> bf16 (contiguous and strided) gives
 * dt_f32_to_bf16's bits for every f32 whose top half is any of the 65536
 * patterns, with low halves at the rounding edges and NaN payloads. */
static void test_bf16_tensor_copy(void **state)
{
    (void)state;
    static const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
    enum { NL = sizeof(lows) / sizeof(lows[0]), N = 65536 * NL };
    float *src = malloc(sizeof(float) * N);
    assert_non_null(src);
    for (uint32_t h = 0; h < 65536; h++)
        for (int l = 0; l < NL; l++)
            src[h * NL + l] = bitsf(h << 16 | lows[l]);
    int64_t shape[1] = {N}, pairs[2] = {N / 2, 2};
    dt_tensor *f = NULL, *b = NULL, *v = NULL, *t = NULL, *odd = NULL, *bo = NULL;
    assert_int_equal(dt_tensor_from_buffer(1, shape, DT_DTYPE_F32, src, &f), DT_OK);
    assert_int_equal(dt_tensor_to_dtype(f, DT_DTYPE_BF16, &b), DT_OK);
    /* the odd elements as one row of stride 2 */
    assert_int_equal(dt_tensor_view(f, 2, pairs, &v), DT_OK);
    assert_int_equal(dt_tensor_transpose(v, 0, 1, &t), DT_OK);
    assert_int_equal(dt_tensor_narrow(t, 0, 1, 1, &odd), DT_OK);
    assert_int_equal(dt_tensor_to_dtype(odd, DT_DTYPE_BF16, &bo), DT_OK);
    const uint16_t *got = dt_tensor_data(b), *got_odd = dt_tensor_data(bo);
    for (int64_t i = 0; i < N; i++) {
        uint16_t want = dt_f32_to_bf16(src[i]);
        if (got[i] != want || (i % 2 == 1 && got_odd[i / 2] != want))
            fail_msg("f32 0x%08x: copy gave 0x%04x (strided 0x%04x), dt_f32_to_bf16 0x%04x",
                     fbits(src[i]), got[i], i % 2 ? got_odd[i / 2] : want, want);
    }
    dt_tensor_release(bo);
    dt_tensor_release(odd);
    dt_tensor_release(t);
    dt_tensor_release(v);
    dt_tensor_release(b);
    dt_tensor_release(f);
    free(src);
}

/* Correctly rounded reference: nearest of the two neighbours, ties to the even mantissa. */
static uint16_t ref_round(float x, uint16_t lo_bits, float lo, uint16_t hi_bits, float hi)
{
    double dl = (double)x - (double)lo, dh = (double)hi - (double)x;
    if (dl < dh)
        return lo_bits;
    if (dh < dl)
        return hi_bits;
    return (lo_bits & 1) ? hi_bits : lo_bits;
}

/* Each midpoint between consecutive positive finite f16 values, and its f32
 * neighbours, rounds the right way (also against _Float16's conversion). */
static void test_f16_ties(void **state)
{
    (void)state;
    for (uint16_t h = 0; h < 0x7bff; h++) {
        float lo = dt_f16_to_f32(h), hi = dt_f16_to_f32((uint16_t)(h + 1));
        float mid = (float)(((double)lo + (double)hi) / 2); /* exact in f32 */
        assert_true((double)mid == ((double)lo + (double)hi) / 2);
        float probes[3] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
        for (int i = 0; i < 3; i++) {
            uint16_t want = ref_round(probes[i], h, lo, (uint16_t)(h + 1), hi);
            assert_int_equal(dt_f32_to_f16(probes[i]), want);
            assert_int_equal(dt_f32_to_f16(-probes[i]), want | 0x8000);
#ifdef __FLT16_MAX__
            _Float16 r = (_Float16)probes[i];
            uint16_t rb;
            memcpy(&rb, &r, 2);
            assert_int_equal(rb, want);
#endif
        }
    }
    /* named cases */
    assert_int_equal(dt_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(dt_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);     /* tie -> even */
    assert_int_equal(dt_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02); /* tie -> even (up) */
    assert_int_equal(dt_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(dt_f32_to_f16(65519.99f), 0x7bff);
    assert_int_equal(dt_f32_to_f16(65520.0f), 0x7c00); /* overflow -> inf */
    assert_int_equal(dt_f32_to_f16(1e10f), 0x7c00);
    assert_int_equal(dt_f32_to_f16(-1e10f), 0xfc00);
    assert_int_equal(dt_f32_to_f16(INFINITY), 0x7c00);
    assert_int_equal(dt_f32_to_f16(0x1p-24f), 0x0001); /* smallest subnormal */
    assert_int_equal(dt_f32_to_f16(0x1p-25f), 0x0000); /* tie -> even 0 */
    assert_int_equal(dt_f32_to_f16(nextafterf(0x1p-25f, 1.0f)), 0x0001);
    assert_int_equal(dt_f32_to_f16(3 * 0x1p-25f), 0x0002);        /* 1.5 ulp tie -> 2 */
    assert_int_equal(dt_f32_to_f16(0x1p-14f - 0x1p-25f), 0x0400); /* rounds up to normal */
    assert_int_equal(dt_f32_to_f16(1e-30f), 0x0000);
    assert_int_equal(dt_f32_to_f16(-0.0f), 0x8000);
    uint16_t n = dt_f32_to_f16(NAN);
    assert_true((n & 0x7c00) == 0x7c00 && (n & 0x3ff) != 0);
    n = dt_f32_to_f16(bitsf(0x7f800001u)); /* payload only in low bits: must stay NaN */
    assert_true((n & 0x7c00) == 0x7c00 && (n & 0x3ff) != 0);
}

static void test_bf16_ties(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x7f7f; h++) {
        uint32_t mid = (h << 16) | 0x8000u;
        uint16_t up = (uint16_t)(h + 1);
        assert_int_equal(dt_f32_to_bf16(bitsf(mid)), (h & 1) ? up : h);
        assert_int_equal(dt_f32_to_bf16(bitsf(mid - 1)), h);
        assert_int_equal(dt_f32_to_bf16(bitsf(mid + 1)), up);
        assert_int_equal(dt_f32_to_bf16(bitsf(mid | 0x80000000u)), ((h & 1) ? up : h) | 0x8000);
    }
    assert_int_equal(dt_f32_to_bf16(bitsf(0x7f7fffffu)), 0x7f80); /* FLT_MAX -> inf */
    assert_int_equal(dt_f32_to_bf16(bitsf(0x7f7f7fffu)), 0x7f7f);
    assert_int_equal(dt_f32_to_bf16(-INFINITY), 0xff80);
    uint16_t n = dt_f32_to_bf16(bitsf(0x7f800001u));
    assert_true((n & 0x7f80) == 0x7f80 && (n & 0x7f) != 0);
    n = dt_f32_to_bf16(bitsf(0xffc00000u));
    assert_int_equal(n, 0xffc0);
}

/* f64 -> bf16/f16 rounds once: values a hair off a midpoint must not tie through f32. */
static void test_f64_no_double_rounding(void **state)
{
    (void)state;
    dt_tensor *t = NULL;
    const dt_device cpu = dt_device_cpu();
    /* bf16 midpoint between 1 and 1 + 2^-7 is 1 + 2^-8 */
    assert_int_equal(dt_tensor_full(0, NULL, DT_DTYPE_BF16, cpu, 1.0 + 0x1p-8 + 0x1p-30, &t),
                     DT_OK);
    assert_int_equal(*(uint16_t *)dt_tensor_data(t), 0x3f81); /* up: above the midpoint */
    dt_tensor_release(t);
    assert_int_equal(dt_tensor_full(0, NULL, DT_DTYPE_BF16, cpu, 1.0 + 0x1p-8 - 0x1p-30, &t),
                     DT_OK);
    assert_int_equal(*(uint16_t *)dt_tensor_data(t), 0x3f80);
    dt_tensor_release(t);
    assert_int_equal(dt_tensor_full(0, NULL, DT_DTYPE_BF16, cpu, 1.0 + 0x1p-8, &t), DT_OK);
    assert_int_equal(*(uint16_t *)dt_tensor_data(t), 0x3f80); /* exact tie: even */
    dt_tensor_release(t);
    /* f16 midpoint between 1 and 1 + 2^-10 is 1 + 2^-11 */
    assert_int_equal(dt_tensor_full(0, NULL, DT_DTYPE_F16, cpu, -(1.0 + 0x1p-11 + 0x1p-40), &t),
                     DT_OK);
    assert_int_equal(*(uint16_t *)dt_tensor_data(t), 0xbc01);
    dt_tensor_release(t);
    /* an f64 tensor converted elementwise agrees */
    double v[3] = {1.0 + 0x1p-8 + 0x1p-30, 1e300, -1e-300};
    dt_tensor *d = NULL;
    assert_int_equal(dt_tensor_from_buffer(1, (int64_t[]){3}, DT_DTYPE_F64, v, &d), DT_OK);
    assert_int_equal(dt_tensor_to_dtype(d, DT_DTYPE_BF16, &t), DT_OK);
    const uint16_t *h = dt_tensor_data(t);
    assert_int_equal(h[0], 0x3f81);
    assert_int_equal(h[1], 0x7f80);
    assert_int_equal(h[2], 0x8000);
    dt_tensor_release(t);
    dt_tensor_release(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_names),      cmocka_unit_test(test_parse),
        cmocka_unit_test(test_f16_exhaustive),   cmocka_unit_test(test_bf16_exhaustive),
        cmocka_unit_test(test_f16_ties),         cmocka_unit_test(test_bf16_ties),
        cmocka_unit_test(test_bf16_tensor_copy), cmocka_unit_test(test_f64_no_double_rounding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
