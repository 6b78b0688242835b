/* The local tensor handle: creation, references, queries, shape helpers. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "core/tensor_impl.h"

/* ------------------------------------------------------------ shape helpers */

void dt__contiguous_strides(int ndim, const int64_t *shape, int64_t *strides)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= shape[d] > 1 ? shape[d] : 1;
    }
}

int64_t dt__shape_numel(int ndim, const int64_t *shape)
{
    return dt__shape_prod(shape, 0, ndim);
}

int64_t dt__shape_prod(const int64_t *shape, int from, int to)
{
    int64_t n = 1;
    for (int d = from; d < to; d++)
        n *= shape[d];
    return n;
}

const char *dt__shape_str(int ndim, const int64_t *shape, char *buf, size_t len)
{
    size_t pos = 0;
    if (len == 0)
        return buf;
    buf[0] = '\0';
    pos += (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && pos < len; d++)
        pos += (size_t)snprintf(buf + pos, len - pos, d ? ", %" PRId64 : "%" PRId64, shape[d]);
    if (pos < len)
        snprintf(buf + pos, len - pos, "]");
    return buf;
}

dt_status dt__check_shape(const char *fn, int ndim, const int64_t *shape)
{
    if (ndim < 0 || ndim > DT_MAX_DIMS)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: ndim %d is outside [0, %d]", fn, ndim, DT_MAX_DIMS);
    if (ndim > 0 && shape == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: shape is NULL for ndim %d", fn, ndim);
    /* the strides multiply the non-zero sizes: they must fit even when a zero
     * size makes the element count 0 */
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return DT_ERR(DT_ERR_INVALID_ARG, "%s: dim %d has negative size %" PRId64, fn, d,
                          shape[d]);
        if (shape[d] > 0 && __builtin_mul_overflow(n, shape[d], &n)) {
            char buf[256];
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "%s: shape %s is too large (its non-zero sizes multiply past "
                          "INT64_MAX)",
                          fn, dt__shape_str(ndim, shape, buf, sizeof(buf)));
        }
    }
    return DT_OK;
}

dt_status dt__wrap_dim(const char *fn, int d, int ndim, int *out)
{
    int w = d < 0 ? d + ndim : d;
    if (w < 0 || w >= ndim)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: dim %d is out of range for a %d-dim tensor", fn, d,
                      ndim);
    *out = w;
    return DT_OK;
}

dt_status dt__check_local_tensor(const char *fn, const char *what, const dt_tensor *t)
{
    if (t == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: tensor '%s' is NULL", fn, what);
    const char *dead = dt__handle_problem(t, DT__MAGIC_TENSOR);
    if (dead != NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument '%s' is %s tensor", fn, what, dead);
    if (t->dist != NULL || t->storage == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: tensor '%s' is distributed (no local storage); use dt_to_local", fn,
                      what);
    return DT_OK;
}

dt_status dt__check_host_tensor(const char *fn, const char *what, const dt_tensor *t)
{
    DT_CHECK(dt__check_local_tensor(fn, what, t));
    if (t->device.type != DT_DEVICE_CPU)
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: tensor '%s' is on device type %d, not the CPU", fn,
                      what, (int)t->device.type);
    return DT_OK;
}

int64_t dt__elem_offset(const dt_tensor *t, int64_t i)
{
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t n = t->shape[d];
        off += (i % n) * t->strides[d];
        i /= n;
    }
    return off;
}

/* ------------------------------------------------------------ handles */

dt_status dt__tensor_alloc_handle(int ndim, const int64_t *shape, dt_dtype dtype, dt_device device,
                                  dt_tensor **out)
{
    DT_CHECK(dt__check_shape(__func__, ndim, shape));
    DT_CHECK(dt__check_dtype(__func__, dtype));
    dt_tensor *t = dt__handle_new(sizeof(*t), DT__MAGIC_TENSOR);
    if (t == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt__tensor_alloc_handle: no memory for a handle");
    atomic_init(&t->refcount, 1);
    t->ndim = ndim;
    if (ndim > 0)
        memcpy(t->shape, shape, (size_t)ndim * sizeof(int64_t));
    dt__contiguous_strides(ndim, t->shape, t->strides);
    t->dtype = dtype;
    t->device = device;
    *out = t;
    return DT_OK;
}

dt_status dt__tensor_make_view(dt_tensor *t, int ndim, const int64_t *shape, const int64_t *strides,
                               int64_t offset, dt_tensor **out)
{
    DT_CHECK(dt__check_local_tensor(__func__, "t", t));
    dt_tensor *v = NULL;
    DT_CHECK(dt__tensor_alloc_handle(ndim, shape, t->dtype, t->device, &v));
    if (ndim > 0)
        memcpy(v->strides, strides, (size_t)ndim * sizeof(int64_t));
    v->offset = offset;
    v->storage = t->storage;
    atomic_fetch_add(&t->storage->refcount, 1);
    *out = v;
    return DT_OK;
}

/* ------------------------------------------------------------ creation */

dt_status dt_tensor_empty(int ndim, const int64_t *shape, dt_dtype dtype, dt_device device,
                          dt_tensor **out)
{
    DT_ARG_NOT_NULL(out);
    DT_CHECK(dt__check_shape(__func__, ndim, shape));
    DT_CHECK(dt__check_dtype(__func__, dtype));
    int64_t numel = dt__shape_numel(ndim, shape);
    int64_t nbytes = 0;
    if (__builtin_mul_overflow(numel, (int64_t)dt_dtype_size(dtype), &nbytes)) {
        char buf[256];
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: shape %s of %s overflows the byte count", __func__,
                      dt__shape_str(ndim, shape, buf, sizeof(buf)), dt_dtype_name(dtype));
    }
    dt_tensor *t = NULL;
    DT_CHECK(dt__tensor_alloc_handle(ndim, shape, dtype, device, &t));
    dt_status st = dt__storage_create((size_t)nbytes, device, &t->storage);
    if (st != DT_OK) {
        dt__handle_delete(t, sizeof(*t));
        return st;
    }
    *out = t;
    return DT_OK;
}

dt_status dt_tensor_zeros(int ndim, const int64_t *shape, dt_dtype dtype, dt_device device,
                          dt_tensor **out)
{
    return dt_tensor_full(ndim, shape, dtype, device, 0.0, out);
}

dt_status dt_tensor_ones(int ndim, const int64_t *shape, dt_dtype dtype, dt_device device,
                         dt_tensor **out)
{
    return dt_tensor_full(ndim, shape, dtype, device, 1.0, out);
}

dt_status dt_tensor_full(int ndim, const int64_t *shape, dt_dtype dtype, dt_device device,
                         double value, dt_tensor **out)
{
    DT_ARG_NOT_NULL(out);
    dt_tensor *t = NULL;
    DT_CHECK(dt_tensor_empty(ndim, shape, dtype, device, &t));
    dt_status st = dt_tensor_fill(t, value);
    if (st != DT_OK) {
        dt_tensor_release(t);
        return st;
    }
    *out = t;
    return DT_OK;
}

dt_status dt_tensor_from_buffer(int ndim, const int64_t *shape, dt_dtype dtype, const void *data,
                                dt_tensor **out)
{
    DT_ARG_NOT_NULL(out);
    dt_tensor *t = NULL;
    DT_CHECK(dt_tensor_empty(ndim, shape, dtype, dt_device_cpu(), &t));
    size_t n = dt_tensor_nbytes(t);
    if (n > 0 && data == NULL) {
        dt_tensor_release(t);
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_tensor_from_buffer: data is NULL for %zu bytes", n);
    }
    if (n > 0)
        memcpy(t->storage->data, data, n);
    *out = t;
    return DT_OK;
}

dt_status dt_tensor_arange(int64_t n, dt_dtype dtype, dt_tensor **out)
{
    DT_ARG_NOT_NULL(out);
    if (n < 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_tensor_arange: n %" PRId64 " is negative", n);
    dt_tensor *t = NULL;
    DT_CHECK(dt_tensor_empty(1, &n, dtype, dt_device_cpu(), &t));
    char *p = t->storage->data;
    size_t es = dt_dtype_size(dtype);
    for (int64_t i = 0; i < n; i++)
        dt__store_elem_int(p + (size_t)i * es, dtype, i);
    *out = t;
    return DT_OK;
}

/* ------------------------------------------------------------ references */

dt_tensor *dt_tensor_retain(dt_tensor *t)
{
    if (t != NULL && t->magic != DT__MAGIC_TENSOR) {
        DT_LOG_ERROR("core", "dt_tensor_retain: tensor %p is released", (void *)t);
        return NULL;
    }
    if (t != NULL)
        atomic_fetch_add(&t->refcount, 1);
    return t;
}

void dt_tensor_release(dt_tensor *t)
{
    if (t == NULL)
        return;
    if (t->magic != DT__MAGIC_TENSOR) { /* released twice: nothing to undo twice */
        DT_LOG_ERROR("core", "dt_tensor_release: tensor %p is already released", (void *)t);
        return;
    }
    if (atomic_fetch_sub(&t->refcount, 1) != 1)
        return;
    dt_tensor_release(t->grad);
    for (dt__grad_hook *h = t->grad_hooks, *next = NULL; h != NULL; h = next) {
        next = h->next;
        if (h->free_user != NULL)
            h->free_user(h->user);
        free(h);
    }
    if (t->grad_fn != NULL)
        ((dt_refobj *)t->grad_fn)->release(t->grad_fn);
    if (t->dist != NULL)
        ((dt_refobj *)t->dist)->release(t->dist);
    dt_tensor_release(t->local);
    dt__storage_release(t->storage);
    dt__handle_delete(t, sizeof(*t));
}

/* ------------------------------------------------------------ queries */

int dt_tensor_ndim(const dt_tensor *t)
{
    return t != NULL ? t->ndim : 0;
}

int64_t dt_tensor_dim(const dt_tensor *t, int d)
{
    if (t == NULL)
        return -1;
    int w = d < 0 ? d + t->ndim : d;
    return (w >= 0 && w < t->ndim) ? t->shape[w] : -1;
}

const int64_t *dt_tensor_shape(const dt_tensor *t)
{
    return t != NULL ? t->shape : NULL;
}

const int64_t *dt_tensor_strides(const dt_tensor *t)
{
    return t != NULL ? t->strides : NULL;
}

int64_t dt_tensor_numel(const dt_tensor *t)
{
    return t != NULL ? dt__shape_numel(t->ndim, t->shape) : 0;
}

size_t dt_tensor_nbytes(const dt_tensor *t)
{
    return t != NULL ? (size_t)dt_tensor_numel(t) * dt_dtype_size(t->dtype) : 0;
}

dt_dtype dt_tensor_dtype(const dt_tensor *t)
{
    return t != NULL ? t->dtype : DT_DTYPE_COUNT;
}

dt_device dt_tensor_device(const dt_tensor *t)
{
    return t != NULL ? t->device : dt_device_cpu();
}

bool dt_tensor_is_contiguous(const dt_tensor *t)
{
    if (t == NULL)
        return false;
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] == 0)
            return true;
        if (t->shape[d] != 1 && t->strides[d] != expect)
            return false;
        expect *= t->shape[d];
    }
    return true;
}

void *dt_tensor_data(const dt_tensor *t)
{
    if (t == NULL || t->storage == NULL || t->storage->data == NULL)
        return NULL;
    return (char *)t->storage->data + t->offset * (int64_t)dt_dtype_size(t->dtype);
}

bool dt_tensor_is_distributed(const dt_tensor *t)
{
    return t != NULL && t->dist != NULL;
}

void dt_tensor_set_mem_category(dt_tensor *t, dt_mem_category cat)
{
    if (t == NULL)
        return;
    if (t->dist != NULL) {
        dt_tensor_set_mem_category(t->local, cat);
        return;
    }
    dt__storage_set_category(t->storage, cat);
}

dt_mem_category dt_tensor_mem_category(const dt_tensor *t)
{
    if (t == NULL)
        return DT_MEM_OTHER;
    if (t->dist != NULL)
        return dt_tensor_mem_category(t->local);
    return t->storage != NULL ? t->storage->category : DT_MEM_OTHER;
}
