/* Fused optimizer steps on contiguous f32 tensors (PyTorch SGD and AdamW semantics). */
#include "kernels/cuda/cuda_device.cuh"

using namespace dtcu;

namespace
{

/* d = g + wd * p; buf = momentum * buf + d (when momentum != 0); p -= lr * buf|d */
__global__ void sgd_kernel(float *p, const float *g, float *buf, int64_t n, float lr,
                           float momentum, float wd)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float d = g[i] + wd * p[i];
        if (momentum != 0.0f && buf != nullptr) {
            d = momentum * buf[i] + d;
            buf[i] = d;
        }
        p[i] -= lr * d;
    }
}

/* Decoupled decay, then Adam with bias corrections bc1 = 1 - b1^t, bc2 = 1 - b2^t. */
__global__ void adamw_kernel(float *p, const float *g, float *m, float *v, int64_t n, float lr,
                             float b1, float b2, float eps, float wd, float bc1, float bc2)
{
    float step_size = lr / bc1;
    float bc2_sqrt = sqrtf(bc2), decay = 1.0f - lr * wd;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float gi = g[i];
        float pi = p[i] * decay;
        float mi = m[i] + (gi - m[i]) * (1.0f - b1); /* PyTorch's lerp form */
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
    }
}

} // namespace

extern "C" cudaError_t dt__cu_sgd_step(float *p, const float *g, float *buf, int64_t n, float lr,
                                       float momentum, float weight_decay, cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    sgd_kernel<<<grid_for(n), kThreads, 0, stream>>>(p, g, buf, n, lr, momentum, weight_decay);
    return cudaGetLastError();
}

extern "C" cudaError_t dt__cu_adamw_step(float *p, const float *g, float *m, float *v, int64_t n,
                                         float lr, float beta1, float beta2, float eps,
                                         float weight_decay, float bc1, float bc2,
                                         cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    adamw_kernel<<<grid_for(n), kThreads, 0, stream>>>(p, g, m, v, n, lr, beta1, beta2, eps,
                                                       weight_decay, bc1, bc2);
    return cudaGetLastError();
}
