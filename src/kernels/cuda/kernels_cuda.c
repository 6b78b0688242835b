/*
 * The CUDA kernel table: cuBLAS GEMM plus the .cu kernels, with the CPU table
 * (src/kernels/cpu/) as the reference for every entry's semantics and errors.
 * Loading this object also registers the CUDA device allocator.
 */
#include <stdatomic.h>

#include "core/alloc.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/kernels_cuda.h"

/* The .cu files take the enum values as ints (cuda_launch.h mirrors them). */
_Static_assert((int)DT_BINARY_ADD == (int)DT_CU_BIN_ADD &&
                   (int)DT_BINARY_SUB == (int)DT_CU_BIN_SUB &&
                   (int)DT_BINARY_MUL == (int)DT_CU_BIN_MUL &&
                   (int)DT_BINARY_DIV == (int)DT_CU_BIN_DIV,
               "dt_binary_op mirror");
_Static_assert((int)DT_UNARY_SCALE == (int)DT_CU_UN_SCALE &&
                   (int)DT_UNARY_ADD_SCALAR == (int)DT_CU_UN_ADD_SCALAR &&
                   (int)DT_UNARY_GELU_TANH == (int)DT_CU_UN_GELU_TANH &&
                   (int)DT_UNARY_RELU == (int)DT_CU_UN_RELU &&
                   (int)DT_UNARY_EXP == (int)DT_CU_UN_EXP &&
                   (int)DT_UNARY_LOG == (int)DT_CU_UN_LOG &&
                   (int)DT_UNARY_NEG == (int)DT_CU_UN_NEG &&
                   (int)DT_UNARY_SQRT == (int)DT_CU_UN_SQRT &&
                   (int)DT_UNARY_SQUARE == (int)DT_CU_UN_SQUARE &&
                   (int)DT_UNARY_ROUND_BF16 == (int)DT_CU_UN_ROUND_BF16,
               "dt_unary_op mirror");
_Static_assert((int)DT_REDUCE_KIND_SUM == (int)DT_CU_RED_SUM &&
                   (int)DT_REDUCE_KIND_MEAN == (int)DT_CU_RED_MEAN &&
                   (int)DT_REDUCE_KIND_MAX == (int)DT_CU_RED_MAX,
               "dt_reduce_kind mirror");

static bool cuda_supports(dt_kernel_op op, dt_dtype dtype)
{
    if (op == DT_KOP_FILL || op == DT_KOP_COPY)
        return dt_dtype_size(dtype) != 0;
    if (op == DT_KOP_GEMM) /* bf16/f16 operands, f32 accumulation (gemm_cublas.c) */
        return dtype == DT_DTYPE_F32 || dtype == DT_DTYPE_BF16 || dtype == DT_DTYPE_F16;
    return op < DT_KOP_COUNT && dtype == DT_DTYPE_F32;
}

int dt__cuda_device_count(void)
{
    static atomic_int cached = -1; /* devices do not come and go within a process */
    int n = atomic_load(&cached);
    if (n >= 0)
        return n;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver / no device: not sticky, clear it */
        n = 0;
    }
    atomic_store(&cached, n);
    return n;
}

/* Wait for the compute stream of device @p index. */
static dt_status cuda_synchronize(int index)
{
    DT_CUDA_CHECK(cudaSetDevice(index), "dt_device_synchronize");
    DT_CUDA_CHECK(cudaStreamSynchronize(DT_CUDA_STREAM), "dt_device_synchronize");
    return DT_OK;
}

/* Whether @p p is device (or managed) memory, through unified addressing. */
static bool cuda_owns(const void *p, int *index)
{
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError(); /* an unknown host pointer: not sticky, clear it */
        return false;
    }
    *index = a.device;
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

/* Bytes between host and device or device and device; synchronous. */
static dt_status cuda_copy_bytes(void *dst, const void *src, size_t n)
{
    DT_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDefault), "copy_bytes");
    return DT_OK;
}

const dt_kernel_ops dt__kernels_cuda = {
    .name = "cuda",
    .supports = cuda_supports,
    .fill = dt__cuda_fill,
    .copy = dt__cuda_copy,
    .synchronize = cuda_synchronize,
    .owns = cuda_owns,
    .copy_bytes = cuda_copy_bytes,
    .gemm = dt__cuda_gemm,
    .binary = dt__cuda_binary,
    .unary = dt__cuda_unary,
    .unary_backward = dt__cuda_unary_backward,
    .softmax = dt__cuda_softmax,
    .softmax_backward = dt__cuda_softmax_backward,
    .layer_norm = dt__cuda_layer_norm,
    .layer_norm_backward = dt__cuda_layer_norm_backward,
    .embedding = dt__cuda_embedding,
    .embedding_backward = dt__cuda_embedding_backward,
    .cross_entropy = dt__cuda_cross_entropy,
    .cross_entropy_backward = dt__cuda_cross_entropy_backward,
    .reduce = dt__cuda_reduce,
    .masked_fill = dt__cuda_masked_fill,
    .sgd_step = dt__cuda_sgd_step,
    .adamw_step = dt__cuda_adamw_step,
    .sum_squares = dt__cuda_sum_squares,
};

/* Registering needs no CUDA call, so it is safe without a GPU or driver. It
 * lives here because kernels.c references this object whenever CUDA is built
 * in, so static links keep it. */
__attribute__((constructor)) static void cuda_register_allocator(void)
{
    dt__allocator_register(DT_DEVICE_CUDA, &dt__cuda_allocator);
}
