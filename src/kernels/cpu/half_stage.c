/*
 * bf16 operands read natively by the CPU kernels: a bf16 run is converted to
 * f32 in a block small enough to stay in L1 (element-wise ops) or one row
 * (row kernels), the kernel's own f32 loop runs on it, and a bf16 output is
 * rounded once from its f32 result. The loop body is the f32 one, so the
 * results are the f32 kernel's on the widened values bit for bit (what
 * bf16_widen.c gives), without copying whole tensors through memory.
 */
/* No FP-trap semantics: lets gcc if-convert the branch-free selects in the
 * loops below so they vectorise (must precede the includes: inline helpers). */
#pragma GCC optimize("no-trapping-math")
#include <stdlib.h>

#include "core/bf16.h"
#include "kernels/cpu/cpu_internal.h"

bool dt__cpu_half_native = true;

dt_status dt__cpu_check_fp(const char *fn, const char *what, const dt_tensor *t, bool out)
{
    DT_CHECK(dt__cpu_check_local(fn, what, t));
    if (t->dtype != DT_DTYPE_F32 && t->dtype != DT_DTYPE_BF16)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s has dtype %s, expected f32 or bf16", fn, what,
                      dt_dtype_name(t->dtype));
    if (out && !dt_tensor_is_contiguous(t))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: output %s is not contiguous", fn, what);
    return DT_OK;
}

static uint16_t *bf16_at(const dt_tensor *t, int64_t off)
{
    return (uint16_t *)t->storage->data + t->offset + off;
}

/* Elements of an inner run per block: 2 KiB of f32 per operand. */
enum { EW_BLOCK = 512 };

/* @p n elements of @p t from element @p off with stride *s as f32: t's own
 * (f32) or converted into @p buf (bf16; a broadcast run, *s == 0, is one
 * element and keeps stride 0, else the block gets stride 1). */
static const float *ew_in(const dt_tensor *t, int64_t off, int64_t n, int64_t *s, float *buf)
{
    if (t->dtype == DT_DTYPE_F32)
        return dt__f32(t) + off;
    dt__bf16_load(buf, bf16_at(t, off), *s == 0 ? 1 : n, *s);
    *s = *s != 0;
    return buf;
}

dt_status dt__cpu_ew_run(dt_tensor *out, int nin, const dt_tensor *const *in,
                         const int64_t *const *in_strides, dt__cpu_ew_fn fn, const void *ctx)
{
    const int64_t *st[DT_NDITER_MAX_OPS] = {out->strides};
    bool all_f32 = out->dtype == DT_DTYPE_F32;
    for (int k = 0; k < nin; k++) {
        st[k + 1] = in_strides[k];
        all_f32 = all_f32 && in[k]->dtype == DT_DTYPE_F32;
    }
    dt__nditer it;
    if (!dt__nditer_init(&it, out->ndim, out->shape, nin + 1, st))
        return DT_OK;
    float buf[DT_NDITER_MAX_OPS][EW_BLOCK];
    do { /* all f32: the whole run at once, as before (no block boundaries) */
        int64_t block = all_f32 ? it.inner_n : EW_BLOCK;
        for (int64_t c = 0; c < it.inner_n; c += block) {
            int64_t n = it.inner_n - c < block ? it.inner_n - c : block;
            const float *p[DT_NDITER_MAX_OPS - 1];
            int64_t s[DT_NDITER_MAX_OPS - 1];
            for (int k = 0; k < nin; k++) {
                s[k] = it.inner_stride[k + 1];
                p[k] = ew_in(in[k], it.off[k + 1] + c * s[k], n, &s[k], buf[k]);
            }
            /* out is contiguous: its inner runs have unit stride */
            bool f32_out = out->dtype == DT_DTYPE_F32;
            float *o = f32_out ? dt__f32(out) + it.off[0] + c : buf[nin];
            fn(ctx, n, p, s, o);
            if (!f32_out)
                dt__bf16_store(bf16_at(out, it.off[0] + c), o, n);
        }
    } while (dt__nditer_next(&it));
    return DT_OK;
}

const float *dt__cpu_row_in(const void *data, dt_dtype dtype, int64_t off, int64_t n, float *buf)
{
    if (dtype == DT_DTYPE_F32)
        return (const float *)data + off;
    dt__bf16_load(buf, (const uint16_t *)data + off, n, 1);
    return buf;
}

float *dt__cpu_row_out(dt_tensor *t, int64_t off, float *buf)
{
    return t->dtype == DT_DTYPE_F32 ? dt__f32(t) + off : buf;
}

void dt__cpu_row_done(dt_tensor *t, int64_t off, const float *buf, int64_t n)
{
    if (t->dtype == DT_DTYPE_BF16)
        dt__bf16_store(bf16_at(t, off), buf, n);
}

dt_status dt__cpu_scratch(const char *fn, bool need, int64_t n, int k, float **rows)
{
    float *buf = need ? malloc((size_t)(n * k > 0 ? n * k : 1) * sizeof(float)) : NULL;
    if (need && buf == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory for %lld floats of scratch", fn,
                      (long long)(n * k));
    for (int j = 0; j < k; j++)
        rows[j] = need ? buf + j * n : NULL;
    return DT_OK;
}
