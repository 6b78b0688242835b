/*
 * Reading tensors and boxes of tensors out of an open safetensors file. A box
 * is read row by row (rows of the innermost dim), so a shard along any dim
 * touches only its own bytes of the mapping.
 */
#include <string.h>

#include "checkpoint/st_impl.h"
#include "core/error.h"
#include "core/tensor_impl.h"

static dt_status st_check_readable(const dt_safetensors *f, int i, const char *fn)
{
    DT_ARG_NOT_NULL(f);
    if (i < 0 || i >= f->n)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: index %d outside [0, %d)", fn, i, f->n);
    const dt_st_tensor *t = &f->tensors[i];
    if (t->dt->dtype == DT_DTYPE_COUNT)
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: tensor '%s' of %s has dtype %s, which dtensor lacks",
                      fn, t->name, f->path, t->dt->name);
    return DT_OK;
}

/* Copy the box [off, off + shape) of tensor @p t into contiguous @p dst. */
static void st_copy_box(const dt_safetensors *f, const dt_st_tensor *t, const int64_t *off,
                        const int64_t *shape, unsigned char *dst)
{
    size_t es = t->dt->size;
    int nd = t->ndim;
    if (nd == 0) {
        memcpy(dst, f->data + t->begin, es);
        return;
    }
    int64_t rows = 1;
    for (int d = 0; d < nd - 1; d++)
        rows *= shape[d];
    if (rows == 0 || shape[nd - 1] == 0)
        return;
    size_t row_bytes = (size_t)shape[nd - 1] * es;
    int64_t idx[DT_MAX_DIMS] = {0};
    for (int64_t r = 0; r < rows; r++) {
        /* element offset of (off + idx, off[last]) in the full tensor */
        int64_t lin = 0;
        for (int d = 0; d < nd - 1; d++)
            lin = lin * t->shape[d] + off[d] + idx[d];
        lin = lin * t->shape[nd - 1] + off[nd - 1];
        memcpy(dst + (size_t)r * row_bytes, f->data + t->begin + (uint64_t)lin * es, row_bytes);
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < shape[d])
                break;
            idx[d] = 0;
        }
    }
}

dt_status dt_safetensors_read_box(const dt_safetensors *f, int i, const int64_t *offset,
                                  dt_tensor *dst)
{
    static const char *fn = "dt_safetensors_read_box";
    DT_CHECK(st_check_readable(f, i, fn));
    DT_CHECK(dt__check_local_tensor(fn, "dst", dst));
    const dt_st_tensor *t = &f->tensors[i];
    if (dst->dtype != t->dt->dtype || dst->ndim != t->ndim)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: tensor '%s' is %s with %d dims, dst is %s with %d",
                      fn, t->name, t->dt->name, t->ndim, dt_dtype_name(dst->dtype), dst->ndim);
    int64_t off[DT_MAX_DIMS] = {0};
    for (int d = 0; d < t->ndim; d++) {
        off[d] = offset == NULL ? 0 : offset[d];
        if (off[d] < 0 || off[d] > t->shape[d] || dst->shape[d] > t->shape[d] - off[d]) {
            char a[128], b[128];
            return DT_ERR(
                DT_ERR_INVALID_ARG,
                "%s: box at dim %d offset %lld size %lld is outside tensor '%s' %s (dst %s)", fn, d,
                (long long)off[d], (long long)dst->shape[d], t->name,
                dt__shape_str(t->ndim, t->shape, a, sizeof(a)),
                dt__shape_str(dst->ndim, dst->shape, b, sizeof(b)));
        }
    }
    bool direct = dst->device.type == DT_DEVICE_CPU && dt_tensor_is_contiguous(dst);
    dt_tensor *tmp = NULL;
    if (!direct)
        DT_CHECK(dt_tensor_empty(dst->ndim, dst->shape, dst->dtype, dt_device_cpu(), &tmp));
    dt_tensor *target = direct ? dst : tmp;
    if (dt_tensor_numel(target) > 0)
        st_copy_box(f, t, off, dst->shape, dt_tensor_data(target));
    dt_status st = DT_OK;
    if (!direct) {
        st = dt_tensor_copy_(dst, tmp);
        dt_tensor_release(tmp);
    }
    return st;
}

dt_status dt_safetensors_load(const dt_safetensors *f, const char *name, dt_tensor **out)
{
    DT_ARG_NOT_NULL(out);
    int i = 0;
    DT_CHECK(dt_safetensors_find(f, name, &i));
    DT_CHECK(st_check_readable(f, i, "dt_safetensors_load"));
    const dt_st_tensor *t = &f->tensors[i];
    dt_tensor *x = NULL;
    DT_CHECK(dt_tensor_empty(t->ndim, t->shape, t->dt->dtype, dt_device_cpu(), &x));
    if (t->end > t->begin)
        memcpy(dt_tensor_data(x), f->data + t->begin, (size_t)(t->end - t->begin));
    *out = x;
    return DT_OK;
}
