/*
 * Runs of f32 <-> bf16: the tensor copies (tensor_copy.c) and the CPU
 * kernels' native bf16 loops (kernels/cpu/half_stage.c) both convert
 * through these. The multi-versioned loops are static and reached through
 * plain functions (gcc exports the ifunc resolver of an extern one whatever
 * its visibility).
 */
#include "core/bf16.h"

#include "core/clones.h"

DT_CPU_CLONES
static void load_run(float *restrict dst, const uint16_t *restrict src, int64_t n, int64_t s)
{
    if (s == 1) {
        for (int64_t i = 0; i < n; i++)
            dst[i] = dt__bf16_to_f32(src[i]);
    } else {
        for (int64_t i = 0; i < n; i++)
            dst[i] = dt__bf16_to_f32(src[i * s]);
    }
}

DT_CPU_CLONES
static void store_run(uint16_t *restrict dst, const float *restrict src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = dt__bf16_from_f32(src[i]);
}

void dt__bf16_load(float *dst, const uint16_t *src, int64_t n, int64_t s)
{
    load_run(dst, src, n, s);
}

void dt__bf16_store(uint16_t *dst, const float *src, int64_t n)
{
    store_run(dst, src, n);
}
