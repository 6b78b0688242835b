/* Reductions: along one dim of a strided tensor (sum, mean, max + argmax), sum of squares. */
#include "kernels/cuda/cuda_device.cuh"

using namespace dtcu;

namespace
{

/* Max with the first index among equal values; NaN wins (propagates, as in torch.max). */
__device__ __forceinline__ bool better(float v, int64_t i, float best, int64_t bi)
{
    if (v != v)
        return best == best || i < bi;
    if (best != best)
        return false;
    return v > best || (v == best && i < bi);
}

/* One thread per output; `o` walks the output positions over x's other dims. */
__global__ void reduce_thread_kernel(int kind, const float *x, dt__cu_iter o, int64_t R, int64_t rs,
                                     float *out, int64_t *am)
{
    for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < o.numel;
         q += (int64_t)gridDim.x * blockDim.x) {
        int64_t base[1];
        iter_offsets<1>(o, q, base);
        const float *p = x + base[0];
        if (kind == DT_CU_RED_MAX) {
            float best = -INFINITY;
            int64_t bi = 0;
            for (int64_t r = 0; r < R; r++) {
                float v = p[r * rs];
                if (r == 0 || better(v, r, best, bi)) {
                    best = v;
                    bi = r;
                }
            }
            out[q] = best;
            if (am != nullptr)
                am[q] = bi;
        } else {
            float acc = 0.0f;
            for (int64_t r = 0; r < R; r++)
                acc += p[r * rs];
            out[q] = kind == DT_CU_RED_MEAN ? acc / (float)R : acc;
        }
    }
}

/* (best, index) of two lanes: the better one, "none" (INT64_MAX) losing. */
__device__ __forceinline__ void max_merge(float &best, int64_t &bi, float ov, int64_t oi)
{
    if (oi != INT64_MAX && (bi == INT64_MAX || better(ov, oi, best, bi))) {
        best = ov;
        bi = oi;
    }
}

/* One warp per output: many outputs each reducing a contiguous run (rs == 1). */
__global__ void reduce_warp_kernel(int kind, const float *x, dt__cu_iter o, int64_t R, float *out,
                                   int64_t *am)
{
    int lane = threadIdx.x & 31;
    int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t q = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5); q < o.numel;
         q += warps) {
        int64_t base[1];
        iter_offsets<1>(o, q, base);
        const float *p = x + base[0];
        if (kind != DT_CU_RED_MAX) {
            float acc = 0.0f;
            for (int64_t r = lane; r < R; r += 32)
                acc += p[r];
            acc = warp_reduce(acc, SumOp<float>());
            if (lane == 0)
                out[q] = kind == DT_CU_RED_MEAN ? acc / (float)R : acc;
            continue;
        }
        float best = -INFINITY;
        int64_t bi = INT64_MAX;
        for (int64_t r = lane; r < R; r += 32)
            max_merge(best, bi, p[r], r);
        for (int off = 16; off > 0; off >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, best, off);
            int64_t oi = __shfl_xor_sync(0xffffffffu, bi, off);
            max_merge(best, bi, ov, oi);
        }
        if (lane == 0) {
            out[q] = best;
            if (am != nullptr)
                am[q] = bi == INT64_MAX ? 0 : bi;
        }
    }
}

/* One block per output, for few outputs with long reductions. */
__global__ void reduce_block_kernel(int kind, const float *x, dt__cu_iter o, int64_t R, int64_t rs,
                                    float *out, int64_t *am)
{
    __shared__ float shv[32];
    __shared__ int64_t shi[32];
    for (int64_t q = blockIdx.x; q < o.numel; q += gridDim.x) {
        int64_t base[1];
        iter_offsets<1>(o, q, base);
        const float *p = x + base[0];
        if (kind != DT_CU_RED_MAX) {
            float acc = 0.0f;
            for (int64_t r = threadIdx.x; r < R; r += blockDim.x)
                acc += p[r * rs];
            acc = block_sum(acc, shv);
            if (threadIdx.x == 0)
                out[q] = kind == DT_CU_RED_MEAN ? acc / (float)R : acc;
            continue;
        }
        float best = -INFINITY;
        int64_t bi = INT64_MAX;
        for (int64_t r = threadIdx.x; r < R; r += blockDim.x) {
            float v = p[r * rs];
            if (bi == INT64_MAX || better(v, r, best, bi)) {
                best = v;
                bi = r;
            }
        }
        for (int off = 16; off > 0; off >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, best, off);
            int64_t oi = __shfl_xor_sync(0xffffffffu, bi, off);
            if (oi != INT64_MAX && (bi == INT64_MAX || better(ov, oi, best, bi))) {
                best = ov;
                bi = oi;
            }
        }
        int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
        __syncthreads();
        if (lane == 0) {
            shv[wid] = best;
            shi[wid] = bi;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int nw = (blockDim.x + 31) >> 5;
            for (int k = 1; k < nw; k++)
                if (shi[k] != INT64_MAX && (bi == INT64_MAX || better(shv[k], shi[k], best, bi))) {
                    best = shv[k];
                    bi = shi[k];
                }
            out[q] = best;
            if (am != nullptr)
                am[q] = bi == INT64_MAX ? 0 : bi;
        }
    }
}

__global__ void sum_squares_kernel(const float *x, dt__cu_iter it, double *partials)
{
    __shared__ double sh[32];
    double acc = 0.0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < it.numel;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[1];
        iter_offsets<1>(it, i, off);
        double v = (double)x[off[0]];
        acc += v * v;
    }
    acc = block_reduce(acc, SumOp<double>(), sh);
    if (threadIdx.x == 0)
        partials[blockIdx.x] = acc;
}

__global__ void sum_partials_kernel(const double *partials, int n, double *out)
{
    __shared__ double sh[32];
    double acc = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        acc += partials[i];
    acc = block_reduce(acc, SumOp<double>(), sh);
    if (threadIdx.x == 0)
        *out = acc;
}

constexpr int kMaxPartials = 1024;

} // namespace

extern "C" cudaError_t dt__cu_reduce(int kind, const float *x, int ndim, const int64_t *shape,
                                     const int64_t *strides, int dim, float *out, int64_t *argmax,
                                     cudaStream_t stream)
{
    dt__cu_iter o = {};
    o.nops = 1;
    o.numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (d == dim)
            continue;
        o.shape[o.ndim] = shape[d];
        o.st[0][o.ndim] = strides[d];
        o.numel *= shape[d];
        o.ndim++;
    }
    int64_t R = shape[dim], rs = strides[dim];
    if (o.numel == 0)
        return cudaSuccess;
    if (R >= 1024 && o.numel <= 4096)
        reduce_block_kernel<<<row_blocks(o.numel), kThreads, 0, stream>>>(kind, x, o, R, rs, out,
                                                                          argmax);
    else if (rs == 1 && R >= 32)
        reduce_warp_kernel<<<grid_for(o.numel * 32), kThreads, 0, stream>>>(kind, x, o, R, out,
                                                                            argmax);
    else
        reduce_thread_kernel<<<grid_for(o.numel), kThreads, 0, stream>>>(kind, x, o, R, rs, out,
                                                                         argmax);
    return cudaGetLastError();
}

extern "C" int dt__cu_sum_squares_max_partials(void)
{
    return kMaxPartials;
}

extern "C" cudaError_t dt__cu_sum_squares(const float *x, const dt__cu_iter *it, double *partials,
                                          int max_partials, double *out, cudaStream_t stream)
{
    unsigned blocks = grid_for(it->numel);
    if (blocks > (unsigned)max_partials)
        blocks = (unsigned)max_partials;
    sum_squares_kernel<<<blocks, kThreads, 0, stream>>>(x, *it, partials);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    sum_partials_kernel<<<1, kThreads, 0, stream>>>(partials, (int)blocks, out);
    return cudaGetLastError();
}
