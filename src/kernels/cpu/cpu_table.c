/* The CPU kernel table: the reference implementation of kernel_ops.h. */
#include "kernels/cpu/cpu_internal.h"

static bool cpu_supports(dt_kernel_op op, dt_dtype dtype)
{
    if (op == DT_KOP_FILL || op == DT_KOP_COPY)
        return dt_dtype_size(dtype) != 0;
    if (op == DT_KOP_OPTIM) /* master weights and optimizer state stay f32 */
        return dtype == DT_DTYPE_F32;
    /* bf16 and f16 compute in f32: GEMM accumulates (bf16 on oneDNN's kernel),
     * the others read bf16 natively (half_stage.c) or f32 copies (bf16_widen.c) */
    return op < DT_KOP_COUNT &&
           (dtype == DT_DTYPE_F32 || dtype == DT_DTYPE_BF16 || dtype == DT_DTYPE_F16);
}

const dt_kernel_ops dt__kernels_cpu = {
    .name = "cpu",
    .supports = cpu_supports,
    .fill = dt__cpu_fill,
    .copy = dt__cpu_copy,
    .gemm = dt__cpu_gemm,
    .gemm_bias = dt__cpu_gemm_bias,
    .binary = dt__cpu_binary_any,
    .unary = dt__cpu_unary_any,
    .unary_backward = dt__cpu_unary_backward_any,
    .softmax = dt__cpu_softmax_any,
    .softmax_backward = dt__cpu_softmax_backward_any,
    .layer_norm = dt__cpu_layer_norm_any,
    .layer_norm_backward = dt__cpu_layer_norm_backward_any,
    .embedding = dt__cpu_embedding_any,
    .embedding_backward = dt__cpu_embedding_backward_any,
    .cross_entropy = dt__cpu_cross_entropy_any,
    .cross_entropy_backward = dt__cpu_cross_entropy_backward_any,
    .reduce = dt__cpu_reduce_any,
    .masked_fill = dt__cpu_masked_fill_any,
    .sgd_step = dt__cpu_sgd_step,
    .adamw_step = dt__cpu_adamw_step,
    .sum_squares = dt__cpu_sum_squares_any,
};
