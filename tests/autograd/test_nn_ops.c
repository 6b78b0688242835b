/* matmul, linear, softmax family, layer norm, embedding, cross entropy: forward and gradients. */
#include "ag_test_util.h"

/* ------------------------------------------------------------ matmul */

typedef struct mm_ctx {
    bool ta, tb;
    bool view_a; /* feed a as a transposed view of the stored tensor */
} mm_ctx;

static dt_status f_matmul(dt_tensor **in, void *ctx, dt_tensor **out)
{
    mm_ctx *c = ctx;
    dt_tensor *a = NULL;
    if (!c->view_a)
        return dt_matmul(in[0], in[1], c->ta, c->tb, out);
    dt_status s = dt_transpose(in[0], -1, -2, &a);
    if (s == DT_OK)
        s = dt_matmul(a, in[1], c->ta, c->tb, out);
    dt_tensor_release(a);
    return s;
}

/* Element (batch coords of c, row r, col q) of op(t) with t's batch dims broadcast. */
static double mm_elem(const double *v, int nd, const int64_t *sh, bool tr, int cnd,
                      const int64_t *cb, int64_t r, int64_t q)
{
    int64_t idx = 0, stride = 1;
    int64_t rr = tr ? q : r, qq = tr ? r : q;
    idx += qq * stride;
    stride *= sh[nd - 1];
    idx += rr * stride;
    stride *= sh[nd - 2];
    for (int d = nd - 3; d >= 0; d--) {
        int cd = d + (cnd - 2) - (nd - 2);
        if (sh[d] != 1)
            idx += cb[cd] * stride;
        stride *= sh[d];
    }
    return v[idx];
}

static void check_matmul(int na, const int64_t *sa, int nb, const int64_t *sb, mm_ctx c, int nc,
                         const int64_t *sc)
{
    dt_tensor *in[2] = {ag_rand_tensor(na, sa, -1.0, 1.0), ag_rand_tensor(nb, sb, -1.0, 1.0)};
    dt_tensor *y = NULL;
    AG_OK(f_matmul(in, &c, &y));
    ag_expect_shape(y, nc, sc);
    double *a = ag_vals(in[0]), *b = ag_vals(in[1]);
    int64_t m = sc[nc - 2], n = sc[nc - 1], total = ag_numel(nc, sc);
    bool ta = c.view_a ? !c.ta : c.ta; /* stored layout of a relative to op(a) */
    int64_t k = ta ? sa[na - 2] : sa[na - 1];
    double *ref = malloc(sizeof(double) * (size_t)total);
    for (int64_t e = 0; e < total; e++) {
        int64_t cb[DT_MAX_DIMS], rest = e / (m * n);
        for (int d = nc - 3; d >= 0; d--) {
            cb[d] = rest % sc[d];
            rest /= sc[d];
        }
        int64_t i = (e / n) % m, j = e % n;
        double acc = 0.0;
        for (int64_t p = 0; p < k; p++)
            acc += mm_elem(a, na, sa, ta, nc, cb, i, p) * mm_elem(b, nb, sb, c.tb, nc, cb, p, j);
        ref[e] = acc;
    }
    ag_expect_close("matmul forward", ref, y, 1e-5, 1e-5);
    bool check[2] = {true, true}, only_b[2] = {false, true}, only_a[2] = {true, false};
    ag_gradcheck("matmul", f_matmul, &c, 2, in, check);
    /* one operand a constant (b is then not saved: a weight-only gradient) */
    ag_gradcheck("matmul, b alone", f_matmul, &c, 2, in, only_b);
    ag_gradcheck("matmul, a alone", f_matmul, &c, 2, in, only_a);
    free(ref);
    free(a);
    free(b);
    dt_tensor_release(y);
    ag_release_all(2, in);
}

static void test_matmul(void **state)
{
    (void)state;
    int64_t a1[3] = {2, 3, 4}, b1[3] = {2, 4, 5}, c1[3] = {2, 3, 5};
    int64_t a2[3] = {2, 4, 3}, b2[2] = {5, 4};
    int64_t a3[2] = {3, 4}, b3[4] = {2, 2, 4, 5}, c3[4] = {2, 2, 3, 5};
    check_matmul(3, a1, 3, b1, (mm_ctx){false, false, false}, 3, c1);
    check_matmul(3, a2, 2, b2, (mm_ctx){true, true, false}, 3, c1);   /* a^T, 2-d b^T */
    check_matmul(2, a3, 4, b3, (mm_ctx){false, false, false}, 4, c3); /* 2-d a broadcast */
    int64_t b4[2] = {4, 5}, a5[4] = {2, 2, 3, 4}, c5[4] = {2, 2, 3, 5};
    check_matmul(3, a1, 2, b4, (mm_ctx){false, false, false}, 3, c1); /* 2-d b: flat grad */
    check_matmul(4, a5, 2, b2, (mm_ctx){false, true, false}, 4, c5);  /* 2-d b^T: flat grad */
    check_matmul(3, a2, 2, b2, (mm_ctx){false, true, true}, 3, c1);   /* strided a, 2-d b */
    check_matmul(3, a2, 3, b1, (mm_ctx){false, false, true}, 3, c1);  /* strided view of a */
    check_matmul(3, a1, 3, b1, (mm_ctx){true, false, true}, 3, c1);   /* view + flag */
}

/* ------------------------------------------------------------ linear */

static dt_status f_linear(dt_tensor **in, void *ctx, dt_tensor **out)
{
    return dt_linear(in[0], in[1], ctx != NULL ? in[2] : NULL, out);
}

static void test_linear(void **state)
{
    (void)state;
    int64_t sx[3] = {2, 3, 4}, sw[2] = {5, 4}, sb[1] = {5}, sy[3] = {2, 3, 5};
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        dt_tensor *in[3] = {ag_rand_tensor(3, sx, -1, 1), ag_rand_tensor(2, sw, -1, 1),
                            ag_rand_tensor(1, sb, -1, 1)};
        void *ctx = with_bias ? (void *)1 : NULL;
        dt_tensor *y = NULL;
        AG_OK(f_linear(in, ctx, &y));
        ag_expect_shape(y, 3, sy);
        double *x = ag_vals(in[0]), *w = ag_vals(in[1]), *b = ag_vals(in[2]), ref[30];
        for (int r = 0; r < 6; r++)
            for (int o = 0; o < 5; o++) {
                double acc = with_bias ? b[o] : 0.0;
                for (int i = 0; i < 4; i++)
                    acc += x[r * 4 + i] * w[o * 4 + i];
                ref[r * 5 + o] = acc;
            }
        ag_expect_close("linear forward", ref, y, 1e-5, 1e-5);
        bool check[3] = {true, true, with_bias != 0};
        ag_gradcheck("linear", f_linear, ctx, with_bias ? 3 : 2, in, check);
        free(x);
        free(w);
        free(b);
        dt_tensor_release(y);
        ag_release_all(3, in);
    }
}

/* ------------------------------------------------------------ softmax family */

typedef struct sm_ctx {
    int kind; /* 0 softmax, 1 log_softmax, 2 causal */
    int dim;
    double scale;
} sm_ctx;

static dt_status f_softmax(dt_tensor **in, void *ctx, dt_tensor **out)
{
    sm_ctx *c = ctx;
    if (c->kind == 0)
        return dt_softmax(in[0], c->dim, out);
    if (c->kind == 1)
        return dt_log_softmax(in[0], c->dim, out);
    return dt_causal_softmax(in[0], c->scale, out);
}

static void check_softmax(sm_ctx c, int nd, const int64_t *s)
{
    dt_tensor *x = ag_rand_tensor(nd, s, -2, 2), *y = NULL;
    AG_OK(f_softmax(&x, &c, &y));
    ag_expect_shape(y, nd, s);
    int d = c.dim < 0 ? c.dim + nd : c.dim;
    int64_t total = ag_numel(nd, s), inner = 1, len = s[d];
    for (int i = d + 1; i < nd; i++)
        inner *= s[i];
    double *v = ag_vals(x), *ref = malloc(sizeof(double) * (size_t)total);
    int64_t tq = s[nd - 2], tk = s[nd - 1];
    for (int64_t o = 0; o < total / len; o++) {
        int64_t base = (o / inner) * inner * len + o % inner;
        int64_t qi = (base / tk) % tq; /* causal: the query row of this softmax row */
        double mx = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j < len; j++) {
            bool masked = c.kind == 2 && j > qi + (tk - tq);
            double z = masked ? -INFINITY : v[base + j * inner] * (c.kind == 2 ? c.scale : 1.0);
            ref[base + j * inner] = z;
            mx = fmax(mx, z);
        }
        for (int64_t j = 0; j < len; j++)
            sum += exp(ref[base + j * inner] - mx);
        for (int64_t j = 0; j < len; j++) {
            double z = ref[base + j * inner] - mx;
            ref[base + j * inner] = c.kind == 1 ? z - log(sum) : exp(z) / sum;
        }
    }
    ag_expect_close("softmax forward", ref, y, 1e-5, 1e-6);
    bool check[1] = {true};
    ag_gradcheck("softmax", f_softmax, &c, 1, &x, check);
    free(ref);
    free(v);
    dt_tensor_release(y);
    dt_tensor_release(x);
}

static void test_softmax(void **state)
{
    (void)state;
    int64_t s[3] = {2, 3, 4}, sc[3] = {2, 3, 5}, sq[2] = {4, 4};
    for (int dim = -1; dim < 3; dim++) {
        check_softmax((sm_ctx){0, dim, 1.0}, 3, s);
        check_softmax((sm_ctx){1, dim, 1.0}, 3, s);
    }
    check_softmax((sm_ctx){2, -1, 0.5}, 3, sc); /* Tq 3 < Tk 5: aligned to the end */
    check_softmax((sm_ctx){2, -1, 1.7}, 2, sq);
}

/* ------------------------------------------------------------ layer norm */

static dt_status f_layer_norm(dt_tensor **in, void *ctx, dt_tensor **out)
{
    return dt_layer_norm(in[0], ctx ? in[1] : NULL, ctx ? in[2] : NULL, 1e-5, out);
}

static void test_layer_norm(void **state)
{
    (void)state;
    int64_t sx[3] = {2, 3, 6}, sp[1] = {6};
    for (int affine = 0; affine < 2; affine++) {
        dt_tensor *in[3] = {ag_rand_tensor(3, sx, -2, 2), ag_rand_tensor(1, sp, 0.5, 1.5),
                            ag_rand_tensor(1, sp, -0.5, 0.5)};
        void *ctx = affine ? (void *)1 : NULL;
        dt_tensor *y = NULL;
        AG_OK(f_layer_norm(in, ctx, &y));
        double *x = ag_vals(in[0]), *w = ag_vals(in[1]), *b = ag_vals(in[2]), ref[36];
        for (int r = 0; r < 6; r++) {
            double mean = 0, var = 0;
            for (int i = 0; i < 6; i++)
                mean += x[r * 6 + i] / 6.0;
            for (int i = 0; i < 6; i++)
                var += (x[r * 6 + i] - mean) * (x[r * 6 + i] - mean) / 6.0;
            for (int i = 0; i < 6; i++) {
                double n = (x[r * 6 + i] - mean) / sqrt(var + 1e-5);
                ref[r * 6 + i] = affine ? n * w[i] + b[i] : n;
            }
        }
        ag_expect_close("layer_norm forward", ref, y, 1e-5, 1e-5);
        bool check[3] = {true, affine != 0, affine != 0};
        ag_gradcheck("layer_norm", f_layer_norm, ctx, 3, in, check);
        free(x);
        free(w);
        free(b);
        dt_tensor_release(y);
        ag_release_all(3, in);
    }
}

/* ------------------------------------------------------------ embedding */

static dt_status f_embedding(dt_tensor **in, void *ctx, dt_tensor **out)
{
    return dt_embedding(in[0], (dt_tensor *)ctx, out);
}

static void test_embedding(void **state)
{
    (void)state;
    int64_t sw[2] = {5, 3}, si[2] = {2, 3}, sy[3] = {2, 3, 3}, idv[6] = {1, 3, 1, 0, 3, 3};
    dt_dtype dts[3] = {DT_DTYPE_I64, DT_DTYPE_I32, DT_DTYPE_U16};
    dt_tensor *w = ag_rand_tensor(2, sw, -1, 1);
    double *wv = ag_vals(w), ref[18];
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 3; j++)
            ref[i * 3 + j] = wv[idv[i] * 3 + j];
    for (int t = 0; t < 3; t++) {
        dt_tensor *ids = ag_ids(2, si, dts[t], idv), *y = NULL;
        AG_OK(dt_embedding(w, ids, &y));
        ag_expect_shape(y, 3, sy);
        ag_expect_close("embedding forward", ref, y, 0, 0);
        bool check[1] = {true}; /* repeated ids: their rows' gradients add up */
        ag_gradcheck("embedding", f_embedding, ids, 1, &w, check);
        dt_tensor_release(y);
        dt_tensor_release(ids);
    }
    free(wv);
    dt_tensor_release(w);
}

/* ------------------------------------------------------------ cross entropy */

static dt_status f_cross_entropy(dt_tensor **in, void *ctx, dt_tensor **out)
{
    return dt_cross_entropy(in[0], (dt_tensor *)ctx, -100, out);
}

static void check_cross_entropy(int nd, const int64_t *sl, const int64_t *tv)
{
    dt_tensor *x = ag_rand_tensor(nd, sl, -2, 2), *y = NULL;
    dt_tensor *tg = ag_ids(nd - 1, sl, DT_DTYPE_I64, tv);
    int64_t c = sl[nd - 1], n = ag_numel(nd - 1, sl), valid = 0;
    AG_OK(dt_cross_entropy(x, tg, -100, &y));
    assert_int_equal(dt_tensor_ndim(y), 0);
    double *v = ag_vals(x), ref = 0.0;
    for (int64_t r = 0; r < n; r++) {
        if (tv[r] == -100)
            continue;
        double mx = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j < c; j++)
            mx = fmax(mx, v[r * c + j]);
        for (int64_t j = 0; j < c; j++)
            sum += exp(v[r * c + j] - mx);
        ref += mx + log(sum) - v[r * c + tv[r]];
        valid++;
    }
    ref /= (double)valid;
    ag_expect_close("cross_entropy forward", &ref, y, 1e-5, 1e-6);
    bool check[1] = {true};
    ag_gradcheck("cross_entropy", f_cross_entropy, tg, 1, &x, check);
    free(v);
    dt_tensor_release(y);
    dt_tensor_release(tg);
    dt_tensor_release(x);
}

static void test_cross_entropy(void **state)
{
    (void)state;
    int64_t s2[2] = {4, 5}, t2[4] = {2, -100, 0, 4};
    int64_t s3[3] = {2, 3, 5}, t3[6] = {1, 4, -100, 0, 0, 3};
    check_cross_entropy(2, s2, t2);
    check_cross_entropy(3, s3, t3);
}

static void test_cross_entropy_all_ignored(void **state)
{
    (void)state;
    int64_t s[2] = {2, 3}, tv[2] = {-100, -100};
    dt_tensor *x = ag_rand_tensor(2, s, -1, 1), *tg = ag_ids(1, s, DT_DTYPE_I64, tv), *y = NULL;
    AG_OK(dt_cross_entropy(x, tg, -100, &y)); /* mean over nothing: NaN, as in PyTorch */
    assert_true(isnan(dt_tensor_item_at(y, 0)));
    dt_tensor_release(y);
    dt_tensor_release(tg);
    dt_tensor_release(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_layer_norm),
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_cross_entropy),
        cmocka_unit_test(test_cross_entropy_all_ignored),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
