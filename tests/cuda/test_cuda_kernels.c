/*
 * The CUDA kernel table against the CPU table (the reference) on random
 * inputs: every entry and each launch path (e.g. reductions by thread, warp
 * or block), strided and broadcast operands, edge cases (causal
 * rows with no key, ignore_index, empty reductions, K = 0 GEMM), errors.
 *
 * The table, iterator and no-device checks run everywhere. Without a GPU
 * (cudaGetDeviceCount() == 0, as on the development and CI machines) the
 * kernel comparisons cannot run: after the host checks pass the program exits
 * 77, which ctest reports as skipped (SKIP_RETURN_CODE), not passed.
 */
#include <string.h>

#include "cuda_test_util.h"
#include "kernels/cuda/cuda_common.h"

static bool have_gpu;

/* ------------------------------------------------------------ everywhere */

static void test_table_complete(void **state)
{
    (void)state;
    const dt_kernel_ops *k = cu_gpu();
    assert_ptr_equal(k, &dt__kernels_cuda);
    assert_string_equal(k->name, "cuda");
    const void *entries[] = {(void *)k->supports,
                             (void *)k->fill,
                             (void *)k->copy,
                             (void *)k->gemm,
                             (void *)k->binary,
                             (void *)k->unary,
                             (void *)k->unary_backward,
                             (void *)k->softmax,
                             (void *)k->softmax_backward,
                             (void *)k->layer_norm,
                             (void *)k->layer_norm_backward,
                             (void *)k->embedding,
                             (void *)k->embedding_backward,
                             (void *)k->cross_entropy,
                             (void *)k->cross_entropy_backward,
                             (void *)k->reduce,
                             (void *)k->masked_fill,
                             (void *)k->sgd_step,
                             (void *)k->adamw_step,
                             (void *)k->sum_squares};
    for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++)
        assert_non_null(entries[i]);
    for (int op = 0; op < DT_KOP_COUNT; op++)
        assert_true(k->supports((dt_kernel_op)op, DT_DTYPE_F32));
    assert_true(k->supports(DT_KOP_COPY, DT_DTYPE_BF16));
    assert_true(k->supports(DT_KOP_FILL, DT_DTYPE_U8));
    assert_true(k->supports(DT_KOP_GEMM, DT_DTYPE_F16)); /* cublasGemmEx */
    assert_true(k->supports(DT_KOP_GEMM, DT_DTYPE_BF16));
    assert_false(k->supports(DT_KOP_GEMM, DT_DTYPE_I64));
    assert_false(k->supports(DT_KOP_SOFTMAX, DT_DTYPE_BF16));
    assert_false(k->supports(DT_KOP_COUNT, DT_DTYPE_F32));
}

static dt_tensor *host(int ndim, const int64_t *shape)
{
    dt_tensor *t = NULL;
    CU_OK(dt_tensor_empty(ndim, shape, DT_DTYPE_F32, dt_device_cpu(), &t));
    return t;
}

/* dt__cuda_iter_init is host code: broadcasting, size-1 dims, merging. */
static void test_iter_collapse(void **state)
{
    (void)state;
    int64_t s3[3] = {4, 5, 6}, s1[1] = {6}, s34[2] = {3, 4}, s43[2] = {4, 3};
    dt_tensor *out = host(3, s3), *a = host(3, s3), *b = host(1, s1);
    const dt_tensor *ins[2] = {a, b};
    const char *names[2] = {"a", "b"};
    dt__cu_iter it;
    CU_OK(dt__cuda_iter_init("t", &it, out, 2, ins, names));
    assert_int_equal(it.nops, 3);
    assert_int_equal(it.numel, 120);
    assert_int_equal(it.ndim, 2); /* [4, 5] merged; b's broadcast stops the last merge */
    assert_int_equal(it.shape[0], 20);
    assert_int_equal(it.shape[1], 6);
    assert_int_equal(it.st[0][0], 6);
    assert_int_equal(it.st[1][1], 1);
    assert_int_equal(it.st[2][0], 0);
    assert_int_equal(it.st[2][1], 1);

    /* a transposed input cannot merge */
    dt_tensor *m = host(2, s34), *mt = NULL, *o2 = host(2, s43);
    CU_OK(dt_tensor_transpose(m, 0, 1, &mt));
    const dt_tensor *ins2[1] = {mt};
    CU_OK(dt__cuda_iter_init("t", &it, o2, 1, ins2, names));
    assert_int_equal(it.ndim, 2);
    assert_int_equal(it.st[1][0], 1);
    assert_int_equal(it.st[1][1], 4);

    /* size-1 dims vanish */
    int64_t s171[3] = {1, 7, 1};
    dt_tensor *o3 = host(3, s171);
    CU_OK(dt__cuda_iter_init("t", &it, o3, 0, NULL, NULL));
    assert_int_equal(it.ndim, 1);
    assert_int_equal(it.shape[0], 7);

    /* a shape that does not broadcast is named */
    int64_t s5[1] = {5};
    dt_tensor *bad = host(1, s5);
    const dt_tensor *ins3[1] = {bad};
    const char *bname[1] = {"mask"};
    assert_int_equal(dt__cuda_iter_init("fn", &it, out, 1, ins3, bname), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "mask dim 0 has size 5"));
    dt_tensor_release(bad);
    dt_tensor_release(o3);
    dt_tensor_release(o2);
    dt_tensor_release(mt);
    dt_tensor_release(m);
    dt_tensor_release(b);
    dt_tensor_release(a);
    dt_tensor_release(out);
}

/* Without a device, CUDA storage fails cleanly (no abort); with one it works. */
static void test_device_or_clean_error(void **state)
{
    (void)state;
    int64_t shape[2] = {3, 5};
    dt_tensor *g = NULL;
    dt_status st = dt_tensor_empty(2, shape, DT_DTYPE_F32, cu_gpu0, &g);
    if (!have_gpu) {
        assert_int_equal(st, DT_ERR_UNSUPPORTED);
        assert_null(g);
        assert_non_null(strstr(dt_last_error(), "no device cuda:0"));
        return;
    }
    CU_OK(st);
    CU_OK(cu_gpu()->fill(g, 2.5));
    dt_tensor *c = cu_to_cpu(g);
    for (int64_t i = 0; i < 15; i++)
        assert_true(dt_tensor_item_at(c, i) == 2.5);
    dt_tensor_release(c);
    dt_tensor_release(g);
}

/* ------------------------------------------------------------ element-wise */

static void test_copy_fill_dtypes(void **state)
{
    (void)state;
    int64_t s[2] = {7, 9};
    cu_pair x = cu_rand(2, s, -300, 300, 1);
    static const dt_dtype dts[] = {DT_DTYPE_F32, DT_DTYPE_F64, DT_DTYPE_F16, DT_DTYPE_BF16,
                                   DT_DTYPE_I32, DT_DTYPE_I64, DT_DTYPE_U16, DT_DTYPE_U8};
    for (size_t i = 0; i < sizeof(dts) / sizeof(dts[0]); i++) {
        cu_pair y = cu_empty(2, s, dts[i]);
        CU_OK(cu_cpu()->copy(y.c, x.c));
        CU_OK(cu_gpu()->copy(y.g, x.g)); /* device -> device conversion */
        cu_expect_close(dt_dtype_name(dts[i]), y, 0, 0);
        /* strided source, converting device -> host and host -> device */
        cu_pair xt = cu_transpose(x, 0, 1);
        int64_t st[2] = {9, 7};
        cu_pair z = cu_empty(2, st, dts[i]);
        CU_OK(cu_cpu()->copy(z.c, xt.c));
        dt_tensor *h = NULL;
        CU_OK(dt_tensor_empty(2, st, dts[i], dt_device_cpu(), &h));
        CU_OK(cu_gpu()->copy(h, xt.g)); /* D2H with conversion */
        CU_OK(cu_gpu()->copy(z.g, h));  /* H2D */
        cu_expect_close("transposed copy", z, 0, 0);
        dt_tensor_release(h);
        cu_pair f = cu_empty(2, st, dts[i]);
        CU_OK(cu_cpu()->fill(f.c, -3.75));
        CU_OK(cu_gpu()->fill(f.g, -3.75));
        cu_expect_close("fill", f, 0, 0);
        cu_pair_release(f);
        cu_pair_release(z);
        cu_pair_release(xt);
        cu_pair_release(y);
    }
    cu_pair_release(x);
}

static void test_binary_unary(void **state)
{
    (void)state;
    int64_t s3[3] = {4, 5, 33}, row[1] = {33}, col[3] = {4, 5, 1};
    cu_pair a = cu_rand(3, s3, -2, 2, 2), b = cu_rand(3, s3, 0.5, 2, 3);
    cu_pair r = cu_rand(1, row, 0.5, 2, 4), c = cu_rand(3, col, 0.5, 2, 5);
    cu_pair o = cu_empty(3, s3, DT_DTYPE_F32);
    const cu_pair *rhs[3] = {&b, &r, &c};
    for (int op = DT_BINARY_ADD; op <= DT_BINARY_DIV; op++)
        for (int k = 0; k < 3; k++) {
            CU_OK(cu_cpu()->binary((dt_binary_op)op, a.c, rhs[k]->c, o.c));
            CU_OK(cu_gpu()->binary((dt_binary_op)op, a.g, rhs[k]->g, o.g));
            cu_expect_close("binary", o, 1e-6, 1e-6);
        }
    /* strided: a narrowed and a transposed operand */
    int64_t sq[2] = {33, 33};
    cu_pair m = cu_rand(2, sq, -1, 1, 6), mt = cu_transpose(m, 0, 1);
    cu_pair o2 = cu_empty(2, sq, DT_DTYPE_F32);
    CU_OK(cu_cpu()->binary(DT_BINARY_SUB, m.c, mt.c, o2.c));
    CU_OK(cu_gpu()->binary(DT_BINARY_SUB, m.g, mt.g, o2.g));
    cu_expect_close("m - m^T", o2, 0, 0);

    cu_pair pos = cu_rand(3, s3, 0.1, 3, 7);
    for (int op = DT_UNARY_SCALE; op <= DT_UNARY_SQUARE; op++) {
        const cu_pair *in = (op == DT_UNARY_LOG || op == DT_UNARY_SQRT) ? &pos : &a;
        CU_OK(cu_cpu()->unary((dt_unary_op)op, in->c, 0.75f, o.c));
        CU_OK(cu_gpu()->unary((dt_unary_op)op, in->g, 0.75f, o.g));
        cu_expect_close("unary", o, 1e-6, 1e-5);
    }
    int bw[2] = {DT_UNARY_GELU_TANH, DT_UNARY_RELU};
    for (int k = 0; k < 2; k++) {
        CU_OK(cu_cpu()->unary_backward((dt_unary_op)bw[k], a.c, b.c, o.c));
        CU_OK(cu_gpu()->unary_backward((dt_unary_op)bw[k], a.g, b.g, o.g));
        cu_expect_close("unary_backward", o, 1e-6, 1e-5);
    }
    assert_int_equal(cu_gpu()->unary_backward(DT_UNARY_EXP, a.g, b.g, o.g), DT_ERR_UNSUPPORTED);

    /* masked fill with a broadcast u8 mask */
    int64_t ms[3] = {4, 1, 33};
    cu_pair mf = cu_ids(4 * 33, DT_DTYPE_U8, 0, 2, 8);
    cu_pair mask;
    CU_OK(dt_tensor_view(mf.c, 3, ms, &mask.c));
    CU_OK(dt_tensor_view(mf.g, 3, ms, &mask.g));
    CU_OK(cu_cpu()->masked_fill(a.c, mask.c, -1e9f, o.c));
    CU_OK(cu_gpu()->masked_fill(a.g, mask.g, -1e9f, o.g));
    cu_expect_close("masked_fill", o, 0, 0);
    cu_pair_release(mask);
    cu_pair_release(mf);
    cu_pair_release(pos);
    cu_pair_release(o2);
    cu_pair_release(mt);
    cu_pair_release(m);
    cu_pair_release(o);
    cu_pair_release(c);
    cu_pair_release(r);
    cu_pair_release(b);
    cu_pair_release(a);
}

/* ------------------------------------------------------------ gemm */

static void gemm_case(int64_t B, int64_t M, int64_t N, int64_t K, bool ta, bool tb, bool bcast_b,
                      float alpha, float beta)
{
    int64_t as[3] = {B, ta ? K : M, ta ? M : K};
    int64_t bs[3] = {bcast_b ? 1 : B, tb ? N : K, tb ? K : N};
    int64_t cs[3] = {B, M, N};
    cu_pair a = cu_rand(3, as, -1, 1, 10), b0 = cu_rand(3, bs, -1, 1, 11);
    cu_pair c = cu_rand(3, cs, -1, 1, 12);
    int64_t bx[3] = {B, bs[1], bs[2]};
    cu_pair b = bcast_b ? cu_expand(b0, 3, bx) : cu_narrow(b0, 0, 0, B);
    CU_OK(cu_cpu()->gemm(a.c, b.c, ta, tb, alpha, beta, c.c));
    CU_OK(cu_gpu()->gemm(a.g, b.g, ta, tb, alpha, beta, c.g));
    char what[96];
    snprintf(what, sizeof(what), "gemm B%lld M%lld N%lld K%lld ta%d tb%d bc%d", (long long)B,
             (long long)M, (long long)N, (long long)K, ta, tb, bcast_b);
    cu_expect_close(what, c, 1e-4, 1e-4);
    cu_pair_release(b);
    cu_pair_release(c);
    cu_pair_release(b0);
    cu_pair_release(a);
}

static void test_gemm(void **state)
{
    (void)state;
    for (int t = 0; t < 4; t++) {
        gemm_case(1, 17, 23, 31, t & 1, t & 2, false, 1.0f, 0.0f);
        gemm_case(3, 8, 5, 64, t & 1, t & 2, false, 0.5f, 1.0f);
        gemm_case(4, 9, 7, 13, t & 1, t & 2, true, 1.0f, 0.25f);
    }
    gemm_case(2, 5, 6, 0, false, false, false, 1.0f, 0.5f); /* K = 0: c = beta c */

    /* mixed broadcast batch (pointer-array path): a [2, 1, M, K] -> c [2, 3, M, N] */
    int64_t as[4] = {2, 1, 6, 4}, ax[4] = {2, 3, 6, 4}, bs[4] = {2, 3, 4, 5}, cs[4] = {2, 3, 6, 5};
    cu_pair a0 = cu_rand(4, as, -1, 1, 13), b = cu_rand(4, bs, -1, 1, 14);
    cu_pair a = cu_expand(a0, 4, ax), c = cu_empty(4, cs, DT_DTYPE_F32);
    CU_OK(cu_cpu()->gemm(a.c, b.c, false, false, 1.0f, 0.0f, c.c));
    CU_OK(cu_gpu()->gemm(a.g, b.g, false, false, 1.0f, 0.0f, c.g));
    cu_expect_close("gemm broadcast batch", c, 1e-5, 1e-5);
    cu_pair_release(c);
    cu_pair_release(a);
    cu_pair_release(b);
    cu_pair_release(a0);
}

/* ------------------------------------------------------------ rows */

static void test_softmax(void **state)
{
    (void)state;
    int64_t shapes[3][3] = {{2, 7, 7}, {3, 5, 300}, {2, 9, 4}}; /* Tq > Tk: NaN rows */
    for (int k = 0; k < 3; k++)
        for (int mode = 0; mode < 4; mode++) {
            bool causal = mode & 1, lg = mode & 2;
            cu_pair x = cu_rand(3, shapes[k], -3, 3, 20 + (uint64_t)k);
            cu_pair y = cu_empty(3, shapes[k], DT_DTYPE_F32),
                    gx = cu_empty(3, shapes[k], DT_DTYPE_F32);
            cu_pair gy = cu_rand(3, shapes[k], -1, 1, 30 + (uint64_t)k);
            CU_OK(cu_cpu()->softmax(x.c, 0.125f, causal, lg, y.c));
            CU_OK(cu_gpu()->softmax(x.g, 0.125f, causal, lg, y.g));
            cu_expect_close("softmax", y, 1e-6, 1e-5);
            if (!(causal && k == 2)) { /* backward of NaN rows is NaN either way */
                CU_OK(cu_cpu()->softmax_backward(y.c, gy.c, 0.125f, lg, gx.c));
                CU_OK(cu_gpu()->softmax_backward(y.g, gy.g, 0.125f, lg, gx.g));
                cu_expect_close("softmax_backward", gx, 1e-6, 1e-4);
            }
            cu_pair_release(gy);
            cu_pair_release(gx);
            cu_pair_release(y);
            cu_pair_release(x);
        }
}

static void test_layer_norm(void **state)
{
    (void)state;
    int64_t xs[3] = {3, 17, 100}, ws[1] = {100}, rs[2] = {3, 17};
    cu_pair x = cu_rand(3, xs, -2, 3, 40), w = cu_rand(1, ws, 0.5, 1.5, 41);
    cu_pair b = cu_rand(1, ws, -1, 1, 42), gy = cu_rand(3, xs, -1, 1, 43);
    for (int affine = 0; affine < 2; affine++) {
        cu_pair y = cu_empty(3, xs, DT_DTYPE_F32), mean = cu_empty(2, rs, DT_DTYPE_F32);
        cu_pair rstd = cu_empty(2, rs, DT_DTYPE_F32), gx = cu_empty(3, xs, DT_DTYPE_F32);
        cu_pair gw = cu_zeros(1, ws), gb = cu_zeros(1, ws);
        CU_OK(cu_cpu()->layer_norm(x.c, affine ? w.c : NULL, affine ? b.c : NULL, 1e-5f, y.c,
                                   mean.c, rstd.c));
        CU_OK(cu_gpu()->layer_norm(x.g, affine ? w.g : NULL, affine ? b.g : NULL, 1e-5f, y.g,
                                   mean.g, rstd.g));
        cu_expect_close("layer_norm y", y, 1e-5, 1e-5);
        cu_expect_close("layer_norm mean", mean, 1e-6, 1e-5);
        cu_expect_close("layer_norm rstd", rstd, 1e-6, 1e-5);
        for (int rep = 0; rep < 2; rep++) { /* gw/gb accumulate */
            CU_OK(cu_cpu()->layer_norm_backward(x.c, affine ? w.c : NULL, mean.c, rstd.c, gy.c,
                                                gx.c, gw.c, gb.c));
            CU_OK(cu_gpu()->layer_norm_backward(x.g, affine ? w.g : NULL, mean.g, rstd.g, gy.g,
                                                gx.g, gw.g, gb.g));
        }
        cu_expect_close("layer_norm gx", gx, 1e-5, 1e-4);
        cu_expect_close("layer_norm gw", gw, 1e-4, 1e-4);
        cu_expect_close("layer_norm gb", gb, 1e-4, 1e-4);
        cu_pair_release(gb);
        cu_pair_release(gw);
        cu_pair_release(gx);
        cu_pair_release(rstd);
        cu_pair_release(mean);
        cu_pair_release(y);
    }
    cu_pair_release(gy);
    cu_pair_release(b);
    cu_pair_release(w);
    cu_pair_release(x);
}

/* ------------------------------------------------------------ lookups */

static void test_embedding(void **state)
{
    (void)state;
    static const dt_dtype idt[3] = {DT_DTYPE_I64, DT_DTYPE_I32, DT_DTYPE_U16};
    int64_t ws[2] = {50, 24}, os[2] = {77, 24};
    for (int k = 0; k < 3; k++) {
        cu_pair w = cu_rand(2, ws, -1, 1, 50), gy = cu_rand(2, os, -1, 1, 51);
        cu_pair ids = cu_ids(77, idt[k], 0, 120, 52 + (uint64_t)k); /* many outside the shard */
        cu_pair out = cu_empty(2, os, DT_DTYPE_F32), gw = cu_zeros(2, ws);
        CU_OK(cu_cpu()->embedding(w.c, ids.c, 40, out.c));
        CU_OK(cu_gpu()->embedding(w.g, ids.g, 40, out.g));
        cu_expect_close("embedding", out, 0, 0);
        CU_OK(cu_cpu()->embedding_backward(ids.c, gy.c, 40, gw.c));
        CU_OK(cu_gpu()->embedding_backward(ids.g, gy.g, 40, gw.g));
        cu_expect_close("embedding_backward", gw, 1e-5, 1e-5);
        cu_pair_release(gw);
        cu_pair_release(out);
        cu_pair_release(ids);
        cu_pair_release(gy);
        cu_pair_release(w);
    }
}

static void test_cross_entropy(void **state)
{
    (void)state;
    int64_t ls[2] = {37, 301}, ns[1] = {37};
    cu_pair logits = cu_rand(2, ls, -4, 4, 60), gloss = cu_rand(1, ns, 0.1, 1, 61);
    cu_pair tg = cu_ids(37, DT_DTYPE_I64, -1, 301, 62); /* -1 = ignore_index */
    cu_pair loss = cu_empty(1, ns, DT_DTYPE_F32), lse = cu_empty(1, ns, DT_DTYPE_F32);
    cu_pair gl = cu_empty(2, ls, DT_DTYPE_F32);
    CU_OK(cu_cpu()->cross_entropy(logits.c, tg.c, -1, loss.c, lse.c));
    CU_OK(cu_gpu()->cross_entropy(logits.g, tg.g, -1, loss.g, lse.g));
    cu_expect_close("ce loss", loss, 1e-5, 1e-5);
    cu_expect_close("ce lse", lse, 1e-5, 1e-5);
    CU_OK(cu_cpu()->cross_entropy_backward(logits.c, tg.c, -1, lse.c, gloss.c, gl.c));
    CU_OK(cu_gpu()->cross_entropy_backward(logits.g, tg.g, -1, lse.g, gloss.g, gl.g));
    cu_expect_close("ce backward", gl, 1e-6, 1e-4);
    /* a target outside [0, C) is an error naming its row; nothing written */
    cu_pair bad = cu_ids(37, DT_DTYPE_I64, 301, 302, 63);
    assert_int_equal(cu_gpu()->cross_entropy(logits.g, bad.g, -1, loss.g, lse.g),
                     DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "target 301 of row 0"));
    cu_expect_close("ce loss untouched", loss, 1e-5, 1e-5);
    cu_pair_release(bad);
    cu_pair_release(gl);
    cu_pair_release(lse);
    cu_pair_release(loss);
    cu_pair_release(tg);
    cu_pair_release(gloss);
    cu_pair_release(logits);
}

/* ------------------------------------------------------------ reductions, optim */

static void test_reduce(void **state)
{
    (void)state;
    int64_t s[3] = {5, 6, 7}, big[2] = {3, 5000}, rows[2] = {300, 64};
    cu_pair x = cu_rand(3, s, -5, 5, 70), xb = cu_rand(2, big, -5, 5, 71);
    cu_pair xr = cu_rand(2, rows, -5, 5, 72); /* many rows of 64: one warp each */
    cu_pair xt = cu_transpose(x, 0, 2);       /* strided [7, 6, 5] */
    const cu_pair *ins[4] = {&x, &xt, &xb, &xr};
    for (int k = 0; k < 4; k++) {
        int nd = dt_tensor_ndim(ins[k]->c);
        for (int dim = -1; dim < nd; dim++) {
            int d = dim < 0 ? dim + nd : dim;
            int64_t os[3];
            int on = 0;
            for (int j = 0; j < nd; j++)
                if (j != d)
                    os[on++] = dt_tensor_dim(ins[k]->c, j);
            for (int kind = DT_REDUCE_KIND_SUM; kind <= DT_REDUCE_KIND_MAX; kind++) {
                cu_pair o = cu_empty(on, os, DT_DTYPE_F32), am = cu_empty(on, os, DT_DTYPE_I64);
                bool mx = kind == DT_REDUCE_KIND_MAX;
                CU_OK(
                    cu_cpu()->reduce((dt_reduce_kind)kind, ins[k]->c, dim, o.c, mx ? am.c : NULL));
                CU_OK(
                    cu_gpu()->reduce((dt_reduce_kind)kind, ins[k]->g, dim, o.g, mx ? am.g : NULL));
                cu_expect_close("reduce", o, 1e-3, 1e-5);
                if (mx)
                    cu_expect_close("argmax", am, 0, 0);
                cu_pair_release(am);
                cu_pair_release(o);
            }
        }
    }
    double sc = 0, sg = 0;
    CU_OK(cu_cpu()->sum_squares(xt.c, &sc));
    CU_OK(cu_gpu()->sum_squares(xt.g, &sg));
    assert_true(fabs(sc - sg) <= 1e-9 * fabs(sc) + 1e-9);
    cu_pair_release(xt);
    cu_pair_release(xr);
    cu_pair_release(xb);
    cu_pair_release(x);
}

static void test_optim(void **state)
{
    (void)state;
    int64_t s[1] = {1000};
    cu_pair p = cu_rand(1, s, -1, 1, 80), g = cu_rand(1, s, -1, 1, 81);
    cu_pair buf = cu_zeros(1, s), m = cu_zeros(1, s), v = cu_zeros(1, s);
    for (int step = 1; step <= 3; step++) {
        CU_OK(cu_cpu()->sgd_step(p.c, g.c, buf.c, 0.1f, 0.9f, 0.01f));
        CU_OK(cu_gpu()->sgd_step(p.g, g.g, buf.g, 0.1f, 0.9f, 0.01f));
        CU_OK(cu_cpu()->adamw_step(p.c, g.c, m.c, v.c, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, step));
        CU_OK(cu_gpu()->adamw_step(p.g, g.g, m.g, v.g, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, step));
    }
    cu_expect_close("optim p", p, 1e-6, 1e-5);
    cu_expect_close("sgd buf", buf, 1e-6, 1e-5);
    cu_expect_close("adamw m", m, 1e-7, 1e-5);
    cu_expect_close("adamw v", v, 1e-9, 1e-5);
    assert_int_equal(cu_gpu()->adamw_step(p.g, g.g, m.g, v.g, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0),
                     DT_ERR_INVALID_ARG);
    cu_pair_release(v);
    cu_pair_release(m);
    cu_pair_release(buf);
    cu_pair_release(g);
    cu_pair_release(p);
}

int main(void)
{
    const struct CMUnitTest host_tests[] = {
        cmocka_unit_test(test_table_complete),
        cmocka_unit_test(test_iter_collapse),
        cmocka_unit_test(test_device_or_clean_error),
    };
    const struct CMUnitTest gpu_tests[] = {
        cmocka_unit_test(test_copy_fill_dtypes),
        cmocka_unit_test(test_binary_unary),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_layer_norm),
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_cross_entropy),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_optim),
    };
    have_gpu = dt__cuda_device_count() > 0;
    int failed = cmocka_run_group_tests_name("cuda_kernels_host", host_tests, NULL, NULL);
    if (failed != 0)
        return failed;
    if (!have_gpu) {
        /* the comparisons are the point of this test: without them it is skipped, not passed */
        printf("# no CUDA device: kernel comparisons not run, exit 77 (skipped)\n");
        return 77;
    }
    return cmocka_run_group_tests_name("cuda_kernels", gpu_tests, NULL, NULL);
}
