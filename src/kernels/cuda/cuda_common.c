/* Host-side helpers of the CUDA backend: errors, checks, iterators, scratch. */
#include <string.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/kernels_cuda.h"

dt_status dt__cuda_error(cudaError_t e, const char *fn, const char *what, const char *file,
                         int line)
{
    dt_status s = (e == cudaErrorMemoryAllocation) ? DT_ERR_NO_MEMORY : DT_ERR_BACKEND;
    return dt__error(s, file, line, "%s: %s failed: %s (%s)", fn, what, cudaGetErrorString(e),
                     cudaGetErrorName(e));
}

dt_status dt__cuda_check(const char *fn, const char *what, const dt_tensor *t, dt_dtype dtype)
{
    if (t == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s is NULL", fn, what);
    if (t->dist != NULL || t->storage == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s is a distributed tensor (pass its local shard)",
                      fn, what);
    if (t->device.type != DT_DEVICE_CUDA)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s is on device type %d, not cuda", fn, what,
                      (int)t->device.type);
    if (dtype != DT_DTYPE_COUNT && t->dtype != dtype)
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: %s has dtype %s, the CUDA kernel takes %s", fn, what,
                      dt_dtype_name(t->dtype), dt_dtype_name(dtype));
    return DT_OK;
}

dt_status dt__cuda_check_out(const char *fn, const char *what, const dt_tensor *t, dt_dtype dtype)
{
    DT_CHECK(dt__cuda_check(fn, what, t, dtype));
    if (!dt__cuda_is_contiguous(t))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: output %s is not contiguous", fn, what);
    return DT_OK;
}

dt_status dt__cuda_check_int(const char *fn, const char *what, const dt_tensor *t)
{
    DT_CHECK(dt__cuda_check(fn, what, t, DT_DTYPE_COUNT));
    if (!dt__dtype_is_int(t->dtype))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s has dtype %s, expected an integer dtype", fn,
                      what, dt_dtype_name(t->dtype));
    return DT_OK;
}

dt_status dt__cuda_check_same_shape(const char *fn, const char *what, const dt_tensor *t,
                                    const dt_tensor *ref)
{
    bool same = t->ndim == ref->ndim;
    for (int d = 0; same && d < t->ndim; d++)
        same = t->shape[d] == ref->shape[d];
    if (!same) {
        char a[128], b[128];
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s has shape %s, expected %s", fn, what,
                      dt__shape_str(t->ndim, t->shape, a, sizeof(a)),
                      dt__shape_str(ref->ndim, ref->shape, b, sizeof(b)));
    }
    return DT_OK;
}

dt_status dt__cuda_check_numel(const char *fn, const char *what, const dt_tensor *t, int64_t n)
{
    int64_t have = dt__shape_numel(t->ndim, t->shape);
    if (have != n)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s has %lld elements, expected %lld", fn, what,
                      (long long)have, (long long)n);
    return DT_OK;
}

dt_status dt__cuda_use_device(const char *fn, const dt_tensor *t)
{
    DT_CUDA_CHECK(cudaSetDevice(t->device.index), fn);
    return DT_OK;
}

bool dt__cuda_is_contiguous(const dt_tensor *t)
{
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->strides[d] != expect)
            return false;
        expect *= t->shape[d];
    }
    return true;
}

/* Drop size-1 dims, then merge dim d into d+1 when every operand is contiguous across them. */
static void iter_collapse(dt__cu_iter *it)
{
    int nd = 0;
    for (int d = 0; d < it->ndim; d++) {
        if (it->shape[d] == 1)
            continue;
        it->shape[nd] = it->shape[d];
        for (int k = 0; k < it->nops; k++)
            it->st[k][nd] = it->st[k][d];
        nd++;
    }
    it->ndim = nd;
    if (nd <= 1)
        return;
    int w = 0; /* it->shape[w] is the dim being grown */
    for (int d = 1; d < nd; d++) {
        bool merge = true;
        for (int k = 0; k < it->nops; k++)
            if (it->st[k][w] != it->st[k][d] * it->shape[d])
                merge = false;
        if (merge) {
            it->shape[w] *= it->shape[d];
            for (int k = 0; k < it->nops; k++)
                it->st[k][w] = it->st[k][d];
        } else {
            w++;
            it->shape[w] = it->shape[d];
            for (int k = 0; k < it->nops; k++)
                it->st[k][w] = it->st[k][d];
        }
    }
    it->ndim = w + 1;
}

dt_status dt__cuda_iter_init(const char *fn, dt__cu_iter *it, const dt_tensor *out, int nin,
                             const dt_tensor *const *ins, const char *const *names)
{
    if (nin + 1 > DT_CU_MAX_OPS || out->ndim > DT_CU_MAX_DIMS)
        return DT_ERR(DT_ERR_INTERNAL, "%s: %d operands of %d dims exceed the iterator", fn,
                      nin + 1, out->ndim);
    memset(it, 0, sizeof(*it));
    it->ndim = out->ndim;
    it->nops = nin + 1;
    it->numel = 1;
    for (int d = 0; d < out->ndim; d++) {
        it->shape[d] = out->shape[d];
        it->st[0][d] = out->strides[d];
        it->numel *= out->shape[d];
    }
    for (int k = 0; k < nin; k++) {
        const dt_tensor *t = ins[k];
        if (t->ndim > out->ndim)
            return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s has %d dims, more than the output's %d", fn,
                          names[k], t->ndim, out->ndim);
        int lead = out->ndim - t->ndim;
        for (int d = 0; d < out->ndim; d++) {
            int td = d - lead;
            if (td < 0) {
                it->st[k + 1][d] = 0;
            } else if (t->shape[td] == out->shape[d]) {
                it->st[k + 1][d] = out->shape[d] == 1 ? 0 : t->strides[td];
            } else if (t->shape[td] == 1) {
                it->st[k + 1][d] = 0;
            } else {
                return DT_ERR(DT_ERR_INVALID_ARG,
                              "%s: %s dim %d has size %lld, which does not broadcast to %lld", fn,
                              names[k], td, (long long)t->shape[td], (long long)out->shape[d]);
            }
        }
    }
    if (it->numel > 0)
        iter_collapse(it);
    return DT_OK;
}

/* Scratch follows the device allocator's mode, so DT_ALLOC=system and
 * devices without memory pools work too (at the cost of a synchronising free). */
static bool scratch_pooled(void)
{
    int dev = 0;
    bool pooled = false;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        dt__cuda_device_pooled("dt_cuda_scratch", dev, &pooled) != DT_OK)
        return false;
    return pooled;
}

dt_status dt__cuda_scratch(const char *fn, size_t bytes, void **out)
{
    void *p = NULL;
    size_t n = bytes > 0 ? bytes : 1;
    if (scratch_pooled())
        DT_CUDA_CHECK(cudaMallocAsync(&p, n, DT_CUDA_STREAM), fn);
    else
        DT_CUDA_CHECK(cudaMalloc(&p, n), fn);
    *out = p;
    return DT_OK;
}

void dt__cuda_scratch_free(void *p)
{
    if (p == NULL)
        return;
    if (scratch_pooled())
        (void)cudaFreeAsync(p, DT_CUDA_STREAM);
    else
        (void)cudaFree(p);
}

dt_status dt__cuda_contig(const char *fn, const dt_tensor *t, const void **data, void **tmp)
{
    if (dt__cuda_is_contiguous(t)) {
        *data = dt__cuda_ptr(t);
        *tmp = NULL;
        return DT_OK;
    }
    int64_t n = dt__shape_numel(t->ndim, t->shape);
    void *buf = NULL;
    DT_CHECK(dt__cuda_scratch(fn, (size_t)n * dt_dtype_size(t->dtype), &buf));
    dt__cu_iter it;
    memset(&it, 0, sizeof(it));
    it.ndim = t->ndim;
    it.nops = 2;
    it.numel = n;
    memcpy(it.shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    dt__contiguous_strides(t->ndim, t->shape, it.st[0]);
    memcpy(it.st[1], t->strides, sizeof(int64_t) * (size_t)t->ndim);
    iter_collapse(&it);
    dt_status s = DT_OK;
    cudaError_t e =
        dt__cu_copy(buf, (int)t->dtype, dt__cuda_ptr(t), (int)t->dtype, &it, DT_CUDA_STREAM);
    if (e != cudaSuccess) {
        s = dt__cuda_error(e, fn, "contiguous copy", __FILE__, __LINE__);
        goto err_free;
    }
    *data = buf;
    *tmp = buf;
    return DT_OK;
err_free:
    dt__cuda_scratch_free(buf);
    return s;
}
