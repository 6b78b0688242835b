/* Element-wise kernels over dt__cu_iter (strided, broadcast) operands. */
#include "kernels/cuda/cuda_device.cuh"

using namespace dtcu;

namespace
{

__global__ void fill_kernel(void *out, int dtype, dt__cu_iter it, double value, int64_t ivalue,
                            bool as_int)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < it.numel;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[1];
        iter_offsets<1>(it, i, off);
        if (as_int)
            store_int(out, dtype, off[0], ivalue);
        else
            store_double(out, dtype, off[0], value);
    }
}

__global__ void copy_kernel(void *dst, int ddt, const void *src, int sdt, dt__cu_iter it)
{
    bool ints = dtype_is_int(ddt) && dtype_is_int(sdt);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < it.numel;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[2];
        iter_offsets<2>(it, i, off);
        if (ints)
            store_int(dst, ddt, off[0], load_as_int(src, sdt, off[1]));
        else
            store_double(dst, ddt, off[0], load_as_double(src, sdt, off[1]));
    }
}

/* Same-dtype float copy without the double round trip. */
__global__ void copy_f32_kernel(float *dst, const float *src, dt__cu_iter it)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < it.numel;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[2];
        iter_offsets<2>(it, i, off);
        dst[off[0]] = src[off[1]];
    }
}

__device__ __forceinline__ float binary_apply(int op, float a, float b)
{
    switch (op) {
    case DT_CU_BIN_ADD:
        return a + b;
    case DT_CU_BIN_SUB:
        return a - b;
    case DT_CU_BIN_MUL:
        return a * b;
    default:
        return a / b;
    }
}

__global__ void binary_kernel(int op, float *out, const float *a, const float *b, dt__cu_iter it)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < it.numel;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[3];
        iter_offsets<3>(it, i, off);
        out[off[0]] = binary_apply(op, a[off[1]], b[off[2]]);
    }
}

constexpr float kGeluK = 0.7978845608028654f; /* sqrt(2/pi) */

__device__ __forceinline__ float gelu_tanh(float x)
{
    return 0.5f * x * (1.0f + tanhf(kGeluK * (x + 0.044715f * x * x * x)));
}

__device__ __forceinline__ float gelu_tanh_grad(float x)
{
    float t = tanhf(kGeluK * (x + 0.044715f * x * x * x));
    float du = kGeluK * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

__device__ __forceinline__ float unary_apply(int op, float x, float alpha)
{
    switch (op) {
    case DT_CU_UN_SCALE:
        return alpha * x;
    case DT_CU_UN_ADD_SCALAR:
        return x + alpha;
    case DT_CU_UN_GELU_TANH:
        return gelu_tanh(x);
    case DT_CU_UN_RELU:
        return x > 0.0f ? x : 0.0f;
    case DT_CU_UN_EXP:
        return expf(x);
    case DT_CU_UN_LOG:
        return logf(x);
    case DT_CU_UN_NEG:
        return -x;
    case DT_CU_UN_SQRT:
        return sqrtf(x);
    case DT_CU_UN_ROUND_BF16: { /* ties to even, a NaN kept (as the CPU) */
        unsigned u = __float_as_uint(x);
        unsigned r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        return __uint_as_float((u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) : r);
    }
    default:
        return x * x; /* DT_CU_UN_SQUARE */
    }
}

__global__ void unary_kernel(int op, float *out, const float *x, float alpha, dt__cu_iter it)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < it.numel;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[2];
        iter_offsets<2>(it, i, off);
        out[off[0]] = unary_apply(op, x[off[1]], alpha);
    }
}

__global__ void unary_backward_kernel(int op, float *gx, const float *x, const float *gy,
                                      dt__cu_iter it)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < it.numel;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[3];
        iter_offsets<3>(it, i, off);
        float v = x[off[1]];
        float d = (op == DT_CU_UN_RELU) ? (v > 0.0f ? 1.0f : 0.0f) : gelu_tanh_grad(v);
        gx[off[0]] = gy[off[2]] * d;
    }
}

__global__ void masked_fill_kernel(float *out, const float *x, const void *mask, int mdt,
                                   float value, dt__cu_iter it)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < it.numel;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[3];
        iter_offsets<3>(it, i, off);
        out[off[0]] = load_as_int(mask, mdt, off[2]) != 0 ? value : x[off[1]];
    }
}

} // namespace

extern "C" cudaError_t dt__cu_fill(void *out, int dtype, const dt__cu_iter *it, double value,
                                   cudaStream_t stream)
{
    if (it->numel == 0)
        return cudaSuccess;
    bool is_int = dtype == DT_DTYPE_I32 || dtype == DT_DTYPE_I64 || dtype == DT_DTYPE_U16 ||
                  dtype == DT_DTYPE_U8;
    /* host-side double -> int with the same saturation as the device store */
    int64_t iv = 0;
    if (is_int && value == value)
        iv = value >= 9.2233720368547758e18    ? INT64_MAX
             : value <= -9.2233720368547758e18 ? INT64_MIN
                                               : (int64_t)value;
    fill_kernel<<<grid_for(it->numel), kThreads, 0, stream>>>(out, dtype, *it, value, iv, is_int);
    return cudaGetLastError();
}

extern "C" cudaError_t dt__cu_copy(void *dst, int ddt, const void *src, int sdt,
                                   const dt__cu_iter *it, cudaStream_t stream)
{
    if (it->numel == 0)
        return cudaSuccess;
    if (ddt == DT_DTYPE_F32 && sdt == DT_DTYPE_F32)
        copy_f32_kernel<<<grid_for(it->numel), kThreads, 0, stream>>>((float *)dst,
                                                                      (const float *)src, *it);
    else
        copy_kernel<<<grid_for(it->numel), kThreads, 0, stream>>>(dst, ddt, src, sdt, *it);
    return cudaGetLastError();
}

extern "C" cudaError_t dt__cu_binary(int op, float *out, const float *a, const float *b,
                                     const dt__cu_iter *it, cudaStream_t stream)
{
    if (it->numel == 0)
        return cudaSuccess;
    binary_kernel<<<grid_for(it->numel), kThreads, 0, stream>>>(op, out, a, b, *it);
    return cudaGetLastError();
}

extern "C" cudaError_t dt__cu_unary(int op, float *out, const float *x, float alpha,
                                    const dt__cu_iter *it, cudaStream_t stream)
{
    if (it->numel == 0)
        return cudaSuccess;
    unary_kernel<<<grid_for(it->numel), kThreads, 0, stream>>>(op, out, x, alpha, *it);
    return cudaGetLastError();
}

extern "C" cudaError_t dt__cu_unary_backward(int op, float *gx, const float *x, const float *gy,
                                             const dt__cu_iter *it, cudaStream_t stream)
{
    if (it->numel == 0)
        return cudaSuccess;
    unary_backward_kernel<<<grid_for(it->numel), kThreads, 0, stream>>>(op, gx, x, gy, *it);
    return cudaGetLastError();
}

extern "C" cudaError_t dt__cu_masked_fill(float *out, const float *x, const void *mask,
                                          int mask_dtype, float value, const dt__cu_iter *it,
                                          cudaStream_t stream)
{
    if (it->numel == 0)
        return cudaSuccess;
    masked_fill_kernel<<<grid_for(it->numel), kThreads, 0, stream>>>(out, x, mask, mask_dtype,
                                                                     value, *it);
    return cudaGetLastError();
}
