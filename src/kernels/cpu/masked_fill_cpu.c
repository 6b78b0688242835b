/* out = mask ? value : x, with a u8 mask broadcast to x's shape. */
/* No FP-trap semantics: lets gcc if-convert the branch-free selects in the
 * loops below so they vectorise (must precede the includes: inline helpers). */
#pragma GCC optimize("no-trapping-math")
#include "kernels/cpu/cpu_internal.h"

DT_CPU_CLONES
static void mf_run(int64_t n, const float *restrict x, int64_t sx, const uint8_t *restrict m,
                   int64_t sm, float value, float *restrict o)
{
    if (sx == 1 && sm == 1) {
        for (int64_t i = 0; i < n; i++) {
            float v = x[i]; /* unconditional load: lets the loop vectorise */
            o[i] = m[i] ? value : v;
        }
    } else if (sx == 1 && sm == 0) {
        if (m[0]) {
            for (int64_t i = 0; i < n; i++)
                o[i] = value;
        } else {
            for (int64_t i = 0; i < n; i++)
                o[i] = x[i];
        }
    } else {
        for (int64_t i = 0; i < n; i++)
            o[i] = m[i * sm] ? value : x[i * sx];
    }
}

dt_status dt__cpu_masked_fill(const dt_tensor *x, const dt_tensor *mask, float value,
                              dt_tensor *out)
{
    const char *fn = "dt_kernel_masked_fill";
    DT_CHECK(dt__cpu_check_out(fn, "out", out, DT_DTYPE_F32));
    DT_CHECK(dt__cpu_check(fn, "x", x, DT_DTYPE_F32));
    DT_CHECK(dt__cpu_check(fn, "mask", mask, DT_DTYPE_U8));
    DT_CHECK(dt__cpu_check_same_shape(fn, "x", x, out));
    int64_t sm[DT_MAX_DIMS];
    DT_CHECK(dt__cpu_broadcast_strides(fn, "mask", mask, out->ndim, out->shape, sm));
    const int64_t *st[3] = {out->strides, x->strides, sm};
    dt__nditer it;
    if (!dt__nditer_init(&it, out->ndim, out->shape, 3, st))
        return DT_OK;
    float *o = dt__f32(out);
    const float *px = dt__f32(x);
    const uint8_t *pm = (const uint8_t *)mask->storage->data + mask->offset;
    do {
        mf_run(it.inner_n, px + it.off[1], it.inner_stride[1], pm + it.off[2], it.inner_stride[2],
               value, o + it.off[0]);
    } while (dt__nditer_next(&it));
    return DT_OK;
}
