/* Table entries for the fused optimizer steps (semantics in kernels/cpu/optim_cpu.c). */
#include <math.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/kernels_cuda.h"

static dt_status optim_check(const char *fn, const char *what, const dt_tensor *t,
                             const dt_tensor *p)
{
    DT_CHECK(dt__cuda_check_out(fn, what, t, DT_DTYPE_F32));
    return dt__cuda_check_numel(fn, what, t, dt__shape_numel(p->ndim, p->shape));
}

dt_status dt__cuda_sgd_step(dt_tensor *p, const dt_tensor *g, dt_tensor *momentum_buf, float lr,
                            float momentum, float weight_decay)
{
    const char *fn = "dt_kernel_sgd_step";
    DT_CHECK(dt__cuda_check_out(fn, "p", p, DT_DTYPE_F32));
    DT_CHECK(optim_check(fn, "g", g, p));
    if (momentum != 0.0f) {
        if (momentum_buf == NULL)
            return DT_ERR(DT_ERR_INVALID_ARG, "%s: momentum %g needs a momentum buffer", fn,
                          (double)momentum);
        DT_CHECK(optim_check(fn, "momentum_buf", momentum_buf, p));
    }
    DT_CHECK(dt__cuda_use_device(fn, p));
    DT_CUDA_CHECK(dt__cu_sgd_step(dt__cuda_ptr(p), dt__cuda_ptr(g),
                                  momentum != 0.0f ? dt__cuda_ptr(momentum_buf) : NULL,
                                  dt__shape_numel(p->ndim, p->shape), lr, momentum, weight_decay,
                                  DT_CUDA_STREAM),
                  fn);
    return DT_OK;
}

dt_status dt__cuda_adamw_step(dt_tensor *p, const dt_tensor *g, dt_tensor *m, dt_tensor *v,
                              float lr, float beta1, float beta2, float eps, float weight_decay,
                              int64_t step)
{
    const char *fn = "dt_kernel_adamw_step";
    if (step < 1)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: step %lld, must be >= 1", fn, (long long)step);
    DT_CHECK(dt__cuda_check_out(fn, "p", p, DT_DTYPE_F32));
    DT_CHECK(optim_check(fn, "g", g, p));
    DT_CHECK(optim_check(fn, "m", m, p));
    DT_CHECK(optim_check(fn, "v", v, p));
    DT_CHECK(dt__cuda_use_device(fn, p));
    /* the bias corrections exactly as the CPU reference computes them */
    float bc1 = 1.0f - powf(beta1, (float)step);
    float bc2 = 1.0f - powf(beta2, (float)step);
    DT_CUDA_CHECK(dt__cu_adamw_step(dt__cuda_ptr(p), dt__cuda_ptr(g), dt__cuda_ptr(m),
                                    dt__cuda_ptr(v), dt__shape_numel(p->ndim, p->shape), lr, beta1,
                                    beta2, eps, weight_decay, bc1, bc2, DT_CUDA_STREAM),
                  fn);
    return DT_OK;
}
