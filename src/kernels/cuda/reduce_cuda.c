/* Table entries for reductions: sum / mean / max along a dim, sum of squares. */
#include <math.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/kernels_cuda.h"

dt_status dt__cuda_reduce(dt_reduce_kind kind, const dt_tensor *x, int dim, dt_tensor *out,
                          dt_tensor *argmax)
{
    const char *fn = "dt_kernel_reduce";
    DT_CHECK(dt__cuda_check_out(fn, "out", out, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check(fn, "x", x, DT_DTYPE_F32));
    DT_CHECK(dt__kernel_reduce_args(fn, kind, x, dim, &dim));
    /* a 0-d tensor reduces as shape [1] */
    int nd = x->ndim > 0 ? x->ndim : 1;
    int64_t one = 1, zero = 0;
    const int64_t *shape = x->ndim > 0 ? x->shape : &one;
    const int64_t *strides = x->ndim > 0 ? x->strides : &zero;
    int64_t n = shape[dim];
    int64_t nout = dt__shape_numel(nd, shape) / (n > 0 ? n : 1);
    if (n == 0) /* the other dims' product */
        nout = dt__shape_numel(dim, shape) * dt__shape_numel(nd - dim - 1, shape + dim + 1);
    DT_CHECK(dt__cuda_check_numel(fn, "out", out, nout));
    int64_t *am = NULL;
    if (argmax != NULL) {
        DT_CHECK(dt__cuda_check_out(fn, "argmax", argmax, DT_DTYPE_I64));
        if (kind != DT_REDUCE_KIND_MAX || dt__shape_numel(argmax->ndim, argmax->shape) != nout)
            return DT_ERR(DT_ERR_INVALID_ARG, "%s: argmax needs kind max and %lld elements", fn,
                          (long long)nout);
        am = dt__cuda_ptr(argmax);
    }
    if (nout == 0)
        return DT_OK;
    if (n == 0 && kind == DT_REDUCE_KIND_MAX)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: max over dim %d of size 0", fn, dim);
    DT_CHECK(dt__cuda_use_device(fn, out));
    if (n == 0) /* sum 0, mean NaN */
        return dt__cuda_fill(out, kind == DT_REDUCE_KIND_MEAN ? NAN : 0.0);
    DT_CUDA_CHECK(dt__cu_reduce((int)kind, dt__cuda_ptr(x), nd, shape, strides, dim,
                                dt__cuda_ptr(out), am, DT_CUDA_STREAM),
                  fn);
    return DT_OK;
}

dt_status dt__cuda_sum_squares(const dt_tensor *x, double *out)
{
    const char *fn = "dt_kernel_sum_squares";
    if (out == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: out is NULL", fn);
    DT_CHECK(dt__cuda_check(fn, "x", x, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_use_device(fn, x));
    dt__cu_iter it;
    DT_CHECK(dt__cuda_iter_init(fn, &it, x, 0, NULL, NULL));
    int np = dt__cu_sum_squares_max_partials();
    double *buf = NULL, result = 0.0;
    dt_status s = DT_OK;
    DT_CHECK(dt__cuda_scratch(fn, sizeof(double) * (size_t)(np + 1), (void **)&buf));
    DT_CUDA_CHECK_GOTO(dt__cu_sum_squares(dt__cuda_ptr(x), &it, buf + 1, np, buf, DT_CUDA_STREAM),
                       fn, s, out_free);
    DT_CUDA_CHECK_GOTO(cudaMemcpy(&result, buf, sizeof(result), cudaMemcpyDeviceToHost), fn, s,
                       out_free);
    *out = result;
out_free:
    dt__cuda_scratch_free(buf);
    return s;
}
