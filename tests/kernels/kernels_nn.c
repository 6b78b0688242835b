/*
 * Row kernels vs float64 references: softmax / log-softmax (scale, causal
 * masks with Tq != Tk, backward), LayerNorm forward/backward, embedding on a
 * vocabulary shard, cross entropy with ignore_index, reductions, optimizers.
 */
#include <string.h>

#include "kernels_test_util.h"

static dt_tensor *ku_ids(int64_t n, const int64_t *v)
{
    dt_tensor *t = NULL;
    assert_int_equal(dt_tensor_from_buffer(1, &n, DT_DTYPE_I64, v, &t), DT_OK);
    return t;
}

/* softmax(scale x) of one row of n whose first `valid` entries are unmasked. */
static void softmax_ref(const double *x, int64_t n, int64_t valid, double scale, bool logsm,
                        double *y)
{
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < valid; j++)
        m = fmax(m, scale * x[j]);
    for (int64_t j = 0; j < valid; j++)
        s += exp(scale * x[j] - m);
    for (int64_t j = 0; j < n; j++) {
        if (valid == 0)
            y[j] = NAN;
        else if (j >= valid)
            y[j] = logsm ? -INFINITY : 0.0;
        else
            y[j] = logsm ? scale * x[j] - m - log(s) : exp(scale * x[j] - m) / s;
    }
}

static void check_softmax(int64_t B, int64_t tq, int64_t tk, bool causal, bool logsm, float scale)
{
    int64_t s[3] = {B, tq, tk};
    dt_tensor *x = ku_rand(3, s, -4, 4), *y = ku_empty(3, s, DT_DTYPE_F32);
    dt_tensor *gy = ku_rand(3, s, -1, 1), *gx = ku_empty(3, s, DT_DTYPE_F32);
    int64_t n = B * tq * tk;
    double *vx = ku_values(x), *vg = ku_values(gy);
    double *want = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    double *gwant = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    for (int64_t r = 0; r < B * tq; r++) {
        int64_t i = r % tq, valid = tk;
        if (causal) {
            valid = i + (tk - tq) + 1;
            valid = valid < 0 ? 0 : (valid > tk ? tk : valid);
        }
        double *yr = want + r * tk, *gr = gwant + r * tk, *gyr = vg + r * tk;
        softmax_ref(vx + r * tk, tk, valid, scale, logsm, yr);
        /* analytic gradient wrt x of the masked (scaled) softmax */
        double dot = 0, sg = 0;
        for (int64_t j = 0; j < valid; j++) {
            dot += gyr[j] * yr[j];
            sg += gyr[j];
        }
        for (int64_t j = 0; j < tk; j++) {
            if (j >= valid)
                gr[j] = 0;
            else
                gr[j] = logsm ? scale * (gyr[j] - exp(yr[j]) * sg) : scale * yr[j] * (gyr[j] - dot);
        }
    }
    assert_int_equal(ku_cpu()->softmax(x, scale, causal, logsm, y), DT_OK);
    ku_expect_close("softmax", y, want, 2e-6, 2e-5);
    bool any_empty_row = causal && tq > tk;
    if (!any_empty_row) {
        assert_int_equal(ku_cpu()->softmax_backward(y, gy, scale, logsm, gx), DT_OK);
        ku_expect_close("softmax backward", gx, gwant, 2e-6, 2e-4);
    }
    free(vx);
    free(vg);
    free(want);
    free(gwant);
    dt_tensor *objs[] = {x, y, gy, gx};
    for (size_t i = 0; i < 4; i++)
        dt_tensor_release(objs[i]);
}

static void test_softmax(void **state)
{
    (void)state;
    for (int lg = 0; lg < 2; lg++) {
        check_softmax(3, 5, 37, false, lg, 1.0f);
        check_softmax(2, 7, 7, true, lg, 0.35f);
        check_softmax(2, 4, 9, true, lg, 1.0f); /* Tq < Tk: a KV cache */
        check_softmax(1, 6, 3, true, lg, 1.0f); /* Tq > Tk: leading rows fully masked */
        check_softmax(2, 3, 100, false, lg, -0.5f);
        check_softmax(0, 3, 4, true, lg, 1.0f); /* empty */
    }
}

static void test_softmax_strided_input(void **state)
{
    (void)state;
    int64_t s[2] = {17, 6};
    dt_tensor *x = ku_rand(2, s, -3, 3), *xt = NULL;
    assert_int_equal(dt_tensor_transpose(x, 0, 1, &xt), DT_OK); /* [6, 17], strided */
    int64_t ts[2] = {6, 17};
    dt_tensor *y = ku_empty(2, ts, DT_DTYPE_F32);
    double *v = ku_values(xt), want[6 * 17];
    for (int r = 0; r < 6; r++)
        softmax_ref(v + r * 17, 17, 17, 1.0, false, want + r * 17);
    assert_int_equal(ku_cpu()->softmax(xt, 1.0f, false, false, y), DT_OK);
    ku_expect_close("softmax strided", y, want, 1e-6, 1e-5);
    free(v);
    dt_tensor_release(y);
    dt_tensor_release(xt);
    dt_tensor_release(x);
}

static void check_layer_norm(int64_t rows, int64_t n, bool affine)
{
    int64_t s[2] = {rows, n}, ps[1] = {n}, rs[1] = {rows};
    dt_tensor *x = ku_rand(2, s, -3, 5), *gy = ku_rand(2, s, -1, 1);
    dt_tensor *w = affine ? ku_rand(1, ps, 0.5, 1.5) : NULL,
              *b = affine ? ku_rand(1, ps, -1, 1) : NULL;
    dt_tensor *y = ku_empty(2, s, DT_DTYPE_F32), *gx = ku_empty(2, s, DT_DTYPE_F32);
    dt_tensor *mean = ku_empty(1, rs, DT_DTYPE_F32), *rstd = ku_empty(1, rs, DT_DTYPE_F32);
    dt_tensor *gw = affine ? ku_rand(1, ps, -1, 1) : NULL,
              *gb = affine ? ku_rand(1, ps, -1, 1) : NULL;
    double *vx = ku_values(x), *vg = ku_values(gy);
    double *vw = affine ? ku_values(w) : NULL, *vb = affine ? ku_values(b) : NULL;
    double *gw0 = affine ? ku_values(gw) : NULL, *gb0 = affine ? ku_values(gb) : NULL;
    double *wy = calloc((size_t)(rows * n + 1), sizeof(double));
    double *wgx = calloc((size_t)(rows * n + 1), sizeof(double));
    double *wm = calloc((size_t)rows + 1, sizeof(double)),
           *wr = calloc((size_t)rows + 1, sizeof(double));
    const double eps = 1e-5;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = vx + r * n, *gr = vg + r * n;
        double m = 0, v = 0, sg = 0, sgx = 0;
        for (int64_t j = 0; j < n; j++)
            m += xr[j] / n;
        for (int64_t j = 0; j < n; j++)
            v += (xr[j] - m) * (xr[j] - m) / n; /* biased, as PyTorch */
        double rstd_ = 1.0 / sqrt(v + eps);
        wm[r] = m;
        wr[r] = rstd_;
        for (int64_t j = 0; j < n; j++) {
            double xh = (xr[j] - m) * rstd_, g = gr[j] * (affine ? vw[j] : 1);
            wy[r * n + j] = xh * (affine ? vw[j] : 1) + (affine ? vb[j] : 0);
            sg += g;
            sgx += g * xh;
            if (affine) {
                gw0[j] += gr[j] * xh;
                gb0[j] += gr[j];
            }
        }
        for (int64_t j = 0; j < n; j++) {
            double xh = (xr[j] - m) * rstd_, g = gr[j] * (affine ? vw[j] : 1);
            wgx[r * n + j] = rstd_ * (g - sg / n - xh * sgx / n);
        }
    }
    assert_int_equal(ku_cpu()->layer_norm(x, w, b, (float)eps, y, mean, rstd), DT_OK);
    ku_expect_close("layer_norm y", y, wy, 1e-5, 1e-5);
    ku_expect_close("layer_norm mean", mean, wm, 1e-6, 1e-6);
    ku_expect_close("layer_norm rstd", rstd, wr, 1e-6, 1e-5);
    assert_int_equal(ku_cpu()->layer_norm_backward(x, w, mean, rstd, gy, gx, gw, gb), DT_OK);
    ku_expect_close("layer_norm gx", gx, wgx, 1e-4, 1e-4);
    if (affine) {
        ku_expect_close("layer_norm gw (accumulated)", gw, gw0, 1e-4, 1e-4);
        ku_expect_close("layer_norm gb (accumulated)", gb, gb0, 1e-4, 1e-4);
    }
    free(vx);
    free(vg);
    free(vw);
    free(vb);
    free(gw0);
    free(gb0);
    free(wy);
    free(wgx);
    free(wm);
    free(wr);
    dt_tensor *objs[] = {x, gy, w, b, y, gx, mean, rstd, gw, gb};
    for (size_t i = 0; i < 10; i++)
        dt_tensor_release(objs[i]);
}

static void test_layer_norm(void **state)
{
    (void)state;
    check_layer_norm(7, 64, true);
    check_layer_norm(5, 33, false);
    check_layer_norm(3, 1, true);
    check_layer_norm(0, 8, true);
}

static void test_embedding(void **state)
{
    (void)state;
    /* this rank holds vocabulary rows [10, 16) of a 20-token vocabulary */
    int64_t ws[2] = {6, 5}, ids_v[7] = {10, 3, 15, 12, 19, 12, 0}, os[2] = {7, 5};
    dt_tensor *w = ku_rand(2, ws, -1, 1), *ids = ku_ids(7, ids_v),
              *out = ku_empty(2, os, DT_DTYPE_F32);
    double *vw = ku_values(w), want[35], gwant[30];
    for (int i = 0; i < 7; i++)
        for (int j = 0; j < 5; j++) {
            int64_t r = ids_v[i] - 10;
            want[i * 5 + j] = (r >= 0 && r < 6) ? vw[r * 5 + j] : 0.0;
        }
    assert_int_equal(ku_cpu()->embedding(w, ids, 10, out), DT_OK);
    ku_expect_close("embedding", out, want, 0, 0);
    dt_tensor *gy = ku_rand(2, os, -1, 1), *gw = ku_empty(2, ws, DT_DTYPE_F32);
    assert_int_equal(ku_cpu()->fill(gw, 0.5), DT_OK);
    double *vg = ku_values(gy);
    for (int k = 0; k < 30; k++)
        gwant[k] = 0.5;
    for (int i = 0; i < 7; i++) {
        int64_t r = ids_v[i] - 10;
        for (int j = 0; r >= 0 && r < 6 && j < 5; j++)
            gwant[r * 5 + j] += vg[i * 5 + j]; /* id 12 twice: accumulates */
    }
    assert_int_equal(ku_cpu()->embedding_backward(ids, gy, 10, gw), DT_OK);
    ku_expect_close("embedding backward", gw, gwant, 1e-6, 1e-6);
    free(vw);
    free(vg);
    dt_tensor *objs[] = {w, ids, out, gy, gw};
    for (size_t i = 0; i < 5; i++)
        dt_tensor_release(objs[i]);
}

static void test_cross_entropy(void **state)
{
    (void)state;
    const int64_t N = 6, C = 1000, ign = -100;
    int64_t ls[2] = {N, C}, ns[1] = {N}, tv[6] = {3, 999, -100, 0, 512, 7};
    dt_tensor *logits = ku_rand(2, ls, -8, 8), *t = ku_ids(N, tv);
    dt_tensor *loss = ku_empty(1, ns, DT_DTYPE_F32), *lse = ku_empty(1, ns, DT_DTYPE_F32);
    dt_tensor *gl = ku_rand(1, ns, 0.1, 1), *glog = ku_empty(2, ls, DT_DTYPE_F32);
    double *vl = ku_values(logits), *vgl = ku_values(gl);
    double wl[6], we[6], *wg = malloc((size_t)(N * C) * sizeof(double));
    for (int64_t i = 0; i < N; i++) {
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < C; j++)
            m = fmax(m, vl[i * C + j]);
        for (int64_t j = 0; j < C; j++)
            s += exp(vl[i * C + j] - m);
        we[i] = m + log(s);
        wl[i] = tv[i] == ign ? 0 : we[i] - vl[i * C + tv[i]];
        for (int64_t j = 0; j < C; j++)
            wg[i * C + j] =
                tv[i] == ign ? 0 : vgl[i] * (exp(vl[i * C + j] - we[i]) - (j == tv[i] ? 1 : 0));
    }
    assert_int_equal(ku_cpu()->cross_entropy(logits, t, ign, loss, lse), DT_OK);
    ku_expect_close("ce loss", loss, wl, 1e-5, 1e-5);
    ku_expect_close("ce lse", lse, we, 1e-5, 1e-6);
    assert_int_equal(ku_cpu()->cross_entropy_backward(logits, t, ign, lse, gl, glog), DT_OK);
    ku_expect_close("ce backward", glog, wg, 1e-6, 1e-4);
    /* a target out of range that is not ignore_index is named */
    int64_t bad[6] = {3, 1000, 0, 0, 0, 0};
    dt_tensor *tb = ku_ids(N, bad);
    assert_int_equal(ku_cpu()->cross_entropy(logits, tb, ign, loss, lse), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "target 1000"));
    free(vl);
    free(vgl);
    free(wg);
    dt_tensor *objs[] = {logits, t, loss, lse, gl, glog, tb};
    for (size_t i = 0; i < 7; i++)
        dt_tensor_release(objs[i]);
}

static void check_reduce(dt_reduce_kind kind, dt_tensor *x, int dim)
{
    int nd = dt_tensor_ndim(x);
    const int64_t *s = dt_tensor_shape(x);
    int d = dim < 0 ? dim + nd : dim;
    int64_t outer = 1, inner = 1, n = s[d];
    for (int i = 0; i < d; i++)
        outer *= s[i];
    for (int i = d + 1; i < nd; i++)
        inner *= s[i];
    int64_t os[1] = {outer * inner};
    dt_tensor *out = ku_empty(1, os, DT_DTYPE_F32), *am = ku_empty(1, os, DT_DTYPE_I64);
    double *v = ku_values(x), *want = malloc((size_t)(os[0] + 1) * sizeof(double));
    double *wam = malloc((size_t)(os[0] + 1) * sizeof(double));
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double acc = kind == DT_REDUCE_KIND_MAX ? -INFINITY : 0;
            int64_t at = 0;
            for (int64_t k = 0; k < n; k++) {
                double e = v[(o * n + k) * inner + i];
                if (kind == DT_REDUCE_KIND_MAX) {
                    if (e > acc) {
                        acc = e;
                        at = k;
                    }
                } else {
                    acc += e;
                }
            }
            want[o * inner + i] = kind == DT_REDUCE_KIND_MEAN ? acc / n : acc;
            wam[o * inner + i] = (double)at;
        }
    bool mx = kind == DT_REDUCE_KIND_MAX;
    assert_int_equal(ku_cpu()->reduce(kind, x, dim, out, mx ? am : NULL), DT_OK);
    ku_expect_close("reduce", out, want, 1e-5, 1e-5);
    if (mx)
        ku_expect_close("argmax", am, wam, 0, 0);
    free(v);
    free(want);
    free(wam);
    dt_tensor_release(out);
    dt_tensor_release(am);
}

static void test_reduce(void **state)
{
    (void)state;
    int64_t s[3] = {4, 37, 6};
    dt_tensor *x = ku_rand(3, s, -2, 2), *xt = NULL;
    assert_int_equal(dt_tensor_transpose(x, 1, 2, &xt), DT_OK);
    for (int k = DT_REDUCE_KIND_SUM; k <= DT_REDUCE_KIND_MAX; k++)
        for (int d = -1; d < 3; d++) {
            check_reduce(k, x, d);
            check_reduce(k, xt, d);
        }
    /* empty dim: sum 0, mean NaN, max is an error */
    int64_t es[2] = {3, 0}, os[1] = {3};
    dt_tensor *e = ku_rand(2, es, 0, 1), *out = ku_empty(1, os, DT_DTYPE_F32);
    double zeros[3] = {0, 0, 0}, nans[3] = {NAN, NAN, NAN};
    assert_int_equal(ku_cpu()->reduce(DT_REDUCE_KIND_SUM, e, 1, out, NULL), DT_OK);
    ku_expect_close("empty sum", out, zeros, 0, 0);
    assert_int_equal(ku_cpu()->reduce(DT_REDUCE_KIND_MEAN, e, 1, out, NULL), DT_OK);
    ku_expect_close("empty mean", out, nans, 0, 0);
    assert_int_equal(ku_cpu()->reduce(DT_REDUCE_KIND_MAX, e, 1, out, NULL), DT_ERR_INVALID_ARG);
    assert_int_equal(ku_cpu()->reduce(DT_REDUCE_KIND_SUM, x, 3, out, NULL), DT_ERR_INVALID_ARG);
    dt_tensor *objs[] = {x, xt, e, out};
    for (size_t i = 0; i < 4; i++)
        dt_tensor_release(objs[i]);
}

static void test_optim(void **state)
{
    (void)state;
    int64_t s[1] = {1003};
    dt_tensor *p = ku_rand(1, s, -1, 1), *g = ku_rand(1, s, -1, 1);
    dt_tensor *m = ku_empty(1, s, DT_DTYPE_F32), *v = ku_empty(1, s, DT_DTYPE_F32);
    ku_cpu()->fill(m, 0);
    ku_cpu()->fill(v, 0);
    double *vp = ku_values(p), *vg = ku_values(g), wm[1003] = {0}, wv[1003] = {0};
    const double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
    for (int step = 1; step <= 3; step++) {
        double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
        for (int i = 0; i < 1003; i++) {
            vp[i] *= 1 - lr * wd;
            wm[i] = b1 * wm[i] + (1 - b1) * vg[i];
            wv[i] = b2 * wv[i] + (1 - b2) * vg[i] * vg[i];
            vp[i] -= lr * (wm[i] / bc1) / (sqrt(wv[i] / bc2) + eps);
        }
        assert_int_equal(ku_cpu()->adamw_step(p, g, m, v, (float)lr, (float)b1, (float)b2,
                                              (float)eps, (float)wd, step),
                         DT_OK);
    }
    ku_expect_close("adamw p", p, vp, 1e-6, 1e-5);
    ku_expect_close("adamw m", m, wm, 1e-7, 1e-5);
    ku_expect_close("adamw v", v, wv, 1e-8, 1e-5);
    /* SGD with momentum and weight decay, 2 steps */
    dt_tensor *buf = ku_empty(1, s, DT_DTYPE_F32);
    ku_cpu()->fill(buf, 0);
    double *q = ku_values(p), wb[1003] = {0};
    for (int step = 0; step < 2; step++) {
        for (int i = 0; i < 1003; i++) {
            double gg = vg[i] + 0.01 * q[i];
            wb[i] = 0.9 * wb[i] + gg;
            q[i] -= 0.1 * wb[i];
        }
        assert_int_equal(ku_cpu()->sgd_step(p, g, buf, 0.1f, 0.9f, 0.01f), DT_OK);
    }
    ku_expect_close("sgd p", p, q, 1e-6, 1e-5);
    double ss = 0, got = 0;
    for (int i = 0; i < 1003; i++)
        ss += q[i] * q[i];
    assert_int_equal(ku_cpu()->sum_squares(p, &got), DT_OK);
    assert_true(fabs(got - ss) <= 1e-5 * ss);
    assert_int_equal(ku_cpu()->adamw_step(p, g, m, v, 0.1f, 0.9f, 0.9f, 1e-8f, 0, 0),
                     DT_ERR_INVALID_ARG);
    free(vp);
    free(vg);
    free(q);
    dt_tensor *objs[] = {p, g, m, v, buf};
    for (size_t i = 0; i < 5; i++)
        dt_tensor_release(objs[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax),       cmocka_unit_test(test_softmax_strided_input),
        cmocka_unit_test(test_layer_norm),    cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_cross_entropy), cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_optim),
    };
    return cmocka_run_group_tests_name("kernels_nn", tests, NULL, NULL);
}
