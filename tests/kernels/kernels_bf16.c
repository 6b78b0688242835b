/*
 * bf16 and f16 operands for the CPU kernels other than GEMM
 * (kernels_gemm_bf16.c): every kernel on bf16 tensors, then on f16 ones, against a float64
 * reference computed here from the same bf16 values, to bf16 precision (one rounding of the output:
 * 2^-8 relative, plus f32 accumulation); mixed bf16/f32 operands; f32 results
 * where the output is f32; the optimizer steps stay f32 only.
 */
#include <string.h>

#include "kernels_test_util.h"

#define BF16_RTOL (1.0 / 128)  /* one rounding to bf16 (2^-9), with margin */
#define F16_RTOL  (1.0 / 1024) /* one rounding to f16 (2^-12), with margin */

static dt_dtype H = DT_DTYPE_BF16; /* the half type of this round: bf16, then f16 */

/* A random tensor of @p dtype in [lo, hi) (bf16: rounded from f32). */
static dt_tensor *rand_as(int nd, const int64_t *shape, double lo, double hi, dt_dtype dtype)
{
    dt_tensor *f = ku_rand(nd, shape, lo, hi);
    if (dtype == DT_DTYPE_F32)
        return f;
    dt_tensor *h = ku_empty(nd, shape, dtype);
    assert_int_equal(ku_cpu()->copy(h, f), DT_OK);
    dt_tensor_release(f);
    return h;
}

static void close_all(const char *what, const dt_tensor *got, const double *want, double atol)
{
    dt_dtype d = dt_tensor_dtype(got);
    double rtol = d == DT_DTYPE_BF16 ? BF16_RTOL : d == DT_DTYPE_F16 ? F16_RTOL : 1e-5;
    ku_expect_close(what, got, want, atol, rtol);
}

static void test_binary_unary(void **state)
{
    (void)state;
    const dt_kernel_ops *k = ku_cpu();
    int64_t s[2] = {7, 33};
    dt_tensor *a = rand_as(2, s, -2, 2, H), *b = rand_as(2, s, -2, 2, H);
    dt_tensor *bf = rand_as(2, s, -2, 2, DT_DTYPE_F32);
    dt_tensor *o = ku_empty(2, s, H), *o32 = ku_empty(2, s, DT_DTYPE_F32);
    double *va = ku_values(a), *vb = ku_values(b), *vf = ku_values(bf);
    double want[7 * 33];
    assert_int_equal(k->binary(DT_BINARY_MUL, a, b, o), DT_OK);
    for (int i = 0; i < 7 * 33; i++)
        want[i] = va[i] * vb[i];
    close_all("bf16 * bf16 -> bf16", o, want, 0);
    assert_int_equal(k->binary(DT_BINARY_ADD, a, bf, o32), DT_OK); /* mixed, f32 out */
    for (int i = 0; i < 7 * 33; i++)
        want[i] = va[i] + vf[i];
    close_all("bf16 + f32 -> f32", o32, want, 1e-6);
    assert_int_equal(k->binary(DT_BINARY_SUB, a, b, a), DT_OK); /* in place */
    for (int i = 0; i < 7 * 33; i++)
        want[i] = va[i] - vb[i];
    close_all("bf16 - bf16 in place", a, want, 0);
    assert_int_equal(k->unary(DT_UNARY_GELU_TANH, b, 0.0f, o), DT_OK);
    for (int i = 0; i < 7 * 33; i++) {
        double x = vb[i];
        want[i] = 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    }
    close_all("gelu(bf16)", o, want, 1e-3);
    free(va), free(vb), free(vf);
    dt_tensor *objs[] = {a, b, bf, o, o32};
    for (int i = 0; i < 5; i++)
        dt_tensor_release(objs[i]);
}

static void test_softmax_layer_norm(void **state)
{
    (void)state;
    const dt_kernel_ops *k = ku_cpu();
    int64_t s[2] = {5, 40}, r[1] = {5}, c[1] = {40};
    dt_tensor *x = rand_as(2, s, -3, 3, H), *y = ku_empty(2, s, H);
    double *vx = ku_values(x), want[5 * 40];
    assert_int_equal(k->softmax(x, 1.0f, false, false, y), DT_OK);
    for (int i = 0; i < 5; i++) {
        double m = -INFINITY, z = 0;
        for (int j = 0; j < 40; j++)
            m = fmax(m, vx[i * 40 + j]);
        for (int j = 0; j < 40; j++)
            z += exp(vx[i * 40 + j] - m);
        for (int j = 0; j < 40; j++)
            want[i * 40 + j] = exp(vx[i * 40 + j] - m) / z;
    }
    close_all("softmax(bf16)", y, want, 1e-6);
    dt_tensor *w = rand_as(1, c, 0.5, 1.5, DT_DTYPE_F32), *b = rand_as(1, c, -1, 1, DT_DTYPE_F32);
    dt_tensor *mean = ku_empty(1, r, DT_DTYPE_F32), *rstd = ku_empty(1, r, DT_DTYPE_F32);
    double *vw = ku_values(w), *vb = ku_values(b);
    assert_int_equal(k->layer_norm(x, w, b, 1e-5f, y, mean, rstd), DT_OK);
    for (int i = 0; i < 5; i++) {
        double mu = 0, var = 0;
        for (int j = 0; j < 40; j++)
            mu += vx[i * 40 + j] / 40;
        for (int j = 0; j < 40; j++)
            var += (vx[i * 40 + j] - mu) * (vx[i * 40 + j] - mu) / 40;
        for (int j = 0; j < 40; j++)
            want[i * 40 + j] = (vx[i * 40 + j] - mu) / sqrt(var + 1e-5) * vw[j] + vb[j];
    }
    close_all("layer_norm(bf16)", y, want, 1e-3);
    free(vx), free(vw), free(vb);
    dt_tensor *objs[] = {x, y, w, b, mean, rstd};
    for (int i = 0; i < 6; i++)
        dt_tensor_release(objs[i]);
}

static void test_loss_reduce_lookup(void **state)
{
    (void)state;
    const dt_kernel_ops *k = ku_cpu();
    int64_t s[2] = {4, 9}, r[1] = {4};
    dt_tensor *lg = rand_as(2, s, -2, 2, H);
    int64_t tv[4] = {0, 8, 3, 3};
    dt_tensor *tg = NULL;
    assert_int_equal(dt_tensor_from_buffer(1, r, DT_DTYPE_I64, tv, &tg), DT_OK);
    dt_tensor *loss = ku_empty(1, r, DT_DTYPE_F32), *lse = ku_empty(1, r, DT_DTYPE_F32);
    double *vl = ku_values(lg), want[36];
    assert_int_equal(k->cross_entropy(lg, tg, -100, loss, lse), DT_OK);
    for (int i = 0; i < 4; i++) {
        double z = 0;
        for (int j = 0; j < 9; j++)
            z += exp(vl[i * 9 + j]);
        want[i] = log(z) - vl[i * 9 + tv[i]];
    }
    close_all("cross_entropy(bf16 logits)", loss, want, 1e-5);
    dt_tensor *sum = ku_empty(1, r, H);
    assert_int_equal(k->reduce(DT_REDUCE_KIND_SUM, lg, 1, sum, NULL), DT_OK);
    for (int i = 0; i < 4; i++) {
        want[i] = 0;
        for (int j = 0; j < 9; j++)
            want[i] += vl[i * 9 + j];
    }
    close_all("sum(bf16)", sum, want, 1e-2);
    double sq = 0, wsq = 0;
    assert_int_equal(k->sum_squares(lg, &sq), DT_OK);
    for (int i = 0; i < 36; i++)
        wsq += vl[i] * vl[i];
    assert_true(fabs(sq - wsq) <= 1e-5 * wsq);
    /* embedding rows of a bf16 table, and a masked fill */
    int64_t iv[4] = {0, 3, 2, 2}; /* rows of the [4, 9] table */
    dt_tensor *ids = NULL, *emb = ku_empty(2, s, H);
    assert_int_equal(dt_tensor_from_buffer(1, r, DT_DTYPE_I64, iv, &ids), DT_OK);
    assert_int_equal(k->embedding(lg, ids, 0, emb), DT_OK);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 9; j++)
            want[i * 9 + j] = vl[iv[i] * 9 + j];
    close_all("embedding(bf16)", emb, want, 0);
    uint8_t mv[9] = {1, 0, 0, 1, 0, 0, 0, 0, 1};
    dt_tensor *mask = NULL, *mf = ku_empty(2, s, H);
    assert_int_equal(dt_tensor_from_buffer(1, (int64_t[]){9}, DT_DTYPE_U8, mv, &mask), DT_OK);
    assert_int_equal(k->masked_fill(lg, mask, -5.0f, mf), DT_OK);
    for (int i = 0; i < 36; i++)
        want[i] = mv[i % 9] ? -5.0 : vl[i];
    close_all("masked_fill(bf16)", mf, want, 0);
    free(vl);
    dt_tensor *objs[] = {lg, tg, loss, lse, sum, ids, emb, mask, mf};
    for (int i = 0; i < 9; i++)
        dt_tensor_release(objs[i]);
}

/* Broadcast mixed operands, log-softmax and its backward, mean/max. */
static void test_broadcast_log_softmax_reduce(void **state)
{
    (void)state;
    const dt_kernel_ops *k = ku_cpu();
    int64_t s[2] = {6, 20}, row[2] = {1, 20}, c[1] = {20};
    dt_tensor *x = rand_as(2, s, -3, 3, DT_DTYPE_BF16), *d = rand_as(2, row, 1, 2, DT_DTYPE_F32);
    dt_tensor *y = ku_empty(2, s, DT_DTYPE_BF16), *gy = rand_as(2, s, -1, 1, DT_DTYPE_BF16);
    double *vx = ku_values(x), *vd = ku_values(d), *vg = ku_values(gy), want[6 * 20];
    assert_int_equal(k->binary(DT_BINARY_DIV, x, d, y), DT_OK); /* [6,20] / [1,20] */
    for (int i = 0; i < 6 * 20; i++)
        want[i] = vx[i] / vd[i % 20];
    close_all("bf16 / f32 row -> bf16", y, want, 0);
    assert_int_equal(k->softmax(x, 1.0f, false, true, y), DT_OK);
    double *vy = ku_values(y);
    for (int i = 0; i < 6; i++) {
        double z = 0;
        for (int j = 0; j < 20; j++)
            z += exp(vx[i * 20 + j]);
        for (int j = 0; j < 20; j++)
            want[i * 20 + j] = vx[i * 20 + j] - log(z);
    }
    close_all("log_softmax(bf16)", y, want, 2e-2);
    dt_tensor *gx = ku_empty(2, s, DT_DTYPE_BF16);
    assert_int_equal(k->softmax_backward(y, gy, 1.0f, true, gx), DT_OK);
    for (int i = 0; i < 6; i++) { /* gx = gy - exp(y) * sum(gy), from the bf16 y */
        double sg = 0;
        for (int j = 0; j < 20; j++)
            sg += vg[i * 20 + j];
        for (int j = 0; j < 20; j++)
            want[i * 20 + j] = vg[i * 20 + j] - exp(vy[i * 20 + j]) * sg;
    }
    close_all("log_softmax_backward(bf16)", gx, want, 2e-2);
    dt_tensor *mx = ku_empty(1, c, DT_DTYPE_BF16), *mean = ku_empty(1, c, DT_DTYPE_F32);
    assert_int_equal(k->reduce(DT_REDUCE_KIND_MAX, x, 0, mx, NULL), DT_OK);
    double wmean[20];
    for (int j = 0; j < 20; j++) {
        want[j] = -INFINITY, wmean[j] = 0;
        for (int i = 0; i < 6; i++)
            want[j] = fmax(want[j], vx[i * 20 + j]), wmean[j] += vx[i * 20 + j] / 6;
    }
    close_all("max(bf16) over dim 0", mx, want, 0);
    assert_int_equal(k->reduce(DT_REDUCE_KIND_MEAN, x, 0, mean, NULL), DT_OK);
    close_all("mean(bf16) -> f32", mean, wmean, 1e-6);
    free(vx), free(vd), free(vg), free(vy);
    dt_tensor *objs[] = {x, d, y, gy, gx, mx, mean};
    for (int i = 0; i < 7; i++)
        dt_tensor_release(objs[i]);
}

/* Backward of cross entropy and embedding into bf16 gradients. */
static void test_loss_lookup_backward(void **state)
{
    (void)state;
    const dt_kernel_ops *k = ku_cpu();
    int64_t s[2] = {4, 9}, r[1] = {4};
    int64_t tv[4] = {0, 8, -100, 3}, iv[4] = {1, 3, 1, 1};
    dt_tensor *lg = rand_as(2, s, -2, 2, DT_DTYPE_BF16), *tg = NULL, *ids = NULL;
    assert_int_equal(dt_tensor_from_buffer(1, r, DT_DTYPE_I64, tv, &tg), DT_OK);
    assert_int_equal(dt_tensor_from_buffer(1, r, DT_DTYPE_I64, iv, &ids), DT_OK);
    dt_tensor *loss = ku_empty(1, r, DT_DTYPE_F32), *lse = ku_empty(1, r, DT_DTYPE_F32);
    dt_tensor *gl = rand_as(1, r, 0.5, 1.5, DT_DTYPE_F32), *g = ku_empty(2, s, DT_DTYPE_BF16);
    double *vl = ku_values(lg), *vgl = ku_values(gl), want[36];
    assert_int_equal(k->cross_entropy(lg, tg, -100, loss, lse), DT_OK);
    assert_int_equal(k->cross_entropy_backward(lg, tg, -100, lse, gl, g), DT_OK);
    for (int i = 0; i < 4; i++) {
        double z = 0;
        for (int j = 0; j < 9; j++)
            z += exp(vl[i * 9 + j]);
        for (int j = 0; j < 9; j++) {
            double p = exp(vl[i * 9 + j]) / z - (j == tv[i]);
            want[i * 9 + j] = tv[i] == -100 ? 0 : vgl[i] * p;
        }
    }
    close_all("cross_entropy_backward -> bf16", g, want, 1e-5);
    /* rows 1 and 3 of a zeroed bf16 table gather gy rows (row 1 three times) */
    assert_int_equal(k->fill(g, 0.0), DT_OK);
    assert_int_equal(k->embedding_backward(ids, lg, 0, g), DT_OK);
    memset(want, 0, sizeof want);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 9; j++)
            want[iv[i] * 9 + j] += vl[i * 9 + j];
    close_all("embedding_backward -> bf16", g, want, 2e-2);
    free(vl), free(vgl);
    dt_tensor *objs[] = {lg, tg, ids, loss, lse, gl, g};
    for (int i = 0; i < 7; i++)
        dt_tensor_release(objs[i]);
}

/* LayerNorm backward with bf16 x, w, gy, gx (f32 gw, gb), and ReLU backward. */
static void test_norm_unary_backward(void **state)
{
    (void)state;
    const dt_kernel_ops *k = ku_cpu();
    int64_t s[2] = {3, 16}, r[1] = {3}, c[1] = {16};
    dt_tensor *x = rand_as(2, s, -2, 2, DT_DTYPE_BF16),
              *wt = rand_as(1, c, 0.5, 1.5, DT_DTYPE_BF16);
    dt_tensor *gy = rand_as(2, s, -1, 1, DT_DTYPE_BF16), *y = ku_empty(2, s, DT_DTYPE_BF16);
    dt_tensor *gx = ku_empty(2, s, DT_DTYPE_BF16), *mean = ku_empty(1, r, DT_DTYPE_F32);
    dt_tensor *rstd = ku_empty(1, r, DT_DTYPE_F32), *gw = ku_empty(1, c, DT_DTYPE_F32);
    dt_tensor *gb = ku_empty(1, c, DT_DTYPE_F32);
    assert_int_equal(k->fill(gw, 0.0), DT_OK);
    assert_int_equal(k->fill(gb, 0.0), DT_OK);
    assert_int_equal(k->layer_norm(x, wt, NULL, 1e-5f, y, mean, rstd), DT_OK);
    assert_int_equal(k->layer_norm_backward(x, wt, mean, rstd, gy, gx, gw, gb), DT_OK);
    double *vx = ku_values(x), *vw = ku_values(wt), *vg = ku_values(gy);
    double *vm = ku_values(mean), *vr = ku_values(rstd), want[48], wgw[16] = {0}, wgb[16] = {0};
    for (int i = 0; i < 3; i++) {
        double mg = 0, mgx = 0, xh[16];
        for (int j = 0; j < 16; j++) {
            xh[j] = (vx[i * 16 + j] - vm[i]) * vr[i];
            mg += vg[i * 16 + j] * vw[j] / 16, mgx += vg[i * 16 + j] * vw[j] * xh[j] / 16;
            wgw[j] += vg[i * 16 + j] * xh[j], wgb[j] += vg[i * 16 + j];
        }
        for (int j = 0; j < 16; j++)
            want[i * 16 + j] = vr[i] * (vg[i * 16 + j] * vw[j] - mg - xh[j] * mgx);
    }
    close_all("layer_norm_backward gx (bf16)", gx, want, 2e-2);
    close_all("layer_norm_backward gw (f32)", gw, wgw, 1e-4);
    close_all("layer_norm_backward gb (f32)", gb, wgb, 1e-5);
    assert_int_equal(k->unary_backward(DT_UNARY_RELU, x, gy, gx), DT_OK);
    for (int i = 0; i < 48; i++)
        want[i] = vx[i] > 0 ? vg[i] : 0;
    close_all("relu_backward (bf16)", gx, want, 0);
    free(vx), free(vw), free(vg), free(vm), free(vr);
    dt_tensor *objs[] = {x, wt, gy, y, gx, mean, rstd, gw, gb};
    for (int i = 0; i < 9; i++)
        dt_tensor_release(objs[i]);
}

/* Strided bf16 views: a transposed input, and a transposed output written in place. */
static void test_strided_views(void **state)
{
    (void)state;
    const dt_kernel_ops *k = ku_cpu();
    int64_t s[2] = {5, 8}, st[2] = {8, 5};
    dt_tensor *a = rand_as(2, s, -2, 2, DT_DTYPE_BF16), *b = rand_as(2, st, -2, 2, DT_DTYPE_F32);
    dt_tensor *at = NULL, *o = ku_empty(2, st, DT_DTYPE_BF16), *ot = NULL;
    assert_int_equal(dt_tensor_transpose(a, 0, 1, &at), DT_OK); /* [8, 5] view of a */
    double *va = ku_values(a), *vb = ku_values(b), want[40];
    assert_int_equal(k->binary(DT_BINARY_MUL, at, b, o), DT_OK);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 5; j++)
            want[i * 5 + j] = va[j * 8 + i] * vb[i * 5 + j];
    close_all("transposed bf16 * f32 -> bf16", o, want, 0);
    assert_int_equal(dt_tensor_transpose(o, 0, 1, &ot), DT_OK); /* [5, 8] view of o */
    assert_int_equal(k->binary(DT_BINARY_ADD, a, a, ot), DT_OK);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 5; j++)
            want[i * 5 + j] = 2 * va[j * 8 + i];
    close_all("bf16 + bf16 -> transposed bf16 view", o, want, 0);
    free(va), free(vb);
    dt_tensor *objs[] = {a, b, at, o, ot};
    for (int i = 0; i < 5; i++)
        dt_tensor_release(objs[i]);
}

/* What the table takes: bf16 everywhere but the optimizer steps. */
static void test_supports(void **state)
{
    (void)state;
    const dt_kernel_ops *k = ku_cpu();
    for (int op = 0; op < DT_KOP_COUNT; op++)
        for (int h = 0; h < 2; h++)
            assert_int_equal(k->supports((dt_kernel_op)op, h ? DT_DTYPE_F16 : DT_DTYPE_BF16),
                             op != DT_KOP_OPTIM);
    assert_false(k->supports(DT_KOP_BINARY, DT_DTYPE_F64));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binary_unary),
        cmocka_unit_test(test_softmax_layer_norm),
        cmocka_unit_test(test_loss_reduce_lookup),
        cmocka_unit_test(test_broadcast_log_softmax_reduce),
        cmocka_unit_test(test_loss_lookup_backward),
        cmocka_unit_test(test_norm_unary_backward),
        cmocka_unit_test(test_strided_views),
        cmocka_unit_test(test_supports),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    H = DT_DTYPE_F16; /* the same kernels on f16 */
    return failed + cmocka_run_group_tests(tests, NULL, NULL);
}
