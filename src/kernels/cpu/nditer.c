/* The N-d strided iterator and the small helpers every CPU kernel shares. */
/* No FP-trap semantics: lets gcc if-convert the branch-free selects in the
 * loops below so they vectorise (must precede the includes: inline helpers). */
#pragma GCC optimize("no-trapping-math")
#include <stdlib.h>

#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/vmath.h"

bool dt__nditer_init(dt__nditer *it, int ndim, const int64_t *shape, int nops,
                     const int64_t *const *strides)
{
    memset(it, 0, sizeof(*it));
    it->nops = nops;
    int nd = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0)
            return false;
        if (shape[d] == 1)
            continue; /* size-1 dims never move any pointer */
        bool merge = nd > 0;
        for (int k = 0; k < nops && merge; k++)
            merge = strides[k][d] * shape[d] == it->strides[k][nd - 1];
        if (merge) {
            /* previous dim is contiguous over this one: fold it in */
            it->shape[nd - 1] *= shape[d];
            for (int k = 0; k < nops; k++)
                it->strides[k][nd - 1] = strides[k][d];
            continue;
        }
        it->shape[nd] = shape[d];
        for (int k = 0; k < nops; k++)
            it->strides[k][nd] = strides[k][d];
        nd++;
    }
    if (nd == 0) { /* a scalar (or all size-1 dims): one run of one element */
        it->shape[0] = 1;
        nd = 1;
    }
    it->ndim = nd;
    it->inner_n = it->shape[nd - 1];
    for (int k = 0; k < nops; k++)
        it->inner_stride[k] = it->strides[k][nd - 1];
    return true;
}

bool dt__nditer_next(dt__nditer *it)
{
    for (int d = it->ndim - 2; d >= 0; d--) {
        if (++it->idx[d] < it->shape[d]) {
            for (int k = 0; k < it->nops; k++)
                it->off[k] += it->strides[k][d];
            return true;
        }
        it->idx[d] = 0;
        for (int k = 0; k < it->nops; k++)
            it->off[k] -= it->strides[k][d] * (it->shape[d] - 1);
    }
    return false;
}

dt_status dt__cpu_broadcast_strides(const char *fn, const char *what, const dt_tensor *t, int ndim,
                                    const int64_t *shape, int64_t *strides)
{
    if (t->ndim > ndim)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s has %d dims, more than the output's %d", fn, what,
                      t->ndim, ndim);
    int lead = ndim - t->ndim;
    for (int d = 0; d < ndim; d++) {
        if (d < lead) {
            strides[d] = 0;
            continue;
        }
        int64_t s = t->shape[d - lead];
        if (s == shape[d])
            strides[d] = s == 1 ? 0 : t->strides[d - lead];
        else if (s == 1)
            strides[d] = 0;
        else
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "%s: %s dim %d has size %lld, not broadcastable to %lld", fn, what,
                          d - lead, (long long)s, (long long)shape[d]);
    }
    return DT_OK;
}

dt_status dt__cpu_check_local(const char *fn, const char *what, const dt_tensor *t)
{
    if (t == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s is NULL", fn, what);
    if (t->storage == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s has no local storage (distributed)", fn, what);
    if (t->device.type != DT_DEVICE_CPU)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s is on device type %d, not the CPU", fn, what,
                      (int)t->device.type);
    return DT_OK;
}

dt_status dt__cpu_check(const char *fn, const char *what, const dt_tensor *t, dt_dtype dtype)
{
    DT_CHECK(dt__cpu_check_local(fn, what, t));
    if (t->dtype != dtype)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s has dtype %s, expected %s", fn, what,
                      dt_dtype_name(t->dtype), dt_dtype_name(dtype));
    return DT_OK;
}

dt_status dt__cpu_check_out(const char *fn, const char *what, const dt_tensor *t, dt_dtype dtype)
{
    DT_CHECK(dt__cpu_check(fn, what, t, dtype));
    if (!dt_tensor_is_contiguous(t))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: output %s is not contiguous", fn, what);
    return DT_OK;
}

dt_status dt__cpu_check_same_shape(const char *fn, const char *what, const dt_tensor *t,
                                   const dt_tensor *ref)
{
    char a[96], b[96];
    bool same = t->ndim == ref->ndim;
    for (int d = 0; same && d < t->ndim; d++)
        same = t->shape[d] == ref->shape[d];
    if (!same)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s has shape %s, expected %s", fn, what,
                      dt__shape_str(t->ndim, t->shape, a, sizeof(a)),
                      dt__shape_str(ref->ndim, ref->shape, b, sizeof(b)));
    return DT_OK;
}

dt_status dt__cpu_contig(const dt_tensor *t, dt_tensor **tmp, const void **data)
{
    *tmp = NULL;
    if (dt_tensor_is_contiguous(t)) {
        *data = (const char *)t->storage->data + t->offset * (int64_t)dt_dtype_size(t->dtype);
        return DT_OK;
    }
    dt_tensor *c = NULL;
    DT_CHECK(dt_tensor_contiguous((dt_tensor *)t, &c));
    *data = dt_tensor_data(c);
    *tmp = c;
    return DT_OK;
}

dt_status dt__cpu_load_ids(const char *fn, const dt_tensor *ids, int64_t **out)
{
    DT_CHECK(dt__cpu_check_local(fn, "ids", ids));
    if (ids->dtype != DT_DTYPE_I64 && ids->dtype != DT_DTYPE_I32 && ids->dtype != DT_DTYPE_U16)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: ids have dtype %s, expected i64, i32 or u16", fn,
                      dt_dtype_name(ids->dtype));
    int64_t n = dt_tensor_numel(ids);
    int64_t *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(*v));
    if (v == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory for %lld ids", fn, (long long)n);
    const int64_t *st[1] = {ids->strides};
    dt__nditer it;
    int64_t j = 0;
    const char *base = (const char *)ids->storage->data;
    if (dt__nditer_init(&it, ids->ndim, ids->shape, 1, st)) {
        do {
            for (int64_t i = 0; i < it.inner_n; i++) {
                int64_t e = ids->offset + it.off[0] + i * it.inner_stride[0];
                if (ids->dtype == DT_DTYPE_I64)
                    v[j++] = ((const int64_t *)base)[e];
                else if (ids->dtype == DT_DTYPE_I32)
                    v[j++] = ((const int32_t *)base)[e];
                else
                    v[j++] = ((const uint16_t *)base)[e];
            }
        } while (dt__nditer_next(&it));
    }
    *out = v;
    return DT_OK;
}

#if DT_V4
/* The row max in explicit vectors with four accumulators: one chain of max
 * (latency 4, two per cycle) took a third of the softmax time. */
DT_V4_FN static float row_max_v4(const float *z, int64_t valid)
{
    float mx = -INFINITY;
    int64_t j0 = 0;
    if (valid >= 64) {
        dt__v16f m0 = dt__vld(z), m1 = dt__vld(z + 16), m2 = dt__vld(z + 32), m3 = dt__vld(z + 48);
        for (j0 = 64; j0 + 64 <= valid; j0 += 64) {
            dt__v16f a0 = dt__vld(z + j0), a1 = dt__vld(z + j0 + 16);
            dt__v16f a2 = dt__vld(z + j0 + 32), a3 = dt__vld(z + j0 + 48);
            m0 = DT_VSEL(a0 > m0, a0, m0);
            m1 = DT_VSEL(a1 > m1, a1, m1);
            m2 = DT_VSEL(a2 > m2, a2, m2);
            m3 = DT_VSEL(a3 > m3, a3, m3);
        }
        m0 = DT_VSEL(m1 > m0, m1, m0);
        m2 = DT_VSEL(m3 > m2, m3, m2);
        m0 = DT_VSEL(m2 > m0, m2, m0);
        mx = dt__vhmax(&m0);
    }
    for (; j0 < valid; j0++)
        mx = z[j0] > mx ? z[j0] : mx;
    return mx;
}
#endif

DT_CPU_CLONES
static float row_max_generic(const float *x, int64_t n)
{
    float lane[16];
    for (int l = 0; l < 16; l++)
        lane[l] = -INFINITY;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++)
            lane[l] = x[i + l] > lane[l] ? x[i + l] : lane[l];
    float m = -INFINITY;
    for (; i < n; i++)
        m = x[i] > m ? x[i] : m;
    for (int l = 0; l < 16; l++)
        m = lane[l] > m ? lane[l] : m;
    return m;
}

float dt__cpu_row_max(const float *x, int64_t n)
{
#if DT_V4
    if (dt__v4_ok())
        return row_max_v4(x, n);
#endif
    return row_max_generic(x, n);
}

/* The multi-versioned loops are static and reached through plain functions:
 * gcc exports the ifunc resolver of an extern one whatever its visibility. */
DT_CPU_CLONES
static float row_sum(const float *x, int64_t n)
{
    float lane[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++)
            lane[l] += x[i + l];
    float s = 0.0f;
    for (; i < n; i++)
        s += x[i];
    for (int l = 0; l < 16; l++)
        s += lane[l];
    return s;
}

DT_CPU_CLONES
static double row_sum_sq_f64(const float *x, int64_t n)
{
    double lane[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            lane[l] += (double)x[i + l] * (double)x[i + l];
    double s = 0.0;
    for (; i < n; i++)
        s += (double)x[i] * (double)x[i];
    for (int l = 0; l < 8; l++)
        s += lane[l];
    return s;
}

float dt__cpu_row_sum(const float *x, int64_t n)
{
    return row_sum(x, n);
}

double dt__cpu_row_sum_sq_f64(const float *x, int64_t n)
{
    return row_sum_sq_f64(x, n);
}
