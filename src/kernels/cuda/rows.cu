/*
 * Row kernels on contiguous [rows, cols] data, one block per row: softmax
 * (scaled, causal, log) and layer norm, forward and backward. Numerics follow
 * the CPU reference (src/kernels/cpu/softmax.c, layer_norm.c).
 */
#include "kernels/cuda/cuda_device.cuh"

using namespace dtcu;

namespace
{

/* Keys j < limit are visible to row r (causal: query r % tq of tq, keys cols). */
__device__ __forceinline__ int64_t visible_keys(int64_t r, int64_t cols, int64_t tq, int causal)
{
    if (!causal)
        return cols;
    int64_t lim = r % tq + (cols - tq) + 1;
    return lim < 0 ? 0 : (lim > cols ? cols : lim);
}

__global__ void softmax_kernel(const float *x, float *y, int64_t rows, int64_t cols, int64_t tq,
                               float scale, int causal, int logm)
{
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        int64_t lim = visible_keys(r, cols, tq, causal);
        float m = -INFINITY;
        for (int64_t j = threadIdx.x; j < lim; j += blockDim.x)
            m = fmaxf(m, xr[j] * scale);
        m = block_max(m, sh);
        float s = 0.0f;
        for (int64_t j = threadIdx.x; j < lim; j += blockDim.x)
            s += expf(xr[j] * scale - m);
        s = block_sum(s, sh);
        float lse = m + logf(s);
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            float v = xr[j] * scale;
            if (lim == 0) /* every key masked: NaN, as softmax of an all -inf row */
                yr[j] = NAN;
            else if (j >= lim)
                yr[j] = logm ? -INFINITY : 0.0f;
            else
                yr[j] = logm ? v - lse : expf(v - m) / s;
        }
    }
}

/*
 * softmax: gx = scale * y * (gy - sum(gy * y));
 * log-softmax: gx = scale * (gy - exp(y) * sum(gy)), the sum over the
 * outputs that depend on x (y > -inf); masked (-inf) positions get 0.
 */
__global__ void softmax_backward_kernel(const float *y, const float *gy, float *gx, int64_t rows,
                                        int64_t cols, float scale, int logm)
{
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *yr = y + r * cols, *gr = gy + r * cols;
        float *out = gx + r * cols;
        float s = 0.0f;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            if (logm)
                s += (yr[j] == -INFINITY) ? 0.0f : gr[j];
            else
                s += gr[j] * yr[j];
        }
        s = block_sum(s, sh);
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            float v = yr[j];
            if (logm)
                out[j] = (v == -INFINITY) ? 0.0f : scale * (gr[j] - expf(v) * s);
            else
                out[j] = scale * v * (gr[j] - s);
        }
    }
}

__global__ void layer_norm_kernel(const float *x, const float *w, const float *b, float eps,
                                  float *y, float *mean_out, float *rstd_out, int64_t rows,
                                  int64_t cols)
{
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float s = 0.0f;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
            s += xr[j];
        float mean = block_sum(s, sh) / (float)cols;
        float q = 0.0f;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            float d = xr[j] - mean;
            q += d * d;
        }
        float var = block_sum(q, sh) / (float)cols;
        float rstd = rsqrtf(var + eps);
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            float v = (xr[j] - mean) * rstd;
            if (w != nullptr)
                v *= w[j];
            if (b != nullptr)
                v += b[j];
            yr[j] = v;
        }
        if (threadIdx.x == 0) {
            if (mean_out != nullptr)
                mean_out[r] = mean;
            if (rstd_out != nullptr)
                rstd_out[r] = rstd;
        }
    }
}

/* gx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = gy * w. */
__global__ void layer_norm_backward_x_kernel(const float *x, const float *w, const float *mean,
                                             const float *rstd, const float *gy, float *gx,
                                             int64_t rows, int64_t cols)
{
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * cols, *gr = gy + r * cols;
        float mu = mean[r], rs = rstd[r];
        float s1 = 0.0f, s2 = 0.0f;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            float g = gr[j] * (w != nullptr ? w[j] : 1.0f);
            s1 += g;
            s2 += g * (xr[j] - mu) * rs;
        }
        s1 = block_sum(s1, sh) / (float)cols;
        s2 = block_sum(s2, sh) / (float)cols;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            float g = gr[j] * (w != nullptr ? w[j] : 1.0f);
            float xhat = (xr[j] - mu) * rs;
            gx[r * cols + j] = rs * (g - s1 - xhat * s2);
        }
    }
}

/*
 * gw[c] += sum_r gy[r, c] * xhat[r, c], gb[c] += sum_r gy[r, c]. Block
 * (32, 8): 32 columns, 8 row lanes; partial sums of a block are added with
 * atomics (grid.y blocks share a column).
 */
__global__ void layer_norm_backward_wb_kernel(const float *x, const float *mean, const float *rstd,
                                              const float *gy, float *gw, float *gb, int64_t rows,
                                              int64_t cols)
{
    __shared__ float sw[8][33], sb[8][33];
    int64_t c = blockIdx.x * 32 + threadIdx.x;
    float aw = 0.0f, ab = 0.0f;
    if (c < cols) {
        for (int64_t r = blockIdx.y * 8 + threadIdx.y; r < rows; r += (int64_t)gridDim.y * 8) {
            float g = gy[r * cols + c];
            ab += g;
            aw += g * (x[r * cols + c] - mean[r]) * rstd[r];
        }
    }
    sw[threadIdx.y][threadIdx.x] = aw;
    sb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        float tw = 0.0f, tb = 0.0f;
        for (int k = 0; k < 8; k++) {
            tw += sw[k][threadIdx.x];
            tb += sb[k][threadIdx.x];
        }
        if (gw != nullptr)
            atomicAdd(&gw[c], tw);
        if (gb != nullptr)
            atomicAdd(&gb[c], tb);
    }
}

} // namespace

extern "C" cudaError_t dt__cu_softmax(const float *x, float *y, int64_t rows, int64_t cols,
                                      int64_t tq, float scale, int causal, int log,
                                      cudaStream_t stream)
{
    if (rows == 0 || cols == 0)
        return cudaSuccess;
    softmax_kernel<<<row_blocks(rows), row_threads(cols), 0, stream>>>(
        x, y, rows, cols, tq > 0 ? tq : 1, scale, causal, log);
    return cudaGetLastError();
}

extern "C" cudaError_t dt__cu_softmax_backward(const float *y, const float *gy, float *gx,
                                               int64_t rows, int64_t cols, float scale, int log,
                                               cudaStream_t stream)
{
    if (rows == 0 || cols == 0)
        return cudaSuccess;
    softmax_backward_kernel<<<row_blocks(rows), row_threads(cols), 0, stream>>>(y, gy, gx, rows,
                                                                                cols, scale, log);
    return cudaGetLastError();
}

extern "C" cudaError_t dt__cu_layer_norm(const float *x, const float *w, const float *b, float eps,
                                         float *y, float *mean, float *rstd, int64_t rows,
                                         int64_t cols, cudaStream_t stream)
{
    if (rows == 0 || cols == 0)
        return cudaSuccess;
    layer_norm_kernel<<<row_blocks(rows), row_threads(cols), 0, stream>>>(x, w, b, eps, y, mean,
                                                                          rstd, rows, cols);
    return cudaGetLastError();
}

extern "C" cudaError_t dt__cu_layer_norm_backward(const float *x, const float *w, const float *mean,
                                                  const float *rstd, const float *gy, float *gx,
                                                  float *gw, float *gb, int64_t rows, int64_t cols,
                                                  cudaStream_t stream)
{
    if (rows == 0 || cols == 0)
        return cudaSuccess;
    if (gx != nullptr) {
        layer_norm_backward_x_kernel<<<row_blocks(rows), row_threads(cols), 0, stream>>>(
            x, w, mean, rstd, gy, gx, rows, cols);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            return e;
    }
    if (gw != nullptr || gb != nullptr) {
        int64_t ychunks = (rows + 63) / 64; /* >= 64 rows per block row */
        dim3 grid((unsigned)((cols + 31) / 32), (unsigned)(ychunks < 32 ? ychunks : 32));
        layer_norm_backward_wb_kernel<<<grid, dim3(32, 8), 0, stream>>>(x, mean, rstd, gy, gw, gb,
                                                                        rows, cols);
    }
    return cudaGetLastError();
}
