/*
 * Unary element-wise ops and the GELU/ReLU backward. x (and gy) may be
 * strided; the inner runs are branch-free so gcc vectorises them (exp and
 * tanh come from cpu_internal.h's polynomial, not libm, for that reason).
 */
/* No FP-trap semantics: lets gcc if-convert the branch-free selects in the
 * loops below so they vectorise (must precede the includes: inline helpers). */
#pragma GCC optimize("no-trapping-math")
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/vmath.h"

#if DT_V4
/* GELU over the first 16k of n in explicit vectors (vmath.h): 1.35x the
 * auto-vectorised scalar loop; returns how many it did */
DT_V4_FN static int64_t gelu_v4(int64_t n, const float *x, float *o)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        dt__v16f g = dt__vgelu_tanh(x + i);
        memcpy(o + i, &g, sizeof(g));
    }
    return i;
}
#endif

/* x rounded to bf16 (ties to even; a NaN stays a NaN), as an f32 value. */
static inline float round_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    uint32_t q = u | 0x00400000u; /* NaN: quiet, kept */
    u = (u & 0x7fffffffu) > 0x7f800000u ? q : r;
    memcpy(&x, &u, 4);
    return x;
}

static inline __attribute__((always_inline)) float un_apply(dt_unary_op op, float x, float alpha)
{
    switch (op) {
    case DT_UNARY_SCALE:
        return alpha * x;
    case DT_UNARY_ADD_SCALAR:
        return x + alpha;
    case DT_UNARY_GELU_TANH:
        return dt__gelu_tanh_xq(x);
    case DT_UNARY_RELU:
        return x > 0.0f ? x : 0.0f;
    case DT_UNARY_EXP:
        return dt__expf(x);
    case DT_UNARY_LOG:
        return logf(x);
    case DT_UNARY_NEG:
        return -x;
    case DT_UNARY_SQRT:
        return sqrtf(x);
    case DT_UNARY_SQUARE:
        return x * x;
    case DT_UNARY_ROUND_BF16:
        return round_bf16(x);
    }
    return 0.0f;
}

static inline __attribute__((always_inline)) void un_run(dt_unary_op op, int64_t n,
                                                         const float *restrict x, int64_t sx,
                                                         float alpha, float *restrict o)
{
    if (sx == 1 && op == DT_UNARY_GELU_TANH) {
        int64_t i = 0;
#if DT_V4
        if (dt__v4_ok())
            i = gelu_v4(n, x, o);
#endif
        for (; i < n; i++)
            o[i] = dt__gelu_tanh_xq(x[i]);
    } else if (sx == 1) {
        for (int64_t i = 0; i < n; i++)
            o[i] = un_apply(op, x[i], alpha);
    } else {
        for (int64_t i = 0; i < n; i++)
            o[i] = un_apply(op, x[i * sx], alpha);
    }
}

DT_CPU_CLONES
static void un_dispatch(dt_unary_op op, int64_t n, const float *x, int64_t sx, float alpha,
                        float *o)
{
/* one case per op: each loop is compiled with its op constant, so it vectorises */
#define UN_CASE(OP)                                                                                \
    case OP:                                                                                       \
        un_run(OP, n, x, sx, alpha, o);                                                            \
        break
    switch (op) {
        UN_CASE(DT_UNARY_SCALE);
        UN_CASE(DT_UNARY_ADD_SCALAR);
        UN_CASE(DT_UNARY_GELU_TANH);
        UN_CASE(DT_UNARY_RELU);
        UN_CASE(DT_UNARY_EXP);
        UN_CASE(DT_UNARY_LOG);
        UN_CASE(DT_UNARY_NEG);
        UN_CASE(DT_UNARY_SQRT);
        UN_CASE(DT_UNARY_SQUARE);
        UN_CASE(DT_UNARY_ROUND_BF16);
    }
#undef UN_CASE
}

typedef struct un_ctx {
    dt_unary_op op;
    float alpha;
} un_ctx;

static void un_block(const void *ctx, int64_t n, const float *const *in, const int64_t *st,
                     float *o)
{
    const un_ctx *c = ctx;
    un_dispatch(c->op, n, in[0], st[0], c->alpha, o);
}

dt_status dt__cpu_unary(dt_unary_op op, const dt_tensor *x, float alpha, dt_tensor *out)
{
    const char *fn = "dt_kernel_unary";
    if ((unsigned)op > DT_UNARY_ROUND_BF16)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: unknown op %d", fn, (int)op);
    DT_CHECK(dt__cpu_check_fp(fn, "out", out, true));
    DT_CHECK(dt__cpu_check_fp(fn, "x", x, false));
    DT_CHECK(dt__cpu_check_same_shape(fn, "x", x, out));
    const dt_tensor *in[1] = {x};
    const int64_t *st[1] = {x->strides};
    un_ctx c = {op, alpha};
    return dt__cpu_ew_run(out, 1, in, st, un_block, &c);
}

DT_CPU_CLONES
static void gelu_bwd_run(int64_t n, const float *restrict x, int64_t sx, const float *restrict gy,
                         int64_t sg, float *restrict o)
{
    if (sx == 1 && sg == 1) {
        for (int64_t i = 0; i < n; i++)
            o[i] = gy[i] * dt__gelu_tanh_grad(x[i]);
    } else {
        for (int64_t i = 0; i < n; i++)
            o[i] = gy[i * sg] * dt__gelu_tanh_grad(x[i * sx]);
    }
}

DT_CPU_CLONES
static void relu_bwd_run(int64_t n, const float *restrict x, int64_t sx, const float *restrict gy,
                         int64_t sg, float *restrict o)
{
    if (sx == 1 && sg == 1) {
        for (int64_t i = 0; i < n; i++) {
            float g = gy[i]; /* unconditional load: lets the loop vectorise */
            o[i] = x[i] > 0.0f ? g : 0.0f;
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            float g = gy[i * sg];
            o[i] = x[i * sx] > 0.0f ? g : 0.0f;
        }
    }
}

static void un_bwd_block(const void *ctx, int64_t n, const float *const *in, const int64_t *st,
                         float *o)
{
    if (*(const dt_unary_op *)ctx == DT_UNARY_GELU_TANH)
        gelu_bwd_run(n, in[0], st[0], in[1], st[1], o);
    else
        relu_bwd_run(n, in[0], st[0], in[1], st[1], o);
}

dt_status dt__cpu_unary_backward(dt_unary_op op, const dt_tensor *x, const dt_tensor *gy,
                                 dt_tensor *gx)
{
    const char *fn = "dt_kernel_unary_backward";
    if (op != DT_UNARY_GELU_TANH && op != DT_UNARY_RELU)
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: op %d has no fused backward (compose it)", fn,
                      (int)op);
    DT_CHECK(dt__cpu_check_fp(fn, "gx", gx, true));
    DT_CHECK(dt__cpu_check_fp(fn, "x", x, false));
    DT_CHECK(dt__cpu_check_fp(fn, "gy", gy, false));
    DT_CHECK(dt__cpu_check_same_shape(fn, "x", x, gx));
    DT_CHECK(dt__cpu_check_same_shape(fn, "gy", gy, gx));
    const dt_tensor *in[2] = {x, gy};
    const int64_t *st[2] = {x->strides, gy->strides};
    return dt__cpu_ew_run(gx, 2, in, st, un_bwd_block, &op);
}
