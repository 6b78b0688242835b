/*
 * Hostile safetensors files: every malformed class fails with DT_ERR_FORMAT
 * (or the documented other status) and a message naming the tensor and the
 * value, and nothing is read out of bounds (the suite runs under ASan: each
 * buffer is allocated at exactly its length).
 */
#include <stdint.h>

#include "ck_test_util.h"

/* A file: 8-byte little-endian length of @p hdr_len bytes of @p hdr, then
 * @p data_len bytes; @p claimed overrides the length field when nonzero. */
static unsigned char *mk(const char *hdr, size_t hdr_len, size_t data_len, uint64_t claimed,
                         size_t *len)
{
    *len = 8 + hdr_len + data_len;
    unsigned char *b = malloc(*len);
    uint64_t n = claimed != 0 ? claimed : hdr_len;
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(n >> (8 * i));
    memcpy(b + 8, hdr, hdr_len);
    for (size_t i = 0; i < data_len; i++)
        b[8 + hdr_len + i] = (unsigned char)i;
    return b;
}

/* Open @p hdr (+ data_len bytes) from memory; expect @p want with @p text. */
static void expect(const char *hdr, size_t data_len, dt_status want, const char *text)
{
    size_t len = 0;
    unsigned char *b = mk(hdr, strlen(hdr), data_len, 0, &len);
    dt_safetensors *f = NULL;
    dt_status st = dt_safetensors_open_memory(b, len, &f);
    if (st != want || strstr(dt_last_error(), text) == NULL)
        fail_msg("header %.80s: got %s '%s', want %s with '%s'", hdr, dt_status_str(st),
                 dt_last_error(), dt_status_str(want), text);
    assert_null(f);
    free(b);
}

#define T1(name, dt, shape, off)                                                                   \
    "\"" name "\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":" off "}"

static void test_lengths(void **state)
{
    (void)state;
    dt_safetensors *f = NULL;
    unsigned char small[5] = {1, 0, 0, 0, 0};
    CK_FAILS(dt_safetensors_open_memory(small, 5, &f), DT_ERR_FORMAT,
             "5 bytes, shorter than the 8-byte");
    CK_FAILS(dt_safetensors_open_memory(small, 0, &f), DT_ERR_FORMAT, "0 bytes");
    size_t len = 0;
    unsigned char *b = mk("{}", 2, 0, 1000, &len);
    CK_FAILS(dt_safetensors_open_memory(b, len, &f), DT_ERR_FORMAT,
             "header length 1000 runs past the end of the 10-byte file");
    free(b);
    b = mk("{}", 2, 0, 100000001, &len);
    CK_FAILS(dt_safetensors_open_memory(b, len, &f), DT_ERR_FORMAT,
             "header length 100000001 over the");
    free(b);
    b = mk("{}", 2, 0, UINT64_MAX, &len);
    CK_FAILS(dt_safetensors_open_memory(b, len, &f), DT_ERR_FORMAT,
             "over the 100000000-byte limit");
    free(b);
    /* an empty header length */
    unsigned char zero[8] = {0};
    CK_FAILS(dt_safetensors_open_memory(zero, 8, &f), DT_ERR_FORMAT, "does not start with '{'");
    /* minimal valid files */
    b = mk("{}      ", 8, 0, 0, &len);
    CK_OK(dt_safetensors_open_memory(b, len, &f));
    assert_int_equal(dt_safetensors_count(f), 0);
    dt_safetensors_close(f);
    free(b);
}

static void test_json(void **state)
{
    (void)state;
    expect("[1, 2]", 0, DT_ERR_FORMAT, "does not start with '{'");
    expect(" {}", 0, DT_ERR_FORMAT, "does not start with '{'");
    expect("\"str\"", 0, DT_ERR_FORMAT, "does not start with '{'");
    expect("{\"a\":", 0, DT_ERR_FORMAT, "header is not valid JSON");
    expect("{} x", 0, DT_ERR_FORMAT, "bytes after the JSON header at 3");
    expect("{}{}", 0, DT_ERR_FORMAT, "bytes after the JSON header at 2");
    expect("{\"a\xff\":{}}", 0, DT_ERR_FORMAT, "not valid UTF-8 (byte 3)");
    expect("{\"a\xc0\xaf\":{}}", 0, DT_ERR_FORMAT, "not valid UTF-8 (byte 3)");    /* overlong */
    expect("{\"\xed\xa0\x80\":{}}", 0, DT_ERR_FORMAT, "not valid UTF-8 (byte 2)"); /* surrogate */
    expect("{\"\xf4\x90\x80\x80\":{}}", 0, DT_ERR_FORMAT,
           "not valid UTF-8 (byte 2)");                                /* > U+10FFFF */
    expect("{\"a\xe2\x82\":{}}", 0, DT_ERR_FORMAT, "not valid UTF-8"); /* cut */
    /* a NUL byte inside the header */
    size_t len = 0;
    unsigned char *b = mk("{\"a\0\":1}", 8, 0, 0, &len);
    dt_safetensors *f = NULL;
    CK_FAILS(dt_safetensors_open_memory(b, len, &f), DT_ERR_FORMAT, "NUL byte");
    free(b);
    /* nesting deeper than the parser's limit: an error, not a stack overflow */
    enum { DEPTH = 5000 };
    char *deep = malloc(2 * DEPTH + 16);
    size_t n = 0;
    deep[n++] = '{';
    memcpy(deep + n, "\"a\":", 4);
    n += 4;
    for (int i = 0; i < DEPTH; i++)
        deep[n++] = '[';
    for (int i = 0; i < DEPTH; i++)
        deep[n++] = ']';
    deep[n++] = '}';
    b = mk(deep, n, 0, 0, &len);
    CK_FAILS(dt_safetensors_open_memory(b, len, &f), DT_ERR_FORMAT, "not valid JSON");
    free(b);
    free(deep);
}

static void test_entries(void **state)
{
    (void)state;
    expect("{\"a\":5}", 0, DT_ERR_FORMAT, "tensor 'a' is not an object");
    expect("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, DT_ERR_FORMAT,
           "tensor 'a': dtype missing or not a string");
    expect("{" T1("a", "F33", "[1]", "[0,4]") "}", 4, DT_ERR_FORMAT,
           "tensor 'a': unknown dtype 'F33'");
    expect("{" T1("a", "f32", "[1]", "[0,4]") "}", 4, DT_ERR_FORMAT, "unknown dtype 'f32'");
    expect("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, DT_ERR_FORMAT,
           "tensor 'a': shape missing or not an array");
    expect("{" T1("w", "F32", "[-1]", "[0,4]") "}", 4, DT_ERR_FORMAT,
           "tensor 'w': shape[0] is not a non-negative integer");
    expect("{" T1("w", "F32", "[2,1.5]", "[0,4]") "}", 4, DT_ERR_FORMAT, "shape[1] is not");
    expect("{" T1("w", "F32", "[1e300]", "[0,4]") "}", 4, DT_ERR_FORMAT, "shape[0] is not");
    expect("{" T1("w", "F32", "[\"3\"]", "[0,4]") "}", 4, DT_ERR_FORMAT, "shape[0] is not");
    expect("{" T1("w", "F32", "[4294967296,4294967296,4294967296]", "[0,4]") "}", 4, DT_ERR_FORMAT,
           "tensor 'w': shape's element count overflows");
    expect("{" T1("w", "F64", "[2147483648,2147483648]", "[0,4]") "}", 4, DT_ERR_FORMAT,
           "tensor 'w': shape's byte count overflows");
    /* a zero dim makes the count zero, but the strides must still fit */
    expect("{" T1("w", "F32", "[0,4294967296,4294967296,4294967296]", "[0,0]") "}", 4,
           DT_ERR_FORMAT, "tensor 'w': shape's strides overflow");
    expect("{" T1("w", "F32", "[0,4294967296,4000000006]", "[0,0]") "}", 0, DT_ERR_FORMAT,
           "tensor 'w': shape's strides overflow");
    expect("{" T1("w", "F32", "[0,65536,65536]", "[0,0]") "}", 4, DT_ERR_FORMAT,
           "cover 0 bytes of a 4-byte data section");
    expect("{" T1("w", "F32", "[1,2,3,4,5,6,7,8,9]", "[0,4]") "}", 4, DT_ERR_UNSUPPORTED,
           "tensor 'w' has 9 dims (at most 8)");
    expect("{" T1("w", "F32", "[1]", "5") "}", 4, DT_ERR_FORMAT,
           "tensor 'w': data_offsets is not [begin, end]");
    expect("{" T1("w", "F32", "[1]", "[0,4,8]") "}", 4, DT_ERR_FORMAT, "data_offsets is not");
    expect("{" T1("w", "F32", "[1]", "[-4,0]") "}", 4, DT_ERR_FORMAT, "data_offsets is not");
    expect("{" T1("w", "F32", "[1]", "[8,4]") "}", 4, DT_ERR_FORMAT,
           "tensor 'w': data_offsets [8, 4] end before begin");
    expect("{" T1("w", "F32", "[2]", "[0,4]") "}", 4, DT_ERR_FORMAT,
           "tensor 'w': data_offsets [0, 4] hold 4 bytes, F32 x 2 elements need 8");
    expect("{" T1("w", "BF16", "[3,1]", "[0,4]") "}", 4, DT_ERR_FORMAT, "BF16 x 3 elements need 6");
}

static void test_layout(void **state)
{
    (void)state;
    expect("{" T1("a", "F32", "[2]", "[0,8]") "," T1("b", "F32", "[2]", "[4,12]") "}", 12,
           DT_ERR_FORMAT,
           "tensor 'b': data_offsets [4, 12] overlap the previous tensor (expected begin 8)");
    expect("{" T1("a", "F32", "[2]", "[0,8]") "," T1("b", "F32", "[2]", "[12,20]") "}", 20,
           DT_ERR_FORMAT, "tensor 'b': data_offsets [12, 20] leave a gap (expected begin 8)");
    expect("{" T1("a", "F32", "[1]", "[4,8]") "}", 8, DT_ERR_FORMAT,
           "tensor 'a': data_offsets [4, 8] leave a gap");
    expect("{" T1("a", "F32", "[2]", "[0,8]") "}", 4, DT_ERR_FORMAT,
           "tensors cover 8 bytes of a 4-byte data section");
    expect("{" T1("a", "F32", "[1]", "[0,4]") "}", 8, DT_ERR_FORMAT,
           "tensors cover 4 bytes of a 8-byte data section");
    expect("{" T1("a", "F32", "[1]", "[0,4]") "," T1("a", "F32", "[1]", "[4,8]") "}", 8,
           DT_ERR_FORMAT, "duplicate tensor name 'a'");
    expect("{" T1("a", "F32", "[1]", "[0,4]") "," T1("b", "F32", "[1]", "[0,4]") "}", 4,
           DT_ERR_FORMAT, "overlap the previous tensor");
    /* an empty tensor may sit anywhere the tiling allows: [4,4] between two */
    size_t len = 0;
    const char *ok = "{" T1("b", "F32", "[1]", "[4,8]") "," T1("e", "F32", "[0]", "[4,4]") "," T1(
        "a", "U8", "[4]", "[0,4]") "}";
    unsigned char *b = mk(ok, strlen(ok), 8, 0, &len);
    dt_safetensors *f = NULL;
    CK_OK(dt_safetensors_open_memory(b, len, &f));
    assert_int_equal(dt_safetensors_count(f), 3);
    dt_safetensors_info info;
    CK_OK(dt_safetensors_info_at(f, 0, &info));
    assert_string_equal(info.name, "a");
    assert_ptr_equal(dt_safetensors_data_at(f, 0), b + 8 + strlen(ok));
    assert_null(dt_safetensors_data_at(f, 3));
    dt_safetensors_close(f);
    free(b);
}

static void test_metadata(void **state)
{
    (void)state;
    expect("{\"__metadata__\":5}", 0, DT_ERR_FORMAT, "__metadata__ is not an object");
    expect("{\"__metadata__\":{\"k\":1}}", 0, DT_ERR_FORMAT,
           "__metadata__ value of 'k' is not a string");
    expect("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, DT_ERR_FORMAT,
           "duplicate __metadata__ key 'k'");
    expect("{\"__metadata__\":{},\"__metadata__\":{}}", 0, DT_ERR_FORMAT, "duplicate __metadata__");
    const char *ok = "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"caf\xc3\xa9\"}}";
    size_t len = 0;
    unsigned char *b = mk(ok, strlen(ok), 0, 0, &len);
    dt_safetensors *f = NULL;
    CK_OK(dt_safetensors_open_memory(b, len, &f));
    assert_int_equal(dt_safetensors_metadata_count(f), 2);
    assert_string_equal(dt_safetensors_metadata_key_at(f, 1), "note");
    assert_string_equal(dt_safetensors_metadata_value_at(f, 1), "caf\xc3\xa9");
    assert_null(dt_safetensors_metadata_get(f, "missing"));
    assert_null(dt_safetensors_metadata_key_at(f, 2));
    dt_safetensors_close(f);
    free(b);
}

/* A valid file with a dtype dtensor lacks opens; reading that tensor does not. */
static void test_unsupported_dtype(void **state)
{
    (void)state;
    const char *h = "{" T1("m", "BOOL", "[2]", "[0,2]") "," T1("x", "U8", "[2]", "[2,4]") "}";
    size_t len = 0;
    unsigned char *b = mk(h, strlen(h), 4, 0, &len);
    dt_safetensors *f = NULL;
    CK_OK(dt_safetensors_open_memory(b, len, &f));
    dt_safetensors_info info;
    CK_OK(dt_safetensors_info_at(f, 0, &info));
    assert_string_equal(info.dtype_name, "BOOL");
    assert_int_equal(info.dtype, DT_DTYPE_COUNT);
    dt_tensor *t = NULL;
    CK_FAILS(dt_safetensors_load(f, "m", &t), DT_ERR_UNSUPPORTED,
             "tensor 'm' of <memory> has dtype BOOL");
    CK_OK(dt_safetensors_load(f, "x", &t));
    assert_int_equal((int)dt_tensor_item_at(t, 1), 3);
    dt_tensor_release(t);
    dt_safetensors_close(f);
    free(b);
}

static void test_files(void **state)
{
    (void)state;
    char dir[256], path[300];
    ck_tmpdir(dir, sizeof(dir), "mal");
    dt_safetensors *f = NULL;
    snprintf(path, sizeof(path), "%s/missing.safetensors", dir);
    CK_FAILS(dt_safetensors_open(path, &f), DT_ERR_SYSTEM, "cannot open");
    CK_FAILS(dt_safetensors_open(dir, &f), DT_ERR_INVALID_ARG,
             "is a directory, not a regular file");
    snprintf(path, sizeof(path), "%s/empty.safetensors", dir);
    ck_write_all(path, "", 0);
    CK_FAILS(dt_safetensors_open(path, &f), DT_ERR_FORMAT, "empty.safetensors: 0 bytes");
    /* a valid file cut short anywhere is refused */
    int64_t s[2] = {3, 4};
    dt_tensor *t = NULL;
    CK_OK(dt_tensor_ones(2, s, DT_DTYPE_F32, dt_device_cpu(), &t));
    snprintf(path, sizeof(path), "%s/ok.safetensors", dir);
    const char *nm = "w";
    CK_OK(dt_safetensors_save(path, 1, &nm, &t, 0, NULL));
    size_t len = 0;
    unsigned char *whole = ck_read_all(path, &len);
    for (size_t cut = 0; cut < len; cut++) {
        unsigned char *b = malloc(cut + 1);
        memcpy(b, whole, cut);
        dt_status st = dt_safetensors_open_memory(b, cut, &f);
        if (st != DT_ERR_FORMAT)
            fail_msg("cut at %zu of %zu: %s", cut, len, dt_status_str(st));
        free(b);
    }
    free(whole);
    dt_tensor_release(t);
    ck_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lengths),  cmocka_unit_test(test_json),
        cmocka_unit_test(test_entries),  cmocka_unit_test(test_layout),
        cmocka_unit_test(test_metadata), cmocka_unit_test(test_unsupported_dtype),
        cmocka_unit_test(test_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
