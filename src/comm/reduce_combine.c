/*
 * Element-wise reductions used by the collective algorithms: sum, max, min,
 * prod on f32, f64, f16, bf16, i32, i64 (avg = sum, then divide once at the
 * end). Half types are widened to f32, combined, and rounded back once per
 * step, as NCCL and gloo do. dt__reduce3 writes op(x, y) to a third buffer
 * (a receive folded straight out of the transport's window); every loop is
 * compiled for AVX-512, AVX2 and baseline x86-64 (DT_CPU_CLONES).
 */
#include "comm/comm_impl.h"

#include <stdint.h>
#include <string.h>

#include "core/bf16.h"
#include "core/clones.h"

/* dst[i] = EXPR(a = x[i], b = y[i]). dt__reduce passes x = dst: the same
 * pointer, which the compiler sees, so no overlap check sends it to a
 * scalar loop. */
#define DT_REDUCE_LOOP(T, dst, x, y, n, EXPR)                                                      \
    do {                                                                                           \
        T *d_ = (T *)(dst);                                                                        \
        const T *x_ = (const T *)(x), *y_ = (const T *)(y);                                        \
        for (size_t i_ = 0; i_ < (n); i_++) {                                                      \
            T a = x_[i_], b = y_[i_];                                                              \
            d_[i_] = (EXPR);                                                                       \
        }                                                                                          \
    } while (0)

#define DT_REDUCE_NATIVE(T, dst, x, y, n, op)                                                      \
    do {                                                                                           \
        switch (op) {                                                                              \
        case DT_REDUCE_OP_MAX:                                                                     \
            DT_REDUCE_LOOP(T, dst, x, y, n, a > b ? a : b);                                        \
            break;                                                                                 \
        case DT_REDUCE_OP_MIN:                                                                     \
            DT_REDUCE_LOOP(T, dst, x, y, n, a < b ? a : b);                                        \
            break;                                                                                 \
        case DT_REDUCE_OP_PROD:                                                                    \
            DT_REDUCE_LOOP(T, dst, x, y, n, a *b);                                                 \
            break;                                                                                 \
        default:                                                                                   \
            DT_REDUCE_LOOP(T, dst, x, y, n, a + b);                                                \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

/* Wrapping integer arithmetic (no signed-overflow UB on user data). */
#define DT_REDUCE_INT(T, UT, dst, x, y, n, op)                                                     \
    do {                                                                                           \
        switch (op) {                                                                              \
        case DT_REDUCE_OP_MAX:                                                                     \
            DT_REDUCE_LOOP(T, dst, x, y, n, a > b ? a : b);                                        \
            break;                                                                                 \
        case DT_REDUCE_OP_MIN:                                                                     \
            DT_REDUCE_LOOP(T, dst, x, y, n, a < b ? a : b);                                        \
            break;                                                                                 \
        case DT_REDUCE_OP_PROD:                                                                    \
            DT_REDUCE_LOOP(T, dst, x, y, n, (T)((UT)a * (UT)b));                                   \
            break;                                                                                 \
        default:                                                                                   \
            DT_REDUCE_LOOP(T, dst, x, y, n, (T)((UT)a + (UT)b));                                   \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

static inline float combine_f32(float a, float b, dt_reduce_op op)
{
    switch (op) {
    case DT_REDUCE_OP_MAX:
        return a > b ? a : b;
    case DT_REDUCE_OP_MIN:
        return a < b ? a : b;
    case DT_REDUCE_OP_PROD:
        return a * b;
    default:
        return a + b;
    }
}

static inline __attribute__((always_inline)) void
reduce_half(uint16_t *d, const uint16_t *x, const uint16_t *s, size_t n, bool bf16, dt_reduce_op op)
{
#define DT_BF16_LOOP(EXPR)                                                                         \
    for (size_t i = 0; i < n; i++) {                                                               \
        float a = dt__bf16_to_f32(x[i]), b = dt__bf16_to_f32(s[i]);                                \
        d[i] = dt__bf16_from_f32(EXPR);                                                            \
    }
    if (bf16) { /* one loop per op so each one vectorises */
        switch (op) {
        case DT_REDUCE_OP_MAX:
            DT_BF16_LOOP(a > b ? a : b);
            break;
        case DT_REDUCE_OP_MIN:
            DT_BF16_LOOP(a < b ? a : b);
            break;
        case DT_REDUCE_OP_PROD:
            DT_BF16_LOOP(a * b);
            break;
        default:
            DT_BF16_LOOP(a + b);
            break;
        }
        return;
    }
#undef DT_BF16_LOOP
    for (size_t i = 0; i < n; i++)
        d[i] = dt_f32_to_f16(combine_f32(dt_f16_to_f32(x[i]), dt_f16_to_f32(s[i]), op));
}

bool dt__reduce_supported(dt_dtype dtype, dt_reduce_op op)
{
    if ((int)op < 0 || op >= DT_REDUCE_OP_COUNT)
        return false;
    switch (dtype) {
    case DT_DTYPE_F32:
    case DT_DTYPE_F64:
    case DT_DTYPE_F16:
    case DT_DTYPE_BF16:
    case DT_DTYPE_I32:
    case DT_DTYPE_I64:
        return true;
    default:
        return false;
    }
}

/* The dtype switch of dt__reduce and dt__reduce3 (each its own loops). */
#define DT_REDUCE_DTYPES(dst, x, y, n, dtype, op)                                                  \
    do {                                                                                           \
        switch (dtype) {                                                                           \
        case DT_DTYPE_F32:                                                                         \
            DT_REDUCE_NATIVE(float, dst, x, y, n, op);                                             \
            break;                                                                                 \
        case DT_DTYPE_F64:                                                                         \
            DT_REDUCE_NATIVE(double, dst, x, y, n, op);                                            \
            break;                                                                                 \
        case DT_DTYPE_I32:                                                                         \
            DT_REDUCE_INT(int32_t, uint32_t, dst, x, y, n, op);                                    \
            break;                                                                                 \
        case DT_DTYPE_I64:                                                                         \
            DT_REDUCE_INT(int64_t, uint64_t, dst, x, y, n, op);                                    \
            break;                                                                                 \
        case DT_DTYPE_BF16:                                                                        \
            reduce_half(dst, x, y, n, true, op);                                                   \
            break;                                                                                 \
        case DT_DTYPE_F16:                                                                         \
            reduce_half(dst, x, y, n, false, op);                                                  \
            break;                                                                                 \
        default:                                                                                   \
            break; /* validated by the dispatcher */                                               \
        }                                                                                          \
    } while (0)

/* static: a non-static target_clones function's ifunc ignores -fvisibility
 * and would be exported from libdtensor.so */
DT_CPU_CLONES
static void reduce2(void *dst, const void *src, size_t n, dt_dtype dtype, dt_reduce_op op)
{
    DT_REDUCE_DTYPES(dst, dst, src, n, dtype, op);
}

DT_CPU_CLONES
static void reduce3(void *dst, const void *x, const void *y, size_t n, dt_dtype dtype,
                    dt_reduce_op op)
{
    DT_REDUCE_DTYPES(dst, x, y, n, dtype, op);
}

void dt__reduce(void *dst, const void *src, size_t n, dt_dtype dtype, dt_reduce_op op)
{
    reduce2(dst, src, n, dtype, op);
}

void dt__reduce3(void *dst, const void *x, const void *y, size_t n, dt_dtype dtype, dt_reduce_op op)
{
    reduce3(dst, x, y, n, dtype, op);
}

void dt__reduce_divide(void *dst, size_t n, dt_dtype dtype, int divisor)
{
    switch (dtype) {
    case DT_DTYPE_F32: {
        float *d = dst;
        for (size_t i = 0; i < n; i++)
            d[i] /= (float)divisor;
        break;
    }
    case DT_DTYPE_F64: {
        double *d = dst;
        for (size_t i = 0; i < n; i++)
            d[i] /= (double)divisor;
        break;
    }
    case DT_DTYPE_I32: {
        int32_t *d = dst;
        for (size_t i = 0; i < n; i++)
            d[i] /= divisor;
        break;
    }
    case DT_DTYPE_I64: {
        int64_t *d = dst;
        for (size_t i = 0; i < n; i++)
            d[i] /= divisor;
        break;
    }
    case DT_DTYPE_BF16:
    case DT_DTYPE_F16: {
        uint16_t *d = dst;
        bool bf = (dtype == DT_DTYPE_BF16);
        for (size_t i = 0; i < n; i++) {
            float v = (bf ? dt_bf16_to_f32(d[i]) : dt_f16_to_f32(d[i])) / (float)divisor;
            d[i] = bf ? dt_f32_to_bf16(v) : dt_f32_to_f16(v);
        }
        break;
    }
    default:
        break;
    }
}
