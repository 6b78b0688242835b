/*
 * Copies between host and device (and between two GPUs): dt_kernel_copy when
 * either side is a CUDA tensor on another device than the other. Contiguous
 * same-dtype copies are one cudaMemcpy; anything else is staged through a
 * contiguous buffer on the host (strided gather/scatter, one element at a
 * time) and one on the device (dtype conversion and strides by dt__cu_copy).
 * Synchronous: when it returns the data has arrived.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/kernels_cuda.h"

dt_status dt__cuda_copy_transfer(dt_tensor *dst, const dt_tensor *src);

static bool host_contiguous(const dt_tensor *t)
{
    return dt__cuda_is_contiguous(t); /* the rule does not depend on the device */
}

/* Contiguous host staging: *buf gets t's elements packed (t's dtype). */
static dt_status host_gather(const char *fn, const dt_tensor *t, int64_t n, void **buf)
{
    size_t esz = dt_dtype_size(t->dtype);
    char *b = malloc((size_t)n * esz + 1);
    if (b == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory to stage %lld elements", fn, (long long)n);
    /* dt__elem_offset counts elements from the tensor's first one */
    const char *base = (const char *)t->storage->data + t->offset * (int64_t)esz;
    for (int64_t i = 0; i < n; i++)
        memcpy(b + i * (int64_t)esz, base + dt__elem_offset(t, i) * (int64_t)esz, esz);
    *buf = b;
    return DT_OK;
}

static void host_scatter(dt_tensor *t, int64_t n, const void *buf)
{
    size_t esz = dt_dtype_size(t->dtype);
    char *base = (char *)t->storage->data + t->offset * (int64_t)esz;
    for (int64_t i = 0; i < n; i++)
        memcpy(base + dt__elem_offset(t, i) * (int64_t)esz, (const char *)buf + i * (int64_t)esz,
               esz);
}

/* dst (device, any layout/dtype) = a packed device buffer of src_dtype with dst's shape. */
static dt_status device_unpack(const char *fn, dt_tensor *dst, const void *packed,
                               dt_dtype src_dtype)
{
    dt__cu_iter it;
    DT_CHECK(dt__cuda_iter_init(fn, &it, dst, 0, NULL, NULL));
    /* op 1 walks the packed buffer: contiguous strides of dst's shape */
    it.nops = 2;
    it.ndim = dst->ndim;
    for (int d = 0; d < dst->ndim; d++) {
        it.shape[d] = dst->shape[d];
        it.st[0][d] = dst->strides[d];
    }
    dt__contiguous_strides(dst->ndim, dst->shape, it.st[1]);
    DT_CUDA_CHECK(dt__cu_copy(dt__cuda_ptr(dst), (int)dst->dtype, packed, (int)src_dtype, &it,
                              DT_CUDA_STREAM),
                  fn);
    return DT_OK;
}

/* A packed device buffer of dtype out_dtype holding src (device, any layout). */
static dt_status device_pack(const char *fn, const dt_tensor *src, dt_dtype out_dtype, int64_t n,
                             void **packed)
{
    void *buf = NULL;
    DT_CHECK(dt__cuda_scratch(fn, (size_t)n * dt_dtype_size(out_dtype), &buf));
    dt__cu_iter it;
    memset(&it, 0, sizeof(it));
    it.nops = 2;
    it.ndim = src->ndim;
    it.numel = n;
    for (int d = 0; d < src->ndim; d++) {
        it.shape[d] = src->shape[d];
        it.st[1][d] = src->strides[d];
    }
    dt__contiguous_strides(src->ndim, src->shape, it.st[0]);
    cudaError_t e =
        dt__cu_copy(buf, (int)out_dtype, dt__cuda_ptr(src), (int)src->dtype, &it, DT_CUDA_STREAM);
    if (e != cudaSuccess) {
        dt__cuda_scratch_free(buf);
        return dt__cuda_error(e, fn, "dt__cu_copy (pack)", __FILE__, __LINE__);
    }
    *packed = buf;
    return DT_OK;
}

static dt_status host_to_device(const char *fn, dt_tensor *dst, const dt_tensor *src, int64_t n)
{
    size_t sbytes = (size_t)n * dt_dtype_size(src->dtype);
    const char *sdata =
        (const char *)src->storage->data + src->offset * (int64_t)dt_dtype_size(src->dtype);
    DT_CHECK(dt__cuda_use_device(fn, dst));
    if (src->dtype == dst->dtype && host_contiguous(src) && dt__cuda_is_contiguous(dst)) {
        DT_CUDA_CHECK(cudaMemcpy(dt__cuda_ptr(dst), sdata, sbytes, cudaMemcpyHostToDevice), fn);
        return DT_OK;
    }
    void *hbuf = NULL, *dbuf = NULL;
    dt_status s = DT_OK;
    if (!host_contiguous(src))
        DT_CHECK(host_gather(fn, src, n, &hbuf));
    DT_CHECK_GOTO(dt__cuda_scratch(fn, sbytes, &dbuf), s, out_free_host);
    DT_CUDA_CHECK_GOTO(
        cudaMemcpy(dbuf, hbuf != NULL ? hbuf : sdata, sbytes, cudaMemcpyHostToDevice), fn, s,
        out_free_dev);
    s = device_unpack(fn, dst, dbuf, src->dtype);
    if (s == DT_OK) /* synchronous like the plain path: the caller may reuse src */
        DT_CUDA_CHECK_GOTO(cudaStreamSynchronize(DT_CUDA_STREAM), fn, s, out_free_dev);
out_free_dev:
    dt__cuda_scratch_free(dbuf);
out_free_host:
    free(hbuf);
    return s;
}

static dt_status device_to_host(const char *fn, dt_tensor *dst, const dt_tensor *src, int64_t n)
{
    size_t dbytes = (size_t)n * dt_dtype_size(dst->dtype);
    char *ddata = (char *)dst->storage->data + dst->offset * (int64_t)dt_dtype_size(dst->dtype);
    DT_CHECK(dt__cuda_use_device(fn, src));
    if (src->dtype == dst->dtype && dt__cuda_is_contiguous(src) && host_contiguous(dst)) {
        DT_CUDA_CHECK(cudaMemcpy(ddata, dt__cuda_ptr(src), dbytes, cudaMemcpyDeviceToHost), fn);
        return DT_OK;
    }
    void *dbuf = NULL, *hbuf = NULL;
    dt_status s = DT_OK;
    DT_CHECK(device_pack(fn, src, dst->dtype, n, &dbuf));
    if (!host_contiguous(dst)) {
        hbuf = malloc(dbytes + 1);
        if (hbuf == NULL) {
            s = DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory to stage %zu bytes", fn, dbytes);
            goto out_free_dev;
        }
    }
    DT_CUDA_CHECK_GOTO(
        cudaMemcpy(hbuf != NULL ? hbuf : ddata, dbuf, dbytes, cudaMemcpyDeviceToHost), fn, s,
        out_free_host);
    if (hbuf != NULL)
        host_scatter(dst, n, hbuf);
out_free_host:
    free(hbuf);
out_free_dev:
    dt__cuda_scratch_free(dbuf);
    return s;
}

/* GPU -> GPU on different devices: through the host when not a plain peer copy. */
static dt_status device_to_device(const char *fn, dt_tensor *dst, const dt_tensor *src, int64_t n)
{
    if (src->dtype == dst->dtype && dt__cuda_is_contiguous(src) && dt__cuda_is_contiguous(dst)) {
        DT_CUDA_CHECK(cudaMemcpyPeer(dt__cuda_ptr(dst), dst->device.index, dt__cuda_ptr(src),
                                     src->device.index, (size_t)n * dt_dtype_size(src->dtype)),
                      fn);
        return DT_OK;
    }
    return DT_ERR(DT_ERR_UNSUPPORTED,
                  "%s: strided or converting copy from cuda:%d to cuda:%d (make both "
                  "contiguous and of one dtype)",
                  fn, src->device.index, dst->device.index);
}

dt_status dt__cuda_copy_transfer(dt_tensor *dst, const dt_tensor *src)
{
    const char *fn = "dt_kernel_copy";
    int64_t n = dt__shape_numel(dst->ndim, dst->shape);
    bool dcu = dst->device.type == DT_DEVICE_CUDA, scu = src->device.type == DT_DEVICE_CUDA;
    if ((!dcu && dst->device.type != DT_DEVICE_CPU) || (!scu && src->device.type != DT_DEVICE_CPU))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: unknown device type %d -> %d", fn,
                      (int)src->device.type, (int)dst->device.type);
    if (n == 0)
        return DT_OK;
    if (dcu && !scu)
        return host_to_device(fn, dst, src, n);
    if (scu && !dcu)
        return device_to_host(fn, dst, src, n);
    if (dcu && scu)
        return device_to_device(fn, dst, src, n);
    return DT_ERR(DT_ERR_INVALID_ARG, "%s: neither tensor is on a CUDA device", fn);
}
