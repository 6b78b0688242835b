/*
 * fill, copy and binary arithmetic with broadcasting. Strided and broadcast
 * operands go through the N-d iterator, which collapses contiguous dims; the
 * inner runs are specialised for unit / zero (broadcast scalar) strides so
 * gcc vectorises them. Single-threaded: measured at memory bandwidth on the
 * target machines (see bench/kernels), and ranks already share the cores.
 */
/* No FP-trap semantics: lets gcc if-convert the branch-free selects in the
 * loops below so they vectorise (must precede the includes: inline helpers). */
#pragma GCC optimize("no-trapping-math")
#include "kernels/cpu/cpu_internal.h"

/* Store @p v into element @p i of a @p dtype array. */
static void store_as(void *base, dt_dtype dtype, int64_t i, double v)
{
    switch (dtype) {
    case DT_DTYPE_F32:
        ((float *)base)[i] = (float)v;
        break;
    case DT_DTYPE_F64:
        ((double *)base)[i] = v;
        break;
    case DT_DTYPE_F16:
        ((uint16_t *)base)[i] = dt_f32_to_f16((float)v);
        break;
    case DT_DTYPE_BF16:
        ((uint16_t *)base)[i] = dt_f32_to_bf16((float)v);
        break;
    case DT_DTYPE_I32:
        ((int32_t *)base)[i] = (int32_t)v;
        break;
    case DT_DTYPE_I64:
        ((int64_t *)base)[i] = (int64_t)v;
        break;
    case DT_DTYPE_U16:
        ((uint16_t *)base)[i] = (uint16_t)v;
        break;
    case DT_DTYPE_U8:
        ((uint8_t *)base)[i] = (uint8_t)v;
        break;
    default:
        break;
    }
}

DT_CPU_CLONES
static void fill_f32(float *restrict o, int64_t n, int64_t s, float v)
{
    if (s == 1) {
        for (int64_t i = 0; i < n; i++)
            o[i] = v;
    } else {
        for (int64_t i = 0; i < n; i++)
            o[i * s] = v;
    }
}

dt_status dt__cpu_fill(dt_tensor *out, double value)
{
    DT_CHECK(dt__cpu_check_local("dt_kernel_fill", "out", out));
    if (dt_dtype_size(out->dtype) == 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_kernel_fill: invalid dtype %d", (int)out->dtype);
    const int64_t *st[1] = {out->strides};
    dt__nditer it;
    if (!dt__nditer_init(&it, out->ndim, out->shape, 1, st))
        return DT_OK;
    void *base = (char *)out->storage->data + out->offset * (int64_t)dt_dtype_size(out->dtype);
    do {
        if (out->dtype == DT_DTYPE_F32) {
            fill_f32((float *)base + it.off[0], it.inner_n, it.inner_stride[0], (float)value);
            continue;
        }
        for (int64_t i = 0; i < it.inner_n; i++)
            store_as(base, out->dtype, it.off[0] + i * it.inner_stride[0], value);
    } while (dt__nditer_next(&it));
    return DT_OK;
}

dt_status dt__cpu_copy(dt_tensor *dst, const dt_tensor *src)
{
    const char *fn = "dt_kernel_copy";
    DT_CHECK(dt__cpu_check_local(fn, "dst", dst));
    DT_CHECK(dt__cpu_check_local(fn, "src", src));
    DT_CHECK(dt__cpu_check_same_shape(fn, "src", src, dst));
    dt__host_copy(dst, src);
    return DT_OK;
}

/* One binary op on one value; `op` is a constant at every call site below. */
static inline __attribute__((always_inline)) float bin_apply(dt_binary_op op, float x, float y)
{
    switch (op) {
    case DT_BINARY_ADD:
        return x + y;
    case DT_BINARY_SUB:
        return x - y;
    case DT_BINARY_MUL:
        return x * y;
    case DT_BINARY_DIV:
        return x / y;
    }
    return 0.0f;
}

static inline __attribute__((always_inline)) void bin_run(dt_binary_op op, int64_t n,
                                                          const float *restrict a, int64_t sa,
                                                          const float *restrict b, int64_t sb,
                                                          float *restrict o)
{
    if (sa == 1 && sb == 1) {
        for (int64_t i = 0; i < n; i++)
            o[i] = bin_apply(op, a[i], b[i]);
    } else if (sa == 1 && sb == 0) {
        const float y = b[0];
        for (int64_t i = 0; i < n; i++)
            o[i] = bin_apply(op, a[i], y);
    } else if (sa == 0 && sb == 1) {
        const float x = a[0];
        for (int64_t i = 0; i < n; i++)
            o[i] = bin_apply(op, x, b[i]);
    } else {
        for (int64_t i = 0; i < n; i++)
            o[i] = bin_apply(op, a[i * sa], b[i * sb]);
    }
}

DT_CPU_CLONES
static void bin_dispatch(dt_binary_op op, int64_t n, const float *a, int64_t sa, const float *b,
                         int64_t sb, float *o)
{
/* one case per op: each loop is compiled with its op constant, so it vectorises */
#define BIN_CASE(OP)                                                                               \
    case OP:                                                                                       \
        bin_run(OP, n, a, sa, b, sb, o);                                                           \
        break
    switch (op) {
        BIN_CASE(DT_BINARY_ADD);
        BIN_CASE(DT_BINARY_SUB);
        BIN_CASE(DT_BINARY_MUL);
        BIN_CASE(DT_BINARY_DIV);
    }
#undef BIN_CASE
}

static void bin_block(const void *ctx, int64_t n, const float *const *in, const int64_t *st,
                      float *o)
{
    bin_dispatch(*(const dt_binary_op *)ctx, n, in[0], st[0], in[1], st[1], o);
}

dt_status dt__cpu_binary(dt_binary_op op, const dt_tensor *a, const dt_tensor *b, dt_tensor *out)
{
    const char *fn = "dt_kernel_binary";
    if ((unsigned)op > DT_BINARY_DIV)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: unknown op %d", fn, (int)op);
    DT_CHECK(dt__cpu_check_fp(fn, "out", out, true));
    DT_CHECK(dt__cpu_check_fp(fn, "a", a, false));
    DT_CHECK(dt__cpu_check_fp(fn, "b", b, false));
    int64_t sa[DT_MAX_DIMS], sb[DT_MAX_DIMS];
    DT_CHECK(dt__cpu_broadcast_strides(fn, "a", a, out->ndim, out->shape, sa));
    DT_CHECK(dt__cpu_broadcast_strides(fn, "b", b, out->ndim, out->shape, sb));
    const dt_tensor *in[2] = {a, b};
    const int64_t *st[2] = {sa, sb};
    return dt__cpu_ew_run(out, 2, in, st, bin_block, &op);
}
