/*
 * 16-wide float helpers in GCC vector extensions for the hot row loops
 * (softmax, GELU). Written as explicit vectors because gcc 12 auto-vectorises
 * the scalar forms poorly there (lane accumulators spilled to the stack, the
 * row max as one dependency chain, a float-to-int conversion and NaN guard in
 * every exp). Used from DT_V4_FN functions only (see below). Vectors go in
 * by pointer, never by value: gcc
 * notes a psabi change for 64-byte vector parameters without AVX-512, and the
 * helpers inline away either way.
 */
#ifndef DT_KERNELS_CPU_VMATH_H
#define DT_KERNELS_CPU_VMATH_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"

/* returning a 64-byte vector: the helpers are always_inline, so no v16f
 * crosses a real call and the psabi warning does not apply */
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float dt__v16f __attribute__((vector_size(64)));
typedef int32_t dt__v16i __attribute__((vector_size(64)));
typedef uint32_t dt__v16u __attribute__((vector_size(64)));

#define DT_VINL static inline __attribute__((always_inline))

/*
 * The 16-wide code is used only where 16 lanes are native (AVX-512: one zmm):
 * gcc 12 lowers the float comparisons of a 64-byte vector to scalar code on
 * AVX2 and SSE2, which made those clones 2x slower than their auto-vectorised
 * scalar loops. So a caller puts the vector loop in a DT_V4_FN function and
 * calls it when dt__v4_ok(), else keeps its scalar loop.
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define DT_V4    1
#define DT_V4_FN __attribute__((target("arch=x86-64-v4"), noinline))
DT_VINL bool dt__v4_ok(void)
{
    return __builtin_cpu_supports("x86-64-v4");
}
#else
#define DT_V4 0
#endif

/* m ? a : b per lane; m from a vector comparison (all ones or zero) */
#define DT_VSEL(m, a, b) ((dt__v16f)(((m) & (dt__v16i)(a)) | (~(m) & (dt__v16i)(b))))

DT_VINL dt__v16f dt__vld(const float *p)
{
    dt__v16f v;
    memcpy(&v, p, sizeof(v)); /* unaligned load */
    return v;
}

DT_VINL dt__v16f dt__vset1(float a)
{
    return (dt__v16f){0} + a; /* scalar operand: a broadcast */
}

DT_VINL float dt__vhsum(const dt__v16f *v)
{
    float s = 0.0f;
    for (int l = 0; l < 16; l++)
        s += (*v)[l];
    return s;
}

/* NaN lanes are skipped, as dt__cpu_row_max does */
DT_VINL float dt__vhmax(const dt__v16f *v)
{
    float m = (*v)[0];
    for (int l = 1; l < 16; l++)
        m = (*v)[l] > m ? (*v)[l] : m;
    return m;
}

/*
 * dt__expf_core on 16 lanes: the same Cody-Waite reduction and degree-6
 * polynomial, but 2^n is built from the bits of the rounding sum itself
 * (x log2e + 1.5 * 2^23 holds n in its low mantissa bits; the << 23 drops the
 * rest), so no float-to-int conversion and no NaN guard (NaN stays NaN through
 * p). clamp: clamp x to [-87.34, 88] first (NaN passes); without it the caller
 * guarantees x in that range or replaces the lanes outside it.
 */
DT_VINL dt__v16f dt__vexp(const dt__v16f *xp, bool clamp)
{
    dt__v16f x = *xp;
    if (clamp) {
        x = DT_VSEL(x < -87.33654f, dt__vset1(-87.33654f), x);
        x = DT_VSEL(x > 88.0f, dt__vset1(88.0f), x);
    }
    dt__v16f nb = x * 1.44269504088896341f + 12582912.0f;
    dt__v16f n = nb - 12582912.0f;
    dt__v16f r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    dt__v16f p = dt__vset1(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    dt__v16u e = ((dt__v16u)nb + 127u) << 23;
    return p * (dt__v16f)e;
}

/* dt__gelu_tanh on 16 lanes: 0.5 x (1 + tanh(u)) with tanh(u) = 1 - 2q,
 * q = 1 / (exp(2u) + 1), is x - x q: one fma instead of four ops, and the
 * rounding profile of PyTorch's tanh form (q's error near -1, nothing more) */
DT_VINL dt__v16f dt__vgelu_tanh(const float *p)
{
    const float k2 = 2.0f * 0.7978845608028654f;
    dt__v16f x = dt__vld(p);
    dt__v16f u2 = k2 * (x + 0.044715f * x * x * x);
    dt__v16f q = 1.0f / (dt__vexp(&u2, true) + 1.0f);
    return x - x * q;
}

/* the same as one lane of dt__vgelu_tanh, for tails and strided runs (so a
 * result does not depend on where in the tensor its element sits) */
DT_VINL float dt__gelu_tanh_xq(float x)
{
    const float k2 = 2.0f * 0.7978845608028654f;
    float q = 1.0f / (dt__expf_core(k2 * (x + 0.044715f * x * x * x)) + 1.0f);
    return x - x * q;
}

#undef DT_VINL

#endif
