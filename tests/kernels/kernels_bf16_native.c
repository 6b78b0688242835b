/*
 * The CPU kernels that read bf16 natively (half_stage.c) against the f32
 * copies they replaced (bf16_widen.c, dt__cpu_half_native = false): every
 * output bit for bit the same, on transposed (strided) operands and odd sizes
 * (3, 7, 1003: several element-wise blocks and a tail), and within bf16
 * precision of a float64 reference computed from the same bf16 values.
 */
#include <string.h>

#include "kernels/cpu/cpu_internal.h"
#include "kernels_test_util.h"

#define BF16 DT_DTYPE_BF16
#define F32  DT_DTYPE_F32
#define RTOL (1.0 / 128) /* one rounding to bf16 (2^-9), with margin */

enum { R = 7, C = 1003 };

/* A [rows, cols] tensor of @p dtype in [lo, hi): the transposed view of a
 * contiguous [cols, rows] one when @p strided. */
static dt_tensor *make(int64_t rows, int64_t cols, double lo, double hi, dt_dtype dtype,
                       bool strided)
{
    int64_t s[2] = {strided ? cols : rows, strided ? rows : cols};
    dt_tensor *f = ku_rand(2, s, lo, hi), *t = f;
    if (dtype != F32) {
        t = ku_empty(2, s, dtype);
        assert_int_equal(ku_cpu()->copy(t, f), DT_OK);
        dt_tensor_release(f);
    }
    if (!strided)
        return t;
    dt_tensor *v = NULL;
    assert_int_equal(dt_tensor_transpose(t, 0, 1, &v), DT_OK);
    dt_tensor_release(t);
    return v;
}

/* One kernel call of a case; outputs in out[], inputs in in[]. */
typedef struct kcase {
    int kind, op;
    float alpha;
    bool flag;
    dt_tensor *in[5], *out[4], *targets;
} kcase;
enum {
    K_BINARY,
    K_UNARY,
    K_UNARY_BWD,
    K_SOFTMAX,
    K_SOFTMAX_BWD,
    K_LN,
    K_LN_BWD,
    K_CE,
    K_CE_BWD,
    K_REDUCE
};

static void run_case(const kcase *c)
{
    const dt_kernel_ops *k = ku_cpu();
    dt_tensor *const *i = c->in, *const *o = c->out;
    dt_status s = DT_ERR_INTERNAL;
    switch (c->kind) {
    case K_BINARY:
        s = k->binary((dt_binary_op)c->op, i[0], i[1], o[0]);
        break;
    case K_UNARY:
        s = k->unary((dt_unary_op)c->op, i[0], c->alpha, o[0]);
        break;
    case K_UNARY_BWD:
        s = k->unary_backward((dt_unary_op)c->op, i[0], i[1], o[0]);
        break;
    case K_SOFTMAX:
        s = k->softmax(i[0], c->alpha, c->flag, c->op, o[0]);
        break;
    case K_SOFTMAX_BWD:
        s = k->softmax_backward(i[0], i[1], c->alpha, c->op, o[0]);
        break;
    case K_LN:
        s = k->layer_norm(i[0], i[1], i[2], 1e-5f, o[0], o[1], o[2]);
        break;
    case K_LN_BWD:
        s = k->layer_norm_backward(i[0], i[1], i[2], i[3], i[4], o[0], o[1], o[2]);
        break;
    case K_CE:
        s = k->cross_entropy(i[0], c->targets, -100, o[0], o[1]);
        break;
    case K_CE_BWD:
        s = k->cross_entropy_backward(i[0], c->targets, -100, i[1], i[2], o[0]);
        break;
    case K_REDUCE:
        s = k->reduce((dt_reduce_kind)c->op, i[0], (int)c->alpha, o[0], o[1]);
        break;
    }
    if (s != DT_OK)
        fail_msg("kernel case %d: %s", c->kind, dt_last_error());
}

/* Runs @p c through the f32 copies, then natively, each from the same start
 * values of the outputs (LayerNorm's gw/gb accumulate): same bits. */
static void same_both_ways(const char *what, const kcase *c)
{
    dt_tensor *start[4] = {0}, *wide[4] = {0};
    for (int j = 0; j < 4 && c->out[j]; j++)
        assert_int_equal(dt_tensor_clone(c->out[j], &start[j]), DT_OK);
    dt__cpu_half_native = false;
    run_case(c);
    for (int j = 0; j < 4 && c->out[j]; j++) {
        assert_int_equal(dt_tensor_clone(c->out[j], &wide[j]), DT_OK);
        assert_int_equal(ku_cpu()->copy(c->out[j], start[j]), DT_OK);
    }
    dt__cpu_half_native = true;
    run_case(c);
    for (int j = 0; j < 4 && c->out[j]; j++) {
        for (int64_t e = 0; e < dt_tensor_numel(wide[j]); e++) {
            double a = dt_tensor_item_at(wide[j], e), b = dt_tensor_item_at(c->out[j], e);
            if (memcmp(&a, &b, sizeof(a)) != 0)
                fail_msg("%s: output %d element %lld: native %.9g, through f32 %.9g", what, j,
                         (long long)e, b, a);
        }
        dt_tensor_release(start[j]);
        dt_tensor_release(wide[j]);
    }
}

static void release_case(kcase *c)
{
    for (int j = 0; j < 5; j++)
        dt_tensor_release(c->in[j]);
    for (int j = 0; j < 4; j++)
        dt_tensor_release(c->out[j]);
    dt_tensor_release(c->targets);
}

static double gelu(double x)
{
    return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

/* Strided bf16 op a broadcast row (bf16, or f32 for sub and div), into bf16. */
static void check_binary(int64_t rows, int64_t cols)
{
    int64_t n = rows * cols, s[2] = {rows, cols}, sb[1] = {cols};
    for (int op = DT_BINARY_ADD; op <= DT_BINARY_DIV; op++) {
        kcase c = {.kind = K_BINARY, .op = op};
        c.in[0] = make(rows, cols, -2, 2, BF16, true);
        c.in[1] = make(1, cols, 0.5, 2, op % 2 ? F32 : BF16, false);
        dt_tensor *row = NULL;
        assert_int_equal(dt_tensor_view(c.in[1], 1, sb, &row), DT_OK);
        dt_tensor_release(c.in[1]);
        c.in[1] = row;
        c.out[0] = ku_empty(2, s, BF16);
        same_both_ways("binary", &c);
        double *va = ku_values(c.in[0]), *vb = ku_values(c.in[1]), *want = calloc(n, 8);
        for (int64_t e = 0; e < n; e++) {
            double x = va[e], y = vb[e % cols];
            want[e] = op == 0 ? x + y : op == 1 ? x - y : op == 2 ? x * y : x / y;
        }
        ku_expect_close("binary", c.out[0], want, 0, RTOL);
        free(va), free(vb), free(want);
        release_case(&c);
    }
}

/* GELU and exp of strided bf16 into bf16 and f32; GELU backward. */
static void check_unary(int64_t rows, int64_t cols)
{
    int64_t n = rows * cols, s[2] = {rows, cols};
    for (int u = 0; u < 3; u++) {
        kcase c = {.kind = u == 2 ? K_UNARY_BWD : K_UNARY,
                   .op = u == 1 ? DT_UNARY_EXP : DT_UNARY_GELU_TANH};
        c.in[0] = make(rows, cols, -3, 3, BF16, true);
        c.in[1] = u == 2 ? make(rows, cols, -1, 1, BF16, true) : NULL;
        c.out[0] = ku_empty(2, s, u == 1 ? F32 : BF16);
        same_both_ways("unary", &c);
        double *vx = ku_values(c.in[0]), *vg = u == 2 ? ku_values(c.in[1]) : NULL;
        double *want = calloc(n, 8);
        for (int64_t e = 0; e < n; e++) {
            double x = vx[e], h = 1e-6;
            want[e] = u == 0   ? gelu(x)
                      : u == 1 ? exp(x)
                               : vg[e] * (gelu(x + h) - gelu(x - h)) / (2 * h);
        }
        ku_expect_close("unary", c.out[0], want, u == 1 ? 1e-6 : 1e-3, RTOL);
        free(vx), free(vg), free(want);
        release_case(&c);
    }
}

static void test_elementwise(void **state)
{
    (void)state;
    int64_t sizes[3][2] = {{R, C}, {3, 7}, {1, 1}};
    for (int z = 0; z < 3; z++) {
        check_binary(sizes[z][0], sizes[z][1]);
        check_unary(sizes[z][0], sizes[z][1]);
    }
}

/* Float64 softmax of row-major [rows, cols] values with a causal mask of
 * Tq = rows (log: log-softmax). */
static void softmax_ref(const double *x, int64_t rows, int64_t cols, bool causal, bool lg,
                        double *y)
{
    for (int64_t i = 0; i < rows; i++) {
        int64_t valid = causal ? i + (cols - rows) + 1 : cols;
        double m = -INFINITY, z = 0;
        for (int64_t j = 0; j < valid; j++)
            m = fmax(m, x[i * cols + j]);
        for (int64_t j = 0; j < valid; j++)
            z += exp(x[i * cols + j] - m);
        for (int64_t j = 0; j < cols; j++) {
            double d = x[i * cols + j] - m;
            y[i * cols + j] = j >= valid ? (lg ? -INFINITY : 0) : lg ? d - log(z) : exp(d) / z;
        }
    }
}

static void test_softmax(void **state)
{
    (void)state;
    int64_t s[2] = {R, C};
    for (int v = 0; v < 4; v++) { /* plain, log, causal, causal log with scale < 0 */
        bool causal = v >= 2, lg = v % 2;
        float scale = v == 3 ? -0.5f : 1.0f;
        kcase c = {.kind = K_SOFTMAX, .op = lg, .alpha = scale, .flag = causal};
        c.in[0] = make(R, C, -4, 4, BF16, true);
        c.out[0] = ku_empty(2, s, BF16);
        same_both_ways("softmax", &c);
        double *vx = ku_values(c.in[0]), *want = calloc(R * C, 8);
        for (int64_t e = 0; e < R * C; e++)
            vx[e] *= scale;
        softmax_ref(vx, R, C, causal, lg, want);
        ku_expect_close("softmax", c.out[0], want, 1e-6, RTOL);
        /* backward from the bf16 forward output and a strided bf16 gradient */
        kcase b = {.kind = K_SOFTMAX_BWD, .op = lg, .alpha = scale};
        b.in[0] = c.out[0];
        b.in[1] = make(R, C, -1, 1, BF16, true);
        b.out[0] = ku_empty(2, s, BF16);
        same_both_ways("softmax backward", &b);
        c.out[0] = NULL; /* released with b */
        free(vx), free(want);
        release_case(&c);
        release_case(&b);
    }
}

static void test_layer_norm(void **state)
{
    (void)state;
    int64_t s[2] = {R, C}, r[1] = {R};
    dt_tensor *x = make(R, C, -2, 3, BF16, true);
    kcase f = {.kind = K_LN};
    f.in[0] = x;
    f.in[1] = make(1, C, 0.5, 1.5, BF16, false); /* [1, C]: numel C, as a [C] weight */
    f.in[2] = make(1, C, -1, 1, BF16, false);
    f.out[0] = ku_empty(2, s, BF16);
    f.out[1] = ku_empty(1, r, F32);
    f.out[2] = ku_empty(1, r, F32);
    same_both_ways("layer_norm", &f);
    double *vx = ku_values(x), *vw = ku_values(f.in[1]), *vb = ku_values(f.in[2]);
    double *want = calloc(R * C, 8);
    for (int i = 0; i < R; i++) {
        double mu = 0, var = 0;
        for (int j = 0; j < C; j++)
            mu += vx[i * C + j] / C;
        for (int j = 0; j < C; j++)
            var += (vx[i * C + j] - mu) * (vx[i * C + j] - mu) / C;
        for (int j = 0; j < C; j++)
            want[i * C + j] = (vx[i * C + j] - mu) / sqrt(var + 1e-5) * vw[j] + vb[j];
    }
    ku_expect_close("layer_norm", f.out[0], want, 1e-2, RTOL);
    /* backward: strided bf16 gy, bf16 gx, gw and gb accumulating from nonzero */
    kcase b = {.kind = K_LN_BWD};
    b.in[0] = x;
    b.in[1] = f.in[1];
    b.in[2] = f.out[1];
    b.in[3] = f.out[2];
    b.in[4] = make(R, C, -1, 1, BF16, true);
    b.out[0] = ku_empty(2, s, BF16);
    b.out[1] = make(1, C, -1, 1, BF16, false);
    b.out[2] = make(1, C, -1, 1, BF16, false);
    same_both_ways("layer_norm backward", &b);
    memset(b.in, 0, 4 * sizeof(b.in[0])); /* owned by f */
    free(vx), free(vw), free(vb), free(want);
    release_case(&f);
    release_case(&b);
}

static void test_cross_entropy(void **state)
{
    (void)state;
    int64_t r[1] = {R}, s[2] = {R, C}, tv[R] = {0, C - 1, 5, -100, 500, 2, 1000};
    kcase f = {.kind = K_CE};
    f.in[0] = make(R, C, -3, 3, BF16, true);
    assert_int_equal(dt_tensor_from_buffer(1, r, DT_DTYPE_I64, tv, &f.targets), DT_OK);
    f.out[0] = ku_empty(1, r, F32);
    f.out[1] = ku_empty(1, r, BF16);
    same_both_ways("cross_entropy", &f);
    double *vl = ku_values(f.in[0]), want[R];
    for (int i = 0; i < R; i++) {
        double z = 0;
        for (int j = 0; j < C; j++)
            z += exp(vl[i * C + j]);
        want[i] = tv[i] == -100 ? 0 : log(z) - vl[i * C + tv[i]];
    }
    ku_expect_close("cross_entropy", f.out[0], want, 1e-4, 1e-5);
    kcase b = {.kind = K_CE_BWD, .targets = f.targets};
    b.in[0] = f.in[0];
    b.in[1] = f.out[1];
    b.in[2] = make(1, R, 0.5, 1, BF16, false);
    b.out[0] = ku_empty(2, s, BF16);
    same_both_ways("cross_entropy backward", &b);
    b.in[0] = b.in[1] = NULL, b.targets = NULL; /* owned by f */
    release_case(&b);
    free(vl);
    release_case(&f);
}

static void test_reduce(void **state)
{
    (void)state;
    for (int kind = DT_REDUCE_KIND_SUM; kind <= DT_REDUCE_KIND_MAX; kind++)
        for (int dim = 0; dim < 2; dim++) { /* strided bf16 into bf16 (max: and argmax) */
            int64_t o[1] = {dim ? R : C};
            kcase c = {.kind = K_REDUCE, .op = kind, .alpha = (float)dim};
            c.in[0] = make(R, C, -2, 2, BF16, true);
            c.out[0] = ku_empty(1, o, BF16);
            c.out[1] = kind == DT_REDUCE_KIND_MAX ? ku_empty(1, o, DT_DTYPE_I64) : NULL;
            same_both_ways("reduce", &c);
            double *vx = ku_values(c.in[0]), *w = calloc(o[0], 8);
            for (int64_t e = 0; e < o[0]; e++) {
                w[e] = kind == DT_REDUCE_KIND_MAX ? -INFINITY : 0;
                for (int64_t j = 0; j < (dim ? C : R); j++) {
                    double v = dim ? vx[e * C + j] : vx[j * C + e];
                    w[e] = kind == DT_REDUCE_KIND_MAX ? fmax(w[e], v) : w[e] + v;
                }
                w[e] /= kind == DT_REDUCE_KIND_MEAN ? (dim ? C : R) : 1;
            }
            ku_expect_close("reduce", c.out[0], w, 0.05, RTOL);
            free(vx), free(w);
            release_case(&c);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elementwise), cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_layer_norm),  cmocka_unit_test(test_cross_entropy),
        cmocka_unit_test(test_reduce),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
