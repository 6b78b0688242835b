/*
 * A device's kernel table against the CPU table (the reference), entry by
 * entry, on random inputs with strided and broadcast operands: the same
 * inputs are copied to the device, both tables run, the device's outputs come
 * back to the host and are compared. `kernels_device sim` must match bit for
 * bit (its kernels are the CPU ones behind the device boundary, so any
 * difference is a device-genericity bug); `kernels_device cuda` within float
 * tolerances. Exits 77 (skipped) when the device is not usable here.
 */
#include <string.h>

#include "kernels_test_util.h"

static dt_device dev;
static const dt_kernel_ops *kd; /* the device's table */
static double tol;              /* 0: bitwise */

#define K_OK(call) assert_int_equal((call), DT_OK)

/* A device copy of host tensor @p t (same layout: contiguous). */
static dt_tensor *on_dev(const dt_tensor *t)
{
    dt_tensor *d = NULL;
    K_OK(dt_tensor_to_device((dt_tensor *)t, dev, &d));
    return d;
}

static dt_tensor *host_empty(int ndim, const int64_t *shape, dt_dtype dtype)
{
    return ku_empty(ndim, shape, dtype);
}

static dt_tensor *dev_empty(const dt_tensor *like)
{
    dt_tensor *d = NULL;
    K_OK(dt_tensor_empty(dt_tensor_ndim(like), dt_tensor_shape(like), dt_tensor_dtype(like), dev,
                         &d));
    return d;
}

/* The device result @p d equals the CPU result @p c (bitwise when tol == 0). */
static void expect_same(const char *what, const dt_tensor *c, const dt_tensor *d)
{
    K_OK(dt_device_synchronize(dev));
    dt_tensor *h = NULL;
    K_OK(dt_tensor_to_device((dt_tensor *)d, dt_device_cpu(), &h));
    assert_int_equal(dt_tensor_numel(h), dt_tensor_numel(c));
    if (tol == 0) {
        if (!dt_tensor_equal(c, h)) {
            for (int64_t i = 0; i < dt_tensor_numel(c); i++)
                if (memcmp(&(float){(float)dt_tensor_item_at(c, i)},
                           &(float){(float)dt_tensor_item_at(h, i)}, 4) != 0)
                    fail_msg("%s: element %lld is %.9g on %s, %.9g on the CPU", what, (long long)i,
                             dt_tensor_item_at(h, i), kd->name, dt_tensor_item_at(c, i));
            fail_msg("%s: differs from the CPU", what);
        }
    } else {
        double *want = ku_values(c);
        ku_expect_close(what, h, want, tol, tol);
        free(want);
    }
    dt_tensor_release(h);
}

static void release_all(dt_tensor **ts, int n)
{
    for (int i = 0; i < n; i++)
        dt_tensor_release(ts[i]);
}

static void test_fill_copy(void **state)
{
    (void)state;
    int64_t s[2] = {7, 9}, st[2] = {9, 7};
    dt_tensor *x = ku_rand(2, s, -2, 2), *xt = NULL, *c = host_empty(2, st, DT_DTYPE_BF16);
    K_OK(dt_tensor_transpose(x, 0, 1, &xt));
    K_OK(ku_cpu()->copy(c, xt)); /* strided source, f32 -> bf16 */
    dt_tensor *dx = on_dev(x), *dxt = NULL, *d = NULL;
    K_OK(dt_tensor_transpose(dx, 0, 1, &dxt));
    K_OK(dt_tensor_empty(2, st, DT_DTYPE_BF16, dev, &d));
    K_OK(kd->copy(d, dxt));
    expect_same("copy (strided, f32 -> bf16)", c, d);
    K_OK(ku_cpu()->fill(x, -3.25));
    K_OK(kd->fill(dx, -3.25));
    expect_same("fill", x, dx);
    dt_tensor *ts[] = {x, xt, c, dx, dxt, d};
    release_all(ts, 6);
}

static void test_gemm(void **state)
{
    (void)state;
    int64_t as[3] = {3, 17, 33}, bs[2] = {21, 33}, cs[3] = {3, 17, 21};
    dt_tensor *a = ku_rand(3, as, -1, 1), *b = ku_rand(2, bs, -1, 1), *c = ku_rand(3, cs, -1, 1);
    dt_tensor *da = on_dev(a), *db = on_dev(b), *dc = on_dev(c);
    K_OK(ku_cpu()->gemm(a, b, false, true, 0.5f, 1.0f, c)); /* batch-broadcast b, transposed */
    K_OK(kd->gemm(da, db, false, true, 0.5f, 1.0f, dc));
    expect_same("gemm", c, dc);
    if (kd->gemm_bias != NULL) { /* optional: the bias in the GEMM's epilogue */
        int64_t n = cs[2];
        dt_tensor *bias = ku_rand(1, &n, -1, 1), *dbias = on_dev(bias);
        K_OK(ku_cpu()->gemm_bias(a, b, false, true, bias, c));
        K_OK(kd->gemm_bias(da, db, false, true, dbias, dc));
        expect_same("gemm_bias", c, dc);
        dt_tensor_release(bias);
        dt_tensor_release(dbias);
    }
    dt_tensor *ts[] = {a, b, c, da, db, dc};
    release_all(ts, 6);
}

/* bf16 operands, f32 accumulation, into f32 and into bf16 (autocast's GEMM). */
static void test_gemm_bf16(void **state)
{
    (void)state;
    int64_t as[3] = {2, 9, 40}, bs[2] = {13, 40}, cs[3] = {2, 9, 13};
    assert_true(kd->supports == NULL || kd->supports(DT_KOP_GEMM, DT_DTYPE_BF16));
    dt_tensor *a32 = ku_rand(3, as, -1, 1), *b32 = ku_rand(2, bs, -1, 1);
    dt_tensor *a = host_empty(3, as, DT_DTYPE_BF16), *b = host_empty(2, bs, DT_DTYPE_BF16);
    K_OK(ku_cpu()->copy(a, a32));
    K_OK(ku_cpu()->copy(b, b32));
    dt_tensor *da = on_dev(a), *db = on_dev(b);
    for (int out = 0; out < 2; out++) {
        dt_dtype cdt = out == 0 ? DT_DTYPE_F32 : DT_DTYPE_BF16;
        dt_tensor *c = host_empty(3, cs, cdt), *dc = NULL;
        K_OK(dt_tensor_empty(3, cs, cdt, dev, &dc));
        K_OK(ku_cpu()->gemm(a, b, false, true, 1.0f, 0.0f, c));
        K_OK(kd->gemm(da, db, false, true, 1.0f, 0.0f, dc));
        double t0 = tol; /* another summation order may round to the next bf16 */
        tol = tol != 0 && cdt == DT_DTYPE_BF16 ? 8e-3 : tol;
        expect_same(out == 0 ? "gemm bf16 -> f32" : "gemm bf16 -> bf16", c, dc);
        tol = t0;
        dt_tensor_release(c);
        dt_tensor_release(dc);
    }
    dt_tensor *ts[] = {a32, b32, a, b, da, db};
    release_all(ts, 6);
}

static void test_binary_unary(void **state)
{
    (void)state;
    int64_t s[2] = {6, 10}, r[2] = {1, 10};
    dt_tensor *a = ku_rand(2, s, -2, 2), *b = ku_rand(2, r, 0.5, 2),
              *o = host_empty(2, s, DT_DTYPE_F32);
    dt_tensor *da = on_dev(a), *db = on_dev(b), *dout = dev_empty(o);
    for (int op = DT_BINARY_ADD; op <= DT_BINARY_DIV; op++) {
        K_OK(ku_cpu()->binary((dt_binary_op)op, a, b, o));
        K_OK(kd->binary((dt_binary_op)op, da, db, dout));
        expect_same("binary (broadcast row)", o, dout);
    }
    for (int op = DT_UNARY_SCALE; op <= DT_UNARY_ROUND_BF16; op++) {
        const dt_tensor *x = (op == DT_UNARY_LOG || op == DT_UNARY_SQRT) ? b : a;
        const dt_tensor *dx = (op == DT_UNARY_LOG || op == DT_UNARY_SQRT) ? db : da;
        dt_tensor *o1 = host_empty(dt_tensor_ndim(x), dt_tensor_shape(x), 0), *d1 = dev_empty(o1);
        K_OK(ku_cpu()->unary((dt_unary_op)op, x, 0.75f, o1));
        K_OK(kd->unary((dt_unary_op)op, dx, 0.75f, d1));
        expect_same("unary", o1, d1);
        if (op == DT_UNARY_GELU_TANH || op == DT_UNARY_RELU) {
            K_OK(ku_cpu()->unary_backward((dt_unary_op)op, a, o, o1));
            K_OK(kd->unary_backward((dt_unary_op)op, da, dout, d1));
            expect_same("unary_backward", o1, d1);
        }
        dt_tensor_release(o1);
        dt_tensor_release(d1);
    }
    dt_tensor *ts[] = {a, b, o, da, db, dout};
    release_all(ts, 6);
}

static void test_softmax_layer_norm(void **state)
{
    (void)state;
    int64_t s[3] = {2, 5, 7}, w[1] = {7}, rows[1] = {10};
    dt_tensor *x = ku_rand(3, s, -3, 3), *gy = ku_rand(3, s, -1, 1),
              *y = host_empty(3, s, DT_DTYPE_F32);
    dt_tensor *gx = host_empty(3, s, DT_DTYPE_F32), *dx = on_dev(x), *dgy = on_dev(gy),
              *dy = dev_empty(y);
    dt_tensor *dgx = dev_empty(gx);
    for (int log = 0; log <= 1; log++) {
        K_OK(ku_cpu()->softmax(x, 0.5f, true, log, y));
        K_OK(kd->softmax(dx, 0.5f, true, log, dy));
        expect_same("softmax (causal)", y, dy);
        K_OK(ku_cpu()->softmax_backward(y, gy, 0.5f, log, gx));
        K_OK(kd->softmax_backward(dy, dgy, 0.5f, log, dgx));
        expect_same("softmax_backward", gx, dgx);
    }
    dt_tensor *wt = ku_rand(1, w, 0.5, 1.5), *bt = ku_rand(1, w, -1, 1);
    dt_tensor *mean = host_empty(1, rows, DT_DTYPE_F32), *rstd = host_empty(1, rows, DT_DTYPE_F32);
    dt_tensor *gw = ku_rand(1, w, -1, 1), *gb = ku_rand(1, w, -1, 1);
    dt_tensor *dwt = on_dev(wt), *dbt = on_dev(bt), *dmean = dev_empty(mean);
    dt_tensor *drstd = dev_empty(rstd), *dgw = on_dev(gw), *dgb = on_dev(gb);
    K_OK(ku_cpu()->layer_norm(x, wt, bt, 1e-5f, y, mean, rstd));
    K_OK(kd->layer_norm(dx, dwt, dbt, 1e-5f, dy, dmean, drstd));
    expect_same("layer_norm", y, dy);
    expect_same("layer_norm rstd", rstd, drstd);
    K_OK(ku_cpu()->layer_norm_backward(x, wt, mean, rstd, gy, gx, gw, gb));
    K_OK(kd->layer_norm_backward(dx, dwt, dmean, drstd, dgy, dgx, dgw, dgb));
    expect_same("layer_norm_backward gx", gx, dgx);
    expect_same("layer_norm_backward gw (accumulated)", gw, dgw);
    expect_same("layer_norm_backward gb (accumulated)", gb, dgb);
    dt_tensor *ts[] = {x,    gy,   y,  gx, dx,  dgy, dy,    dgx,   wt,  bt,
                       mean, rstd, gw, gb, dwt, dbt, dmean, drstd, dgw, dgb};
    release_all(ts, 20);
}

/* @p f (released) as a bf16 host tensor. */
static dt_tensor *as_bf16(dt_tensor *f)
{
    dt_tensor *h = host_empty(dt_tensor_ndim(f), dt_tensor_shape(f), DT_DTYPE_BF16);
    K_OK(ku_cpu()->copy(h, f));
    dt_tensor_release(f);
    return h;
}

/* bf16 operands, which the CPU table reads natively in blocks of 512 and rows
 * (half_stage.c): odd sizes, a broadcast row, bf16 outputs. */
static void test_bf16_operands(void **state)
{
    (void)state;
    if (kd->supports != NULL && !kd->supports(DT_KOP_BINARY, DT_DTYPE_BF16))
        skip(); /* CUDA: f32 only but for GEMM */
    int64_t s[2] = {5, 1003}, r[2] = {1, 1003}, w[1] = {1003}, rows[1] = {5};
    dt_tensor *a = as_bf16(ku_rand(2, s, -2, 2)), *b = as_bf16(ku_rand(2, r, 0.5, 2));
    dt_tensor *wt = as_bf16(ku_rand(1, w, 0.5, 1.5)), *o = host_empty(2, s, DT_DTYPE_BF16);
    dt_tensor *mean = host_empty(1, rows, DT_DTYPE_F32), *rstd = host_empty(1, rows, DT_DTYPE_F32);
    dt_tensor *da = on_dev(a), *db = on_dev(b), *dwt = on_dev(wt), *dout = dev_empty(o);
    dt_tensor *dmean = dev_empty(mean), *drstd = dev_empty(rstd);
    K_OK(ku_cpu()->binary(DT_BINARY_MUL, a, b, o));
    K_OK(kd->binary(DT_BINARY_MUL, da, db, dout));
    expect_same("bf16 binary (broadcast row)", o, dout);
    K_OK(ku_cpu()->unary(DT_UNARY_GELU_TANH, a, 0.0f, o));
    K_OK(kd->unary(DT_UNARY_GELU_TANH, da, 0.0f, dout));
    expect_same("bf16 gelu", o, dout);
    K_OK(ku_cpu()->softmax(a, 0.5f, true, false, o));
    K_OK(kd->softmax(da, 0.5f, true, false, dout));
    expect_same("bf16 softmax (causal)", o, dout);
    K_OK(ku_cpu()->layer_norm(a, wt, NULL, 1e-5f, o, mean, rstd));
    K_OK(kd->layer_norm(da, dwt, NULL, 1e-5f, dout, dmean, drstd));
    expect_same("bf16 layer_norm", o, dout);
    expect_same("bf16 layer_norm rstd", rstd, drstd);
    dt_tensor *ts[] = {a, b, wt, o, mean, rstd, da, db, dwt, dout, dmean, drstd};
    release_all(ts, 12);
}

static dt_tensor *ids_tensor(int64_t n, const int64_t *v)
{
    dt_tensor *t = NULL;
    K_OK(dt_tensor_from_buffer(1, &n, DT_DTYPE_I64, v, &t));
    return t;
}

static void test_embedding_cross_entropy(void **state)
{
    (void)state;
    int64_t ws[2] = {6, 5}, os[2] = {4, 5}, idv[4] = {7, 3, 9, 4}; /* a shard: rows 3..8 */
    dt_tensor *w = ku_rand(2, ws, -1, 1), *ids = ids_tensor(4, idv),
              *o = host_empty(2, os, DT_DTYPE_F32);
    dt_tensor *dw = on_dev(w), *dids = on_dev(ids), *dout = dev_empty(o);
    K_OK(ku_cpu()->embedding(w, ids, 3, o));
    K_OK(kd->embedding(dw, dids, 3, dout));
    expect_same("embedding (vocabulary shard)", o, dout);
    K_OK(ku_cpu()->embedding_backward(ids, o, 3, w));
    K_OK(kd->embedding_backward(dids, dout, 3, dw));
    expect_same("embedding_backward", w, dw);

    int64_t ls[2] = {4, 6}, n[1] = {4}, tv[4] = {5, 0, -100, 2};
    dt_tensor *lg = ku_rand(2, ls, -4, 4), *tg = ids_tensor(4, tv),
              *loss = host_empty(1, n, DT_DTYPE_F32);
    dt_tensor *lse = host_empty(1, n, DT_DTYPE_F32), *gl = ku_rand(1, n, 0, 1),
              *glg = host_empty(2, ls, DT_DTYPE_F32);
    dt_tensor *dlg = on_dev(lg), *dtg = on_dev(tg), *dloss = dev_empty(loss),
              *dlse = dev_empty(lse);
    dt_tensor *dgl = on_dev(gl), *dglg = dev_empty(glg);
    K_OK(ku_cpu()->cross_entropy(lg, tg, -100, loss, lse));
    K_OK(kd->cross_entropy(dlg, dtg, -100, dloss, dlse));
    expect_same("cross_entropy", loss, dloss);
    K_OK(ku_cpu()->cross_entropy_backward(lg, tg, -100, lse, gl, glg));
    K_OK(kd->cross_entropy_backward(dlg, dtg, -100, dlse, dgl, dglg));
    expect_same("cross_entropy_backward", glg, dglg);
    dt_tensor *ts[] = {w,   ids, o,   dw,  dids, dout,  lg,   tg,  loss,
                       lse, gl,  glg, dlg, dtg,  dloss, dlse, dgl, dglg};
    release_all(ts, 18);
}

static void test_reduce_masked_fill(void **state)
{
    (void)state;
    int64_t s[3] = {3, 4, 5}, rs[2] = {3, 5}, ms[2] = {4, 5};
    dt_tensor *x = ku_rand(3, s, -2, 2), *o = host_empty(2, rs, DT_DTYPE_F32),
              *am = host_empty(2, rs, DT_DTYPE_I64);
    dt_tensor *dx = on_dev(x), *dout = dev_empty(o), *dam = dev_empty(am);
    for (int kind = DT_REDUCE_KIND_SUM; kind <= DT_REDUCE_KIND_MAX; kind++) {
        bool arg = kind == DT_REDUCE_KIND_MAX;
        K_OK(ku_cpu()->reduce((dt_reduce_kind)kind, x, 1, o, arg ? am : NULL));
        K_OK(kd->reduce((dt_reduce_kind)kind, dx, 1, dout, arg ? dam : NULL));
        expect_same("reduce over dim 1", o, dout);
        if (arg)
            expect_same("reduce argmax", am, dam);
    }
    assert_int_equal(kd->reduce(DT_REDUCE_KIND_SUM, dx, 3, dout, NULL), DT_ERR_INVALID_ARG);
    dt_tensor *m = ku_rand(2, ms, 0, 1), *mask = host_empty(2, ms, DT_DTYPE_U8);
    K_OK(ku_cpu()->copy(mask, m)); /* 0 or 1 after truncation... */
    K_OK(ku_cpu()->binary(DT_BINARY_ADD, m, m, m));
    K_OK(ku_cpu()->copy(mask, m)); /* ...values in {0, 1} */
    dt_tensor *y = host_empty(3, s, DT_DTYPE_F32), *dmask = on_dev(mask), *dy = dev_empty(y);
    K_OK(ku_cpu()->masked_fill(x, mask, -1e9f, y));
    K_OK(kd->masked_fill(dx, dmask, -1e9f, dy));
    expect_same("masked_fill (broadcast mask)", y, dy);
    dt_tensor *ts[] = {x, o, am, dx, dout, dam, m, mask, y, dmask, dy};
    release_all(ts, 11);
}

static void test_optimizers(void **state)
{
    (void)state;
    int64_t s[1] = {37};
    dt_tensor *p = ku_rand(1, s, -1, 1), *g = ku_rand(1, s, -1, 1), *m = ku_rand(1, s, -0.1, 0.1);
    dt_tensor *v = ku_rand(1, s, 0, 0.1), *dp = on_dev(p), *dg = on_dev(g), *dm = on_dev(m);
    dt_tensor *dv = on_dev(v);
    for (int64_t step = 1; step <= 3; step++) {
        K_OK(ku_cpu()->adamw_step(p, g, m, v, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step));
        K_OK(kd->adamw_step(dp, dg, dm, dv, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step));
    }
    expect_same("adamw_step p", p, dp);
    expect_same("adamw_step v", v, dv);
    K_OK(ku_cpu()->sgd_step(p, g, m, 0.1f, 0.9f, 0.01f));
    K_OK(kd->sgd_step(dp, dg, dm, 0.1f, 0.9f, 0.01f));
    expect_same("sgd_step p", p, dp);
    double cs = 0, ds = 0;
    K_OK(ku_cpu()->sum_squares(p, &cs));
    K_OK(kd->sum_squares(dp, &ds));
    if (tol == 0)
        assert_memory_equal(&cs, &ds, sizeof(double));
    else
        assert_true(fabs(cs - ds) <= tol * (1 + fabs(cs)));
    dt_tensor *ts[] = {p, g, m, v, dp, dg, dm, dv};
    release_all(ts, 8);
}

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "sim";
    if (dt_device_parse(name, &dev) != DT_OK) {
        fprintf(stderr, "%s\n", dt_last_error());
        return 2;
    }
    kd = dt__kernels_for(dev);
    dt_tensor *probe = NULL;
    int64_t one = 1;
    if (kd == NULL || dt_tensor_empty(1, &one, DT_DTYPE_F32, dev, &probe) != DT_OK) {
        printf("# device %s is not usable here (%s): skipped\n", name, dt_last_error());
        return 77;
    }
    dt_tensor_release(probe);
    tol = dev.type == DT_DEVICE_SIM ? 0 : 2e-5;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fill_copy),          cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_gemm_bf16),          cmocka_unit_test(test_binary_unary),
        cmocka_unit_test(test_softmax_layer_norm), cmocka_unit_test(test_embedding_cross_entropy),
        cmocka_unit_test(test_reduce_masked_fill), cmocka_unit_test(test_optimizers),
        cmocka_unit_test(test_bf16_operands),
    };
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
