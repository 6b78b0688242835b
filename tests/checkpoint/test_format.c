/*
 * safetensors read/write: byte-exact layout against the reference writer
 * (golden/tiny.safetensors made by torch_check.py golden), round trips of
 * every dtype and shape kind, boxes (shards) read from the mapping, writer
 * argument errors and the temporary-file discipline.
 */
#include <dirent.h>

#include "ck_test_util.h"

#ifndef CK_GOLDEN_DIR
#error "CK_GOLDEN_DIR must name tests/checkpoint/golden"
#endif

static double f_flt(int64_t i)
{
    return (double)(i - 3) * 0.375;
}
static double f_i64(int64_t i)
{
    return (double)(i * 1000000007LL - 5);
}
static double f_i32(int64_t i)
{
    return (double)(i * 7 - 9);
}
static double f_u16(int64_t i)
{
    return (double)(i * 20000 + 1);
}
static double f_u8(int64_t i)
{
    return (double)((i * 100 + 7) % 256);
}
static double f_25(int64_t i)
{
    (void)i;
    return 2.5;
}
static double f_m1(int64_t i)
{
    (void)i;
    return -1.0;
}

#define NG 11
static const char *g_names[NG] = {"w.f32",   "w.f64",   "w.f16",        "w.bf16",
                                  "ids.i64", "ids.i32", "tok.u16",      "mask.u8",
                                  "scalar",  "empty",   "caf\xc3\xa9.w"};

/* The tensors torch_check.py's golden_tensors() describes. */
static void golden_tensors(dt_tensor **t)
{
    int64_t s23[2] = {2, 3}, s3[1] = {3}, s22[2] = {2, 2}, s5[1] = {5}, s4[1] = {4},
            s04[2] = {0, 4}, s1[1] = {1};
    t[0] = ck_tensor(2, s23, DT_DTYPE_F32, f_flt);
    t[1] = ck_tensor(1, s3, DT_DTYPE_F64, f_flt);
    t[2] = ck_tensor(2, s22, DT_DTYPE_F16, f_flt);
    t[3] = ck_tensor(1, s5, DT_DTYPE_BF16, f_flt);
    t[4] = ck_tensor(2, s22, DT_DTYPE_I64, f_i64);
    t[5] = ck_tensor(1, s3, DT_DTYPE_I32, f_i32);
    t[6] = ck_tensor(1, s4, DT_DTYPE_U16, f_u16);
    t[7] = ck_tensor(1, s3, DT_DTYPE_U8, f_u8);
    t[8] = ck_tensor(0, NULL, DT_DTYPE_F32, f_25);
    t[9] = ck_tensor(2, s04, DT_DTYPE_F32, f_flt);
    t[10] = ck_tensor(1, s1, DT_DTYPE_F32, f_m1);
}

static const char *const g_meta[2] = {"format", "pt"};

static void test_golden_bytes(void **state)
{
    (void)state;
    dt_tensor *t[NG];
    golden_tensors(t);
    char dir[256], path[300];
    ck_tmpdir(dir, sizeof(dir), "golden");
    snprintf(path, sizeof(path), "%s/tiny.safetensors", dir);
    CK_OK(dt_safetensors_save(path, NG, g_names, t, 1, g_meta));
    size_t la = 0, lb = 0;
    unsigned char *a = ck_read_all(path, &la);
    unsigned char *b = ck_read_all(CK_GOLDEN_DIR "/tiny.safetensors", &lb);
    assert_int_equal(la, lb);
    for (size_t i = 0; i < la; i++)
        if (a[i] != b[i])
            fail_msg("byte %zu differs: ours 0x%02x, reference 0x%02x", i, a[i], b[i]);

    /* and the reference file reads back as the same tensors */
    dt_safetensors *f = NULL;
    CK_OK(dt_safetensors_open(CK_GOLDEN_DIR "/tiny.safetensors", &f));
    assert_int_equal(dt_safetensors_count(f), NG);
    assert_string_equal(dt_safetensors_metadata_get(f, "format"), "pt");
    assert_int_equal(dt_safetensors_metadata_count(f), 1);
    for (int i = 0; i < NG; i++) {
        dt_tensor *x = NULL;
        CK_OK(dt_safetensors_load(f, g_names[i], &x));
        assert_true(dt_tensor_equal(x, t[i]));
        dt_tensor_release(x);
        dt_tensor_release(t[i]);
    }
    dt_safetensors_close(f);
    free(a);
    free(b);
    ck_rmdir(dir);
}

static double f_mix(int64_t i)
{
    return (double)((i * 37 + 11) % 101) - 50.0;
}

static void test_roundtrip_dtypes(void **state)
{
    (void)state;
    int64_t shapes[5][3] = {{0}, {0}, {7}, {3, 5}, {2, 3, 4}};
    int ndims[5] = {0, 1, 1, 2, 3};
    enum { N = DT_DTYPE_COUNT * 5 + 1 };
    dt_tensor *t[N];
    char names[N][32];
    const char *np[N];
    int n = 0;
    for (int d = 0; d < DT_DTYPE_COUNT; d++)
        for (int s = 0; s < 5; s++) {
            t[n] = ck_tensor(ndims[s], shapes[s], (dt_dtype)d, f_mix);
            snprintf(names[n], sizeof(names[n]), "t.%s.%d", dt_dtype_name((dt_dtype)d), s);
            np[n] = names[n];
            n++;
        }
    /* a strided source: the transpose of [3, 5] f32 */
    dt_tensor *tr = NULL;
    CK_OK(dt_tensor_transpose(t[3], 0, 1, &tr));
    t[n] = tr;
    np[n++] = "transposed";
    char dir[256], path[300];
    ck_tmpdir(dir, sizeof(dir), "rt");
    snprintf(path, sizeof(path), "%s/rt.safetensors", dir);
    CK_OK(dt_safetensors_save(path, n, np, t, 0, NULL));
    dt_safetensors *f = NULL;
    CK_OK(dt_safetensors_open(path, &f));
    assert_int_equal(dt_safetensors_count(f), n);
    assert_int_equal(dt_safetensors_metadata_count(f), 0);
    for (int i = 0; i < n; i++) {
        dt_tensor *x = NULL, *want = NULL;
        CK_OK(dt_safetensors_load(f, np[i], &x));
        CK_OK(dt_tensor_contiguous(t[i], &want));
        if (!dt_tensor_equal(x, want))
            fail_msg("tensor %s differs after the round trip", np[i]);
        dt_tensor_release(x);
        dt_tensor_release(want);
    }
    int idx = -1;
    CK_FAILS(dt_safetensors_find(f, "nope", &idx), DT_ERR_NOT_FOUND, "'nope'");
    dt_safetensors_close(f);
    for (int i = 0; i < n; i++)
        dt_tensor_release(t[i]);
    ck_rmdir(dir);
}

/* Every box of a [5, 7, 3] tensor at a few offsets equals the narrowed tensor. */
static void test_read_box(void **state)
{
    (void)state;
    int64_t shape[3] = {5, 7, 3};
    dt_tensor *full = ck_tensor(3, shape, DT_DTYPE_F32, f_mix);
    char dir[256], path[300];
    ck_tmpdir(dir, sizeof(dir), "box");
    snprintf(path, sizeof(path), "%s/box.safetensors", dir);
    const char *nm = "x";
    CK_OK(dt_safetensors_save(path, 1, &nm, &full, 0, NULL));
    dt_safetensors *f = NULL;
    CK_OK(dt_safetensors_open(path, &f));
    int64_t boxes[][6] = {{0, 0, 0, 5, 7, 3}, {2, 0, 0, 3, 7, 3}, {0, 3, 0, 5, 4, 3},
                          {1, 2, 1, 3, 4, 2}, {4, 6, 2, 1, 1, 1}, {0, 7, 0, 5, 0, 3}};
    for (size_t b = 0; b < sizeof(boxes) / sizeof(boxes[0]); b++) {
        dt_tensor *cur = dt_tensor_retain(full), *next = NULL, *want = NULL, *got = NULL;
        for (int d = 0; d < 3; d++) {
            CK_OK(dt_tensor_narrow(cur, d, boxes[b][d], boxes[b][3 + d], &next));
            dt_tensor_release(cur);
            cur = next;
        }
        CK_OK(dt_tensor_clone(cur, &want));
        CK_OK(dt_tensor_zeros(3, &boxes[b][3], DT_DTYPE_F32, dt_device_cpu(), &got));
        CK_OK(dt_safetensors_read_box(f, 0, boxes[b], got));
        assert_true(dt_tensor_equal(got, want));
        /* a strided destination: the transpose of a [c, b, a] buffer */
        int64_t rs[3] = {boxes[b][5], boxes[b][4], boxes[b][3]};
        dt_tensor *buf = NULL, *view = NULL, *cmp = NULL;
        int perm[3] = {2, 1, 0};
        CK_OK(dt_tensor_zeros(3, rs, DT_DTYPE_F32, dt_device_cpu(), &buf));
        CK_OK(dt_tensor_permute(buf, perm, &view));
        CK_OK(dt_safetensors_read_box(f, 0, boxes[b], view));
        CK_OK(dt_tensor_clone(view, &cmp));
        assert_true(dt_tensor_equal(cmp, want));
        dt_tensor_release(cmp);
        dt_tensor_release(view);
        dt_tensor_release(buf);
        dt_tensor_release(got);
        dt_tensor_release(want);
        dt_tensor_release(cur);
    }
    int64_t off[3] = {3, 0, 0}, bs[3] = {3, 7, 3};
    dt_tensor *bad = NULL, *wrong = NULL;
    CK_OK(dt_tensor_zeros(3, bs, DT_DTYPE_F32, dt_device_cpu(), &bad));
    CK_FAILS(dt_safetensors_read_box(f, 0, off, bad), DT_ERR_INVALID_ARG, "outside tensor 'x'");
    CK_OK(dt_tensor_zeros(3, bs, DT_DTYPE_F64, dt_device_cpu(), &wrong));
    CK_FAILS(dt_safetensors_read_box(f, 0, NULL, wrong), DT_ERR_INVALID_ARG, "tensor 'x' is F32");
    CK_FAILS(dt_safetensors_read_box(f, 1, NULL, bad), DT_ERR_INVALID_ARG, "index 1");
    dt_tensor_release(bad);
    dt_tensor_release(wrong);
    dt_safetensors_close(f);
    dt_tensor_release(full);
    ck_rmdir(dir);
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_writer_errors(void **state)
{
    (void)state;
    char dir[256], path[300];
    ck_tmpdir(dir, sizeof(dir), "werr");
    snprintf(path, sizeof(path), "%s/w.safetensors", dir);
    int64_t s2[1] = {2}, s3[1] = {3};
    dt_safetensors_writer *w = NULL;
    dt_safetensors_entry dup[2] = {{"a", DT_DTYPE_F32, 1, s2}, {"a", DT_DTYPE_I64, 1, s2}};
    CK_FAILS(dt_safetensors_writer_create(path, 2, dup, 0, NULL, &w), DT_ERR_INVALID_ARG,
             "duplicate name 'a'");
    dt_safetensors_entry empty[1] = {{"", DT_DTYPE_F32, 1, s2}};
    CK_FAILS(dt_safetensors_writer_create(path, 1, empty, 0, NULL, &w), DT_ERR_INVALID_ARG,
             "empty name");
    dt_safetensors_entry res[1] = {{"__metadata__", DT_DTYPE_F32, 1, s2}};
    CK_FAILS(dt_safetensors_writer_create(path, 1, res, 0, NULL, &w), DT_ERR_INVALID_ARG,
             "reserved");
    dt_safetensors_entry badutf[1] = {{"a\xff", DT_DTYPE_F32, 1, s2}};
    CK_FAILS(dt_safetensors_writer_create(path, 1, badutf, 0, NULL, &w), DT_ERR_INVALID_ARG,
             "UTF-8");
    int64_t neg[1] = {-2};
    dt_safetensors_entry negs[1] = {{"n", DT_DTYPE_F32, 1, neg}};
    CK_FAILS(dt_safetensors_writer_create(path, 1, negs, 0, NULL, &w), DT_ERR_INVALID_ARG, "-2");
    const char *dupmeta[4] = {"k", "v", "k", "w"};
    dt_safetensors_entry ok[2] = {{"b", DT_DTYPE_F32, 1, s2}, {"a", DT_DTYPE_F32, 1, s3}};
    CK_FAILS(dt_safetensors_writer_create(path, 2, ok, 2, dupmeta, &w), DT_ERR_INVALID_ARG,
             "duplicate metadata key 'k'");
    CK_FAILS(dt_safetensors_writer_create("/nonexistent-dir/x.safetensors", 2, ok, 0, NULL, &w),
             DT_ERR_SYSTEM, "/nonexistent-dir/x.safetensors.tmp-");
    assert_int_equal(count_files(dir), 0);

    /* order: same dtype -> by name; a wrong shape is refused; an early commit leaves nothing */
    CK_OK(dt_safetensors_writer_create(path, 2, ok, 0, NULL, &w));
    assert_int_equal(dt_safetensors_writer_next(w), 1); /* "a" first */
    assert_int_equal(count_files(dir), 1);              /* the temporary file */
    dt_tensor *t2 = ck_tensor(1, s2, DT_DTYPE_F32, f_mix),
              *t3 = ck_tensor(1, s3, DT_DTYPE_F32, f_mix);
    CK_FAILS(dt_safetensors_writer_write(w, t2), DT_ERR_INVALID_ARG, "entry 'a' is f32 [3]");
    dt_safetensors_writer_abort(w);
    assert_int_equal(count_files(dir), 0);
    CK_OK(dt_safetensors_writer_create(path, 2, ok, 0, NULL, &w));
    CK_OK(dt_safetensors_writer_write(w, t3));
    assert_int_equal(dt_safetensors_writer_next(w), 0);
    CK_FAILS(dt_safetensors_writer_commit(w), DT_ERR_INVALID_ARG, "1 of 2 entries written");
    assert_int_equal(count_files(dir), 0);
    assert_int_equal(access(path, F_OK), -1);
    /* the full sequence */
    CK_OK(dt_safetensors_writer_create(path, 2, ok, 0, NULL, &w));
    CK_OK(dt_safetensors_writer_write(w, t3));
    CK_OK(dt_safetensors_writer_write(w, t2));
    assert_int_equal(dt_safetensors_writer_next(w), -1);
    CK_FAILS(dt_safetensors_writer_write(w, t2), DT_ERR_INVALID_ARG, "already written");
    CK_OK(dt_safetensors_writer_commit(w));
    assert_int_equal(count_files(dir), 1);
    dt_safetensors *f = NULL;
    CK_OK(dt_safetensors_open(path, &f));
    dt_safetensors_info info;
    CK_OK(dt_safetensors_info_at(f, 0, &info));
    assert_string_equal(info.name, "a");
    assert_int_equal(info.offset, 0);
    assert_int_equal(info.nbytes, 12);
    CK_OK(dt_safetensors_info_at(f, 1, &info));
    assert_string_equal(info.name, "b");
    assert_int_equal(info.offset, 12);
    assert_int_equal(info.dtype, DT_DTYPE_F32);
    CK_FAILS(dt_safetensors_info_at(f, 2, &info), DT_ERR_INVALID_ARG, "index 2");
    dt_safetensors_close(f);
    dt_tensor_release(t2);
    dt_tensor_release(t3);
    ck_rmdir(dir);
}

/* The reference writer's order: I64, F64, F32, I32, BF16, F16, U16, U8, then by name. */
static void test_writer_order(void **state)
{
    (void)state;
    int64_t s1[1] = {1};
    dt_safetensors_entry e[9] = {{"u8", DT_DTYPE_U8, 1, s1},     {"f16", DT_DTYPE_F16, 1, s1},
                                 {"b_f32", DT_DTYPE_F32, 1, s1}, {"i64", DT_DTYPE_I64, 1, s1},
                                 {"bf16", DT_DTYPE_BF16, 1, s1}, {"a_f32", DT_DTYPE_F32, 1, s1},
                                 {"u16", DT_DTYPE_U16, 1, s1},   {"i32", DT_DTYPE_I32, 1, s1},
                                 {"f64", DT_DTYPE_F64, 1, s1}};
    const char *want[9] = {"i64", "f64", "a_f32", "b_f32", "i32", "bf16", "f16", "u16", "u8"};
    char dir[256], path[300];
    ck_tmpdir(dir, sizeof(dir), "order");
    snprintf(path, sizeof(path), "%s/o.safetensors", dir);
    dt_safetensors_writer *w = NULL;
    CK_OK(dt_safetensors_writer_create(path, 9, e, 0, NULL, &w));
    for (int k = 0; k < 9; k++) {
        int i = dt_safetensors_writer_next(w);
        assert_true(i >= 0);
        assert_string_equal(e[i].name, want[k]);
        dt_tensor *t = ck_tensor(1, s1, e[i].dtype, f_mix);
        CK_OK(dt_safetensors_writer_write(w, t));
        dt_tensor_release(t);
    }
    CK_OK(dt_safetensors_writer_commit(w));
    ck_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_bytes), cmocka_unit_test(test_roundtrip_dtypes),
        cmocka_unit_test(test_read_box),     cmocka_unit_test(test_writer_errors),
        cmocka_unit_test(test_writer_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
