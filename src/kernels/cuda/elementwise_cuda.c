/* Table entries for the element-wise kernels: fill, copy, binary, unary, masked_fill. */
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/kernels_cuda.h"

/* Cross-device copies (transfer_cuda.c). */
dt_status dt__cuda_copy_transfer(dt_tensor *dst, const dt_tensor *src);

dt_status dt__cuda_fill(dt_tensor *out, double value)
{
    const char *fn = "dt_kernel_fill";
    DT_CHECK(dt__cuda_check(fn, "out", out, DT_DTYPE_COUNT));
    if (dt_dtype_size(out->dtype) == 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: invalid dtype %d", fn, (int)out->dtype);
    DT_CHECK(dt__cuda_use_device(fn, out));
    dt__cu_iter it;
    DT_CHECK(dt__cuda_iter_init(fn, &it, out, 0, NULL, NULL));
    DT_CUDA_CHECK(dt__cu_fill(dt__cuda_ptr(out), (int)out->dtype, &it, value, DT_CUDA_STREAM), fn);
    return DT_OK;
}

dt_status dt__cuda_copy(dt_tensor *dst, const dt_tensor *src)
{
    const char *fn = "dt_kernel_copy";
    if (dst == NULL || src == NULL || dst->storage == NULL || src->storage == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: dst and src must be local tensors", fn);
    DT_CHECK(dt__cuda_check_same_shape(fn, "src", src, dst));
    if (dt_dtype_size(dst->dtype) == 0 || dt_dtype_size(src->dtype) == 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: invalid dtype %d -> %d", fn, (int)src->dtype,
                      (int)dst->dtype);
    if (dst->device.type != DT_DEVICE_CUDA || src->device.type != DT_DEVICE_CUDA ||
        dst->device.index != src->device.index)
        return dt__cuda_copy_transfer(dst, src);
    DT_CHECK(dt__cuda_use_device(fn, dst));
    dt__cu_iter it;
    const dt_tensor *ins[1] = {src};
    const char *names[1] = {"src"};
    DT_CHECK(dt__cuda_iter_init(fn, &it, dst, 1, ins, names));
    DT_CUDA_CHECK(dt__cu_copy(dt__cuda_ptr(dst), (int)dst->dtype, dt__cuda_ptr(src),
                              (int)src->dtype, &it, DT_CUDA_STREAM),
                  fn);
    return DT_OK;
}

dt_status dt__cuda_binary(dt_binary_op op, const dt_tensor *a, const dt_tensor *b, dt_tensor *out)
{
    const char *fn = "dt_kernel_binary";
    if ((unsigned)op > DT_BINARY_DIV)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: unknown op %d", fn, (int)op);
    DT_CHECK(dt__cuda_check_out(fn, "out", out, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check(fn, "a", a, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check(fn, "b", b, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_use_device(fn, out));
    dt__cu_iter it;
    const dt_tensor *ins[2] = {a, b};
    const char *names[2] = {"a", "b"};
    DT_CHECK(dt__cuda_iter_init(fn, &it, out, 2, ins, names));
    DT_CUDA_CHECK(dt__cu_binary((int)op, dt__cuda_ptr(out), dt__cuda_ptr(a), dt__cuda_ptr(b), &it,
                                DT_CUDA_STREAM),
                  fn);
    return DT_OK;
}

dt_status dt__cuda_unary(dt_unary_op op, const dt_tensor *x, float alpha, dt_tensor *out)
{
    const char *fn = "dt_kernel_unary";
    if ((unsigned)op > DT_UNARY_ROUND_BF16)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: unknown op %d", fn, (int)op);
    DT_CHECK(dt__cuda_check_out(fn, "out", out, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check(fn, "x", x, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check_same_shape(fn, "x", x, out));
    DT_CHECK(dt__cuda_use_device(fn, out));
    dt__cu_iter it;
    const dt_tensor *ins[1] = {x};
    const char *names[1] = {"x"};
    DT_CHECK(dt__cuda_iter_init(fn, &it, out, 1, ins, names));
    DT_CUDA_CHECK(
        dt__cu_unary((int)op, dt__cuda_ptr(out), dt__cuda_ptr(x), alpha, &it, DT_CUDA_STREAM), fn);
    return DT_OK;
}

dt_status dt__cuda_unary_backward(dt_unary_op op, const dt_tensor *x, const dt_tensor *gy,
                                  dt_tensor *gx)
{
    const char *fn = "dt_kernel_unary_backward";
    if (op != DT_UNARY_GELU_TANH && op != DT_UNARY_RELU)
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: no fused backward for unary op %d", fn, (int)op);
    DT_CHECK(dt__cuda_check_out(fn, "gx", gx, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check(fn, "x", x, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check(fn, "gy", gy, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check_same_shape(fn, "x", x, gx));
    DT_CHECK(dt__cuda_check_same_shape(fn, "gy", gy, gx));
    DT_CHECK(dt__cuda_use_device(fn, gx));
    dt__cu_iter it;
    const dt_tensor *ins[2] = {x, gy};
    const char *names[2] = {"x", "gy"};
    DT_CHECK(dt__cuda_iter_init(fn, &it, gx, 2, ins, names));
    DT_CUDA_CHECK(dt__cu_unary_backward((int)op, dt__cuda_ptr(gx), dt__cuda_ptr(x),
                                        dt__cuda_ptr(gy), &it, DT_CUDA_STREAM),
                  fn);
    return DT_OK;
}

dt_status dt__cuda_masked_fill(const dt_tensor *x, const dt_tensor *mask, float value,
                               dt_tensor *out)
{
    const char *fn = "dt_kernel_masked_fill";
    DT_CHECK(dt__cuda_check_out(fn, "out", out, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check(fn, "x", x, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check(fn, "mask", mask, DT_DTYPE_U8));
    DT_CHECK(dt__cuda_check_same_shape(fn, "x", x, out));
    DT_CHECK(dt__cuda_use_device(fn, out));
    dt__cu_iter it;
    const dt_tensor *ins[2] = {x, mask};
    const char *names[2] = {"x", "mask"};
    DT_CHECK(dt__cuda_iter_init(fn, &it, out, 2, ins, names));
    DT_CUDA_CHECK(dt__cu_masked_fill(dt__cuda_ptr(out), dt__cuda_ptr(x), dt__cuda_ptr(mask),
                                     (int)mask->dtype, value, &it, DT_CUDA_STREAM),
                  fn);
    return DT_OK;
}
