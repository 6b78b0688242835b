/* Index-driven kernels: embedding (vocabulary shard) and cross entropy, fwd/bwd. */
#include "kernels/cuda/cuda_device.cuh"

using namespace dtcu;

namespace
{

__global__ void embedding_kernel(const float *w, int64_t w_rows, int64_t w_ld, int64_t dim,
                                 const void *ids, int idt, int64_t n, int64_t vocab_start,
                                 float *out)
{
    int64_t total = n * dim;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = e / dim, d = e - i * dim;
        int64_t row = load_as_int(ids, idt, i) - vocab_start;
        out[e] = (row >= 0 && row < w_rows) ? w[row * w_ld + d] : 0.0f;
    }
}

__global__ void embedding_backward_kernel(const void *ids, int idt, int64_t n, const float *gy,
                                          int64_t dim, int64_t vocab_start, float *gw,
                                          int64_t w_rows)
{
    int64_t total = n * dim;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = e / dim, d = e - i * dim;
        int64_t row = load_as_int(ids, idt, i) - vocab_start;
        if (row >= 0 && row < w_rows)
            atomicAdd(&gw[row * dim + d], gy[e]);
    }
}

/* log(sum(exp(x))) of one row, every thread of the block gets it. */
__device__ float row_lse(const float *xr, int64_t cols, float *sh)
{
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        m = fmaxf(m, xr[j]);
    m = block_max(m, sh);
    if (m == -INFINITY || m == INFINITY)
        return m;
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        s += expf(xr[j] - m);
    s = block_sum(s, sh);
    return m + logf(s);
}

__global__ void cross_entropy_kernel(const float *logits, int64_t rows, int64_t cols,
                                     const void *targets, int tdt, int64_t ignore, float *loss,
                                     float *lse_out, int *bad)
{
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = logits + r * cols;
        float lse = row_lse(xr, cols, sh);
        if (threadIdx.x != 0)
            continue;
        int64_t t = load_as_int(targets, tdt, r);
        if (lse_out != nullptr)
            lse_out[r] = lse;
        float l;
        if (t == ignore) {
            l = 0.0f;
        } else if (t < 0 || t >= cols) {
            l = NAN;
            if (bad != nullptr)
                atomicCAS(bad, 0, (int)(r < 0x7ffffffe ? r + 1 : 0x7fffffff));
        } else {
            l = lse - xr[t];
        }
        if (loss != nullptr)
            loss[r] = l;
    }
}

__global__ void check_targets_kernel(const void *targets, int tdt, int64_t rows, int64_t cols,
                                     int64_t ignore, unsigned long long *bad)
{
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows;
         r += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = load_as_int(targets, tdt, r);
        if (t != ignore && (t < 0 || t >= cols))
            atomicMin(bad, (unsigned long long)r);
    }
}

__global__ void cross_entropy_backward_kernel(const float *logits, int64_t rows, int64_t cols,
                                              const void *targets, int tdt, int64_t ignore,
                                              const float *lse_in, const float *gloss,
                                              int64_t gstride, float *glogits)
{
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = logits + r * cols;
        float *gr = glogits + r * cols;
        int64_t t = load_as_int(targets, tdt, r);
        if (t == ignore || t < 0 || t >= cols) { /* uniform over the block */
            for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
                gr[j] = 0.0f;
            continue;
        }
        float lse = lse_in != nullptr ? lse_in[r] : row_lse(xr, cols, sh);
        float g = gloss[r * gstride];
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
            gr[j] = g * (expf(xr[j] - lse) - (j == t ? 1.0f : 0.0f));
    }
}

} // namespace

extern "C" cudaError_t dt__cu_embedding(const float *w, int64_t w_rows, int64_t w_ld, int64_t dim,
                                        const void *ids, int ids_dtype, int64_t n,
                                        int64_t vocab_start, float *out, cudaStream_t stream)
{
    if (n == 0 || dim == 0)
        return cudaSuccess;
    embedding_kernel<<<grid_for(n * dim), kThreads, 0, stream>>>(w, w_rows, w_ld, dim, ids,
                                                                 ids_dtype, n, vocab_start, out);
    return cudaGetLastError();
}

extern "C" cudaError_t dt__cu_embedding_backward(const void *ids, int ids_dtype, int64_t n,
                                                 const float *gy, int64_t dim, int64_t vocab_start,
                                                 float *gw, int64_t w_rows, cudaStream_t stream)
{
    if (n == 0 || dim == 0)
        return cudaSuccess;
    embedding_backward_kernel<<<grid_for(n * dim), kThreads, 0, stream>>>(
        ids, ids_dtype, n, gy, dim, vocab_start, gw, w_rows);
    return cudaGetLastError();
}

extern "C" cudaError_t dt__cu_cross_entropy(const float *logits, int64_t rows, int64_t cols,
                                            const void *targets, int targets_dtype,
                                            int64_t ignore_index, float *loss, float *lse, int *bad,
                                            cudaStream_t stream)
{
    if (rows == 0)
        return cudaSuccess;
    cross_entropy_kernel<<<row_blocks(rows), row_threads(cols), 0, stream>>>(
        logits, rows, cols, targets, targets_dtype, ignore_index, loss, lse, bad);
    return cudaGetLastError();
}

extern "C" cudaError_t dt__cu_check_targets(const void *targets, int targets_dtype, int64_t rows,
                                            int64_t cols, int64_t ignore_index,
                                            unsigned long long *bad, cudaStream_t stream)
{
    if (rows == 0)
        return cudaSuccess;
    check_targets_kernel<<<grid_for(rows), kThreads, 0, stream>>>(targets, targets_dtype, rows,
                                                                  cols, ignore_index, bad);
    return cudaGetLastError();
}

extern "C" cudaError_t dt__cu_cross_entropy_backward(const float *logits, int64_t rows,
                                                     int64_t cols, const void *targets,
                                                     int targets_dtype, int64_t ignore_index,
                                                     const float *lse, const float *gloss,
                                                     int64_t gloss_stride, float *glogits,
                                                     cudaStream_t stream)
{
    if (rows == 0 || cols == 0)
        return cudaSuccess;
    cross_entropy_backward_kernel<<<row_blocks(rows), row_threads(cols), 0, stream>>>(
        logits, rows, cols, targets, targets_dtype, ignore_index, lse, gloss, gloss_stride,
        glogits);
    return cudaGetLastError();
}
