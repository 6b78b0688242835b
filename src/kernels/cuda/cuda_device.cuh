/*
 * Device-side helpers shared by the .cu files: launch geometry, strided
 * offsets of a dt__cu_iter, dtype loads/stores, warp and block reductions.
 * Block reductions require blockDim.x to be a multiple of 32 (<= 1024) and
 * every thread of the block to call them.
 */
#ifndef DT_KERNELS_CUDA_DEVICE_CUH
#define DT_KERNELS_CUDA_DEVICE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "dtensor/core.h"
#include "kernels/cuda/cuda_launch.h"

namespace dtcu
{

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535; /* grid-stride loops cover the rest */

inline unsigned grid_for(int64_t n, int threads = kThreads)
{
    int64_t b = (n + threads - 1) / threads;
    if (b < 1)
        b = 1;
    return (unsigned)(b < kMaxBlocks ? b : kMaxBlocks);
}

/* Rows: one block each (grid-stride over rows), block size for `cols`. */
inline unsigned row_threads(int64_t cols)
{
    return cols <= 32 ? 32 : cols <= 64 ? 64 : cols <= 128 ? 128 : 256;
}
inline unsigned row_blocks(int64_t rows)
{
    return (unsigned)(rows < kMaxBlocks ? (rows < 1 ? 1 : rows) : kMaxBlocks);
}

/* Element offsets of flat index i for every operand of it. */
template <int NOPS>
__device__ __forceinline__ void iter_offsets(const dt__cu_iter &it, int64_t i, int64_t *off)
{
#pragma unroll
    for (int k = 0; k < NOPS; k++)
        off[k] = 0;
    for (int d = it.ndim - 1; d >= 0; d--) {
        int64_t s = it.shape[d];
        int64_t c = i % s;
        i /= s;
#pragma unroll
        for (int k = 0; k < NOPS; k++)
            off[k] += c * it.st[k][d];
    }
}

__device__ __forceinline__ double load_as_double(const void *p, int dtype, int64_t i)
{
    switch (dtype) {
    case DT_DTYPE_F32:
        return (double)((const float *)p)[i];
    case DT_DTYPE_F64:
        return ((const double *)p)[i];
    case DT_DTYPE_F16:
        return (double)__half2float(((const __half *)p)[i]);
    case DT_DTYPE_BF16:
        return (double)__bfloat162float(((const __nv_bfloat16 *)p)[i]);
    case DT_DTYPE_I32:
        return (double)((const int32_t *)p)[i];
    case DT_DTYPE_I64:
        return (double)((const int64_t *)p)[i];
    case DT_DTYPE_U16:
        return (double)((const uint16_t *)p)[i];
    case DT_DTYPE_U8:
        return (double)((const uint8_t *)p)[i];
    default:
        return 0.0;
    }
}

__device__ __forceinline__ bool dtype_is_int(int dtype)
{
    return dtype == DT_DTYPE_I32 || dtype == DT_DTYPE_I64 || dtype == DT_DTYPE_U16 ||
           dtype == DT_DTYPE_U8;
}

__device__ __forceinline__ int64_t load_as_int(const void *p, int dtype, int64_t i)
{
    switch (dtype) {
    case DT_DTYPE_I32:
        return ((const int32_t *)p)[i];
    case DT_DTYPE_I64:
        return ((const int64_t *)p)[i];
    case DT_DTYPE_U16:
        return ((const uint16_t *)p)[i];
    case DT_DTYPE_U8:
        return ((const uint8_t *)p)[i];
    default:
        return (int64_t)load_as_double(p, dtype, i);
    }
}

__device__ __forceinline__ int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

/* Saturating integer store. */
__device__ __forceinline__ void store_int(void *p, int dtype, int64_t i, int64_t v)
{
    switch (dtype) {
    case DT_DTYPE_I32:
        ((int32_t *)p)[i] = (int32_t)clamp_i64(v, INT32_MIN, INT32_MAX);
        break;
    case DT_DTYPE_I64:
        ((int64_t *)p)[i] = v;
        break;
    case DT_DTYPE_U16:
        ((uint16_t *)p)[i] = (uint16_t)clamp_i64(v, 0, UINT16_MAX);
        break;
    case DT_DTYPE_U8:
        ((uint8_t *)p)[i] = (uint8_t)clamp_i64(v, 0, UINT8_MAX);
        break;
    default:
        break;
    }
}

/* double -> integer: NaN gives 0, out of range saturates, else truncates. */
__device__ __forceinline__ int64_t double_to_int_sat(double v)
{
    if (v != v)
        return 0;
    if (v >= 9.2233720368547758e18)
        return INT64_MAX;
    if (v <= -9.2233720368547758e18)
        return INT64_MIN;
    return (int64_t)v;
}

/*
 * double -> float rounding to odd (an inexact result gets its last mantissa
 * bit set): rounding that float to f16/bf16 then equals rounding v directly,
 * as the host's dt__store_elem does.
 */
__device__ __forceinline__ float f64_to_f32_odd(double v)
{
    float f = (float)v;
    if ((double)f == v || !isfinite(f) || isnan(v))
        return f;
    uint32_t u = __float_as_uint(f);
    if (fabs((double)f) > fabs(v))
        u -= 1; /* step toward zero */
    return __uint_as_float(u | 1u);
}

__device__ __forceinline__ void store_double(void *p, int dtype, int64_t i, double v)
{
    switch (dtype) {
    case DT_DTYPE_F32:
        ((float *)p)[i] = (float)v;
        break;
    case DT_DTYPE_F64:
        ((double *)p)[i] = v;
        break;
    case DT_DTYPE_F16:
        ((__half *)p)[i] = __float2half_rn(f64_to_f32_odd(v));
        break;
    case DT_DTYPE_BF16:
        ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(f64_to_f32_odd(v));
        break;
    default:
        store_int(p, dtype, i, double_to_int_sat(v));
        break;
    }
}

template <typename T> struct SumOp {
    __device__ __forceinline__ T operator()(T a, T b) const
    {
        return a + b;
    }
    static __device__ __forceinline__ T identity()
    {
        return T(0);
    }
};
struct MaxOp {
    __device__ __forceinline__ float operator()(float a, float b) const
    {
        return fmaxf(a, b);
    }
    static __device__ __forceinline__ float identity()
    {
        return -INFINITY;
    }
};

template <typename T, typename Op> __device__ __forceinline__ T warp_reduce(T v, Op op)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Every thread gets the block-wide result. @p sh: 32 elements of shared memory. */
template <typename T, typename Op> __device__ T block_reduce(T v, Op op, T *sh)
{
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    int nwarps = (blockDim.x + 31) >> 5;
    v = warp_reduce(v, op);
    __syncthreads(); /* sh may still be read from a previous call */
    if (lane == 0)
        sh[wid] = v;
    __syncthreads();
    v = (threadIdx.x < nwarps) ? sh[threadIdx.x] : Op::identity();
    if (wid == 0)
        v = warp_reduce(v, op);
    if (threadIdx.x == 0)
        sh[0] = v;
    __syncthreads();
    return sh[0];
}

__device__ __forceinline__ float block_sum(float v, float *sh)
{
    return block_reduce(v, SumOp<float>(), sh);
}
__device__ __forceinline__ float block_max(float v, float *sh)
{
    return block_reduce(v, MaxOp(), sh);
}

} // namespace dtcu

#endif
