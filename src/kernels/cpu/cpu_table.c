/* The CPU kernel table: the reference implementation of kernel_ops.h. */
#include "kernels/cpu/cpu_internal.h"

static bool cpu_supports(dt_kernel_op op, dt_dtype dtype)
{
    if (op == DT_KOP_FILL || op == DT_KOP_COPY)
        return dt_dtype_size(dtype) != 0;
    if (op == DT_KOP_GEMM) /* bf16 inputs accumulate in f32 */
        return dtype == DT_DTYPE_F32 || dtype == DT_DTYPE_BF16;
    return op < DT_KOP_COUNT && dtype == DT_DTYPE_F32;
}

const dt_kernel_ops dt__kernels_cpu = {
    .name = "cpu",
    .supports = cpu_supports,
    .fill = dt__cpu_fill,
    .copy = dt__cpu_copy,
    .gemm = dt__cpu_gemm,
    .binary = dt__cpu_binary,
    .unary = dt__cpu_unary,
    .unary_backward = dt__cpu_unary_backward,
    .softmax = dt__cpu_softmax,
    .softmax_backward = dt__cpu_softmax_backward,
    .layer_norm = dt__cpu_layer_norm,
    .layer_norm_backward = dt__cpu_layer_norm_backward,
    .embedding = dt__cpu_embedding,
    .embedding_backward = dt__cpu_embedding_backward,
    .cross_entropy = dt__cpu_cross_entropy,
    .cross_entropy_backward = dt__cpu_cross_entropy_backward,
    .reduce = dt__cpu_reduce,
    .masked_fill = dt__cpu_masked_fill,
    .sgd_step = dt__cpu_sgd_step,
    .adamw_step = dt__cpu_adamw_step,
    .sum_squares = dt__cpu_sum_squares,
};
