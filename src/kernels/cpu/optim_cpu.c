/*
 * Fused optimizer steps on contiguous f32 tensors, with PyTorch's semantics
 * and order of operations:
 *   SGD:   g' = g + wd p; buf = momentum buf + g' (buf starts at 0, so the
 *          first step gives buf = g' as PyTorch's clone does); p -= lr buf.
 *   AdamW: p *= 1 - lr wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
 *          p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps), bc = 1 - b^step.
 */
/* No FP-trap semantics: lets gcc if-convert the branch-free selects in the
 * loops below so they vectorise (must precede the includes: inline helpers). */
#pragma GCC optimize("no-trapping-math")
#include "kernels/cpu/cpu_internal.h"

static dt_status optim_check(const char *fn, const char *what, const dt_tensor *t,
                             const dt_tensor *p)
{
    DT_CHECK(dt__cpu_check_out(fn, what, t, DT_DTYPE_F32));
    if (dt_tensor_numel(t) != dt_tensor_numel(p))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s has %lld elements, param has %lld", fn, what,
                      (long long)dt_tensor_numel(t), (long long)dt_tensor_numel(p));
    return DT_OK;
}

dt_status dt__cpu_sgd_step(dt_tensor *p, const dt_tensor *g, dt_tensor *momentum_buf, float lr,
                           float momentum, float weight_decay)
{
    const char *fn = "dt_kernel_sgd_step";
    DT_CHECK(optim_check(fn, "p", p, p));
    DT_CHECK(optim_check(fn, "g", g, p));
    if (momentum != 0.0f) {
        if (momentum_buf == NULL)
            return DT_ERR(DT_ERR_INVALID_ARG, "%s: momentum %g needs a momentum buffer", fn,
                          (double)momentum);
        DT_CHECK(optim_check(fn, "momentum_buf", momentum_buf, p));
    }
    int64_t n = dt_tensor_numel(p);
    float *restrict pp = dt__f32(p);
    const float *restrict pg = dt__f32(g);
    if (momentum == 0.0f) {
        for (int64_t i = 0; i < n; i++)
            pp[i] -= lr * (pg[i] + weight_decay * pp[i]);
        return DT_OK;
    }
    float *restrict pb = dt__f32(momentum_buf);
    for (int64_t i = 0; i < n; i++) {
        pb[i] = momentum * pb[i] + (pg[i] + weight_decay * pp[i]);
        pp[i] -= lr * pb[i];
    }
    return DT_OK;
}

DT_CPU_CLONES
static void adamw_run(int64_t n, float *restrict pp, const float *restrict pg, float *restrict pm,
                      float *restrict pv, float beta1, float beta2, float eps, float step_size,
                      float bc2_sqrt, float decay)
{
    for (int64_t i = 0; i < n; i++) {
        pp[i] *= decay;
        pm[i] += (pg[i] - pm[i]) * (1.0f - beta1); /* PyTorch's lerp form */
        pv[i] = beta2 * pv[i] + (1.0f - beta2) * pg[i] * pg[i];
        float denom = sqrtf(pv[i]) / bc2_sqrt + eps;
        pp[i] -= step_size * pm[i] / denom;
    }
}

dt_status dt__cpu_adamw_step(dt_tensor *p, const dt_tensor *g, dt_tensor *m, dt_tensor *v, float lr,
                             float beta1, float beta2, float eps, float weight_decay, int64_t step)
{
    const char *fn = "dt_kernel_adamw_step";
    if (step < 1)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: step %lld, must be >= 1", fn, (long long)step);
    DT_CHECK(optim_check(fn, "p", p, p));
    DT_CHECK(optim_check(fn, "g", g, p));
    DT_CHECK(optim_check(fn, "m", m, p));
    DT_CHECK(optim_check(fn, "v", v, p));
    int64_t n = dt_tensor_numel(p);
    float bc1 = 1.0f - powf(beta1, (float)step);
    float bc2 = 1.0f - powf(beta2, (float)step);
    float step_size = lr / bc1, bc2_sqrt = sqrtf(bc2), decay = 1.0f - lr * weight_decay;
    adamw_run(n, dt__f32(p), dt__f32(g), dt__f32(m), dt__f32(v), beta1, beta2, eps, step_size,
              bc2_sqrt, decay);
    return DT_OK;
}

dt_status dt__cpu_sum_squares(const dt_tensor *x, double *out)
{
    const char *fn = "dt_kernel_sum_squares";
    DT_CHECK(dt__cpu_check(fn, "x", x, DT_DTYPE_F32));
    if (out == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: out is NULL", fn);
    dt_tensor *tx = NULL;
    const void *xd = NULL;
    double s = 0.0;
    if (dt_tensor_numel(x) > 0) {
        DT_CHECK(dt__cpu_contig(x, &tx, &xd));
        s = dt__cpu_row_sum_sq_f64(xd, dt_tensor_numel(x));
        dt_tensor_release(tx);
    }
    *out = s;
    return DT_OK;
}
