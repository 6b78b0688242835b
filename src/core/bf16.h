/*
 * The one f32 <-> bf16 conversion, inline and branch-free so the loops that
 * call it vectorise (an out-of-line call per element was a fifth of a
 * bf16-autocast training step). dt_f32_to_bf16 / dt_bf16_to_f32 (dtype.c)
 * are these; the copies, the collectives' reductions and the CPU kernels'
 * bf16 loops call them directly.
 */
#ifndef DT_CORE_BF16_H
#define DT_CORE_BF16_H

#include <stdint.h>
#include <string.h>

/* x rounded to the nearest bf16, ties to even (overflow carries into inf);
 * a NaN keeps its sign and top payload bits and stays a NaN (quiet bit set
 * when the payload would vanish). */
static inline uint16_t dt__bf16_from_f32(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t t = u >> 16;
    uint32_t q = (t & 0x7fu) != 0 ? t : t | 0x40u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? q : r);
}

/* Exact: a bf16 is the top half of an f32. */
static inline float dt__bf16_to_f32(uint16_t x)
{
    uint32_t u = (uint32_t)x << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* dst[i] = src[i * s] widened, i < n (bf16.c, vectorised per ISA). */
void dt__bf16_load(float *dst, const uint16_t *src, int64_t n, int64_t s);
/* dst[i] = src[i] rounded to bf16 as dt__bf16_from_f32, i < n. */
void dt__bf16_store(uint16_t *dst, const float *src, int64_t n);

#endif
