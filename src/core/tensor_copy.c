/* Copies: strided host copy with dtype conversion, fill, clone, equality, items, print. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/bf16.h"
#include "core/clones.h"
#include "core/copy.h"
#include "core/error.h"
#include "core/tensor_impl.h"

/*
 * Geometry shared by up to two tensors of the same shape, with size-1 dims
 * dropped and dims that are contiguous in both merged, so the innermost
 * loop runs as long as possible.
 */
typedef struct geom {
    int ndim;
    int64_t shape[DT_MAX_DIMS];
    int64_t st[2][DT_MAX_DIMS];
} geom;

static void geom_init(geom *g, const dt_tensor *a, const dt_tensor *b)
{
    g->ndim = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] == 1)
            continue;
        int64_t sa = a->strides[d], sb = b != NULL ? b->strides[d] : 0;
        int k = g->ndim - 1;
        if (k >= 0 && g->st[0][k] == a->shape[d] * sa &&
            (b == NULL || g->st[1][k] == a->shape[d] * sb)) {
            g->shape[k] *= a->shape[d];
            g->st[0][k] = sa;
            g->st[1][k] = sb;
            continue;
        }
        g->shape[g->ndim] = a->shape[d];
        g->st[0][g->ndim] = sa;
        g->st[1][g->ndim] = sb;
        g->ndim++;
    }
    if (g->ndim == 0) { /* scalar or all size-1: one element */
        g->ndim = 1;
        g->shape[0] = 1;
        g->st[0][0] = 1;
        g->st[1][0] = 1;
    }
}

/* Row callback: n elements at a (stride sa) and b (stride sb), in elements. */
typedef void (*row_fn)(void *ctx, char *a, int64_t sa, const char *b, int64_t sb, int64_t n);

/* Calls fn once per innermost row; pa/pb are the tensors' first-element addresses. */
static void geom_for_rows(const geom *g, size_t esa, size_t esb, char *pa, const char *pb,
                          row_fn fn, void *ctx)
{
    int last = g->ndim - 1;
    int64_t idx[DT_MAX_DIMS] = {0};
    int64_t rows = 1;
    for (int d = 0; d < last; d++)
        rows *= g->shape[d];
    int64_t oa = 0, ob = 0;
    for (int64_t r = 0; r < rows; r++) {
        fn(ctx, pa + oa * (int64_t)esa, g->st[0][last], pb + ob * (int64_t)esb, g->st[1][last],
           g->shape[last]);
        for (int d = last - 1; d >= 0; d--) { /* odometer step */
            idx[d]++;
            oa += g->st[0][d];
            ob += g->st[1][d];
            if (idx[d] < g->shape[d])
                break;
            oa -= idx[d] * g->st[0][d];
            ob -= idx[d] * g->st[1][d];
            idx[d] = 0;
        }
    }
}

typedef struct copy_ctx {
    dt_dtype dt, st;
    size_t des, ses;
} copy_ctx;

/* Unit-stride rows of the common conversions, written so gcc vectorises them
 * (per ISA: f32 -> bf16 is most of bf16 autocast's own cost). */
DT_CPU_CLONES static bool copy_row_contig(const copy_ctx *c, char *d, const char *s, int64_t n)
{
    if (c->dt == DT_DTYPE_F32 && c->st == DT_DTYPE_BF16) {
        dt__bf16_load((float *)d, (const uint16_t *)s, n, 1);
        return true;
    }
    if (c->dt == DT_DTYPE_BF16 && c->st == DT_DTYPE_F32) {
        dt__bf16_store((uint16_t *)d, (const float *)s, n);
        return true;
    }
    if (c->dt == DT_DTYPE_F32 && c->st == DT_DTYPE_F16) {
        float *restrict o = (float *)d;
        const uint16_t *restrict x = (const uint16_t *)s;
        for (int64_t i = 0; i < n; i++)
            o[i] = dt_f16_to_f32(x[i]);
        return true;
    }
    if (c->dt == DT_DTYPE_F16 && c->st == DT_DTYPE_F32) {
        uint16_t *restrict o = (uint16_t *)d;
        const float *restrict x = (const float *)s;
        for (int64_t i = 0; i < n; i++)
            o[i] = dt_f32_to_f16(x[i]);
        return true;
    }
    if (c->dt == DT_DTYPE_F32 && c->st == DT_DTYPE_F64) {
        float *restrict o = (float *)d;
        const double *restrict x = (const double *)s;
        for (int64_t i = 0; i < n; i++)
            o[i] = (float)x[i];
        return true;
    }
    if (c->dt == DT_DTYPE_F64 && c->st == DT_DTYPE_F32) {
        double *restrict o = (double *)d;
        const float *restrict x = (const float *)s;
        for (int64_t i = 0; i < n; i++)
            o[i] = x[i];
        return true;
    }
    return false;
}

static void copy_row(void *vctx, char *d, int64_t sd, const char *s, int64_t ss, int64_t n)
{
    const copy_ctx *c = vctx;
    if (c->dt == c->st) {
        size_t es = c->des;
        if (sd == 1 && ss == 1) {
            dt__copy_bytes(d, s, (size_t)n * es);
            return;
        }
        switch (es) { /* typed strided moves: memcpy of a variable size is a call */
        case 2:
            for (int64_t i = 0; i < n; i++)
                ((uint16_t *)d)[i * sd] = ((const uint16_t *)s)[i * ss];
            return;
        case 4:
            for (int64_t i = 0; i < n; i++)
                ((uint32_t *)d)[i * sd] = ((const uint32_t *)s)[i * ss];
            return;
        case 8:
            for (int64_t i = 0; i < n; i++)
                ((uint64_t *)d)[i * sd] = ((const uint64_t *)s)[i * ss];
            return;
        default:
            for (int64_t i = 0; i < n; i++)
                d[i * sd] = s[i * ss];
            return;
        }
    }
    if (sd == 1 && ss == 1 && copy_row_contig(c, d, s, n))
        return;
    int64_t bd = sd * (int64_t)c->des, bs = ss * (int64_t)c->ses;
    if (c->dt == DT_DTYPE_F32 && c->st == DT_DTYPE_BF16) {
        for (int64_t i = 0; i < n; i++)
            *(float *)(d + i * bd) = dt__bf16_to_f32(*(const uint16_t *)(s + i * bs));
    } else if (c->dt == DT_DTYPE_BF16 && c->st == DT_DTYPE_F32) {
        for (int64_t i = 0; i < n; i++)
            *(uint16_t *)(d + i * bd) = dt__bf16_from_f32(*(const float *)(s + i * bs));
    } else if (c->dt == DT_DTYPE_F32 && c->st == DT_DTYPE_F16) {
        for (int64_t i = 0; i < n; i++)
            *(float *)(d + i * bd) = dt_f16_to_f32(*(const uint16_t *)(s + i * bs));
    } else if (c->dt == DT_DTYPE_F16 && c->st == DT_DTYPE_F32) {
        for (int64_t i = 0; i < n; i++)
            *(uint16_t *)(d + i * bd) = dt_f32_to_f16(*(const float *)(s + i * bs));
    } else if (dt__dtype_is_int(c->dt) && dt__dtype_is_int(c->st)) {
        for (int64_t i = 0; i < n; i++)
            dt__store_elem_int(d + i * bd, c->dt, dt__load_elem_int(s + i * bs, c->st));
    } else {
        for (int64_t i = 0; i < n; i++)
            dt__store_elem(d + i * bd, c->dt, dt__load_elem(s + i * bs, c->st));
    }
}

/* The copy of a 2-d tile [rows, cols] where dst runs along cols and src along
 * rows (a transpose): done in 32 x 32 blocks so both sides stay in cache. */
static void copy_tiled(const copy_ctx *c, char *d, const int64_t *dst_st, const char *s,
                       const int64_t *src_st, int64_t rows, int64_t cols)
{
    const int64_t B = 32;
    for (int64_t r0 = 0; r0 < rows; r0 += B)
        for (int64_t c0 = 0; c0 < cols; c0 += B)
            for (int64_t r = r0; r < r0 + B && r < rows; r++)
                copy_row((void *)c, d + (r * dst_st[0] + c0 * dst_st[1]) * (int64_t)c->des,
                         dst_st[1], s + (r * src_st[0] + c0 * src_st[1]) * (int64_t)c->ses,
                         src_st[1], (cols - c0) < B ? cols - c0 : B);
}

void dt__host_copy(dt_tensor *dst, const dt_tensor *src)
{
    if (dt_tensor_numel(dst) == 0)
        return;
    copy_ctx c = {dst->dtype, src->dtype, dt_dtype_size(dst->dtype), dt_dtype_size(src->dtype)};
    geom g;
    geom_init(&g, dst, src);
    int l = g.ndim - 1;
    if (g.ndim >= 2 && g.st[1][l] != 1 && g.st[1][l - 1] == 1 && g.shape[l] >= 16 &&
        g.shape[l - 1] >= 16) {
        /* src runs along the dim before dst's: a transpose; tile the last two dims */
        int64_t outer = 1, idx[DT_MAX_DIMS] = {0};
        for (int d = 0; d < l - 1; d++)
            outer *= g.shape[d];
        char *pd = dt_tensor_data(dst);
        const char *ps = dt_tensor_data(src);
        for (int64_t o = 0; o < outer; o++) {
            int64_t od = 0, os = 0;
            for (int d = 0; d < l - 1; d++) {
                od += idx[d] * g.st[0][d];
                os += idx[d] * g.st[1][d];
            }
            copy_tiled(&c, pd + od * (int64_t)c.des, (int64_t[]){g.st[0][l - 1], g.st[0][l]},
                       ps + os * (int64_t)c.ses, (int64_t[]){g.st[1][l - 1], g.st[1][l]},
                       g.shape[l - 1], g.shape[l]);
            for (int d = l - 2; d >= 0; d--) {
                if (++idx[d] < g.shape[d])
                    break;
                idx[d] = 0;
            }
        }
        return;
    }
    geom_for_rows(&g, c.des, c.ses, dt_tensor_data(dst), dt_tensor_data(src), copy_row, &c);
}

static void fill_row(void *vctx, char *d, int64_t sd, const char *s, int64_t ss, int64_t n)
{
    const copy_ctx *c = vctx;
    switch (c->des) {
    case 1:
        if (sd == 1) {
            memset(d, *s, (size_t)n);
            return;
        }
        for (int64_t i = 0; i < n; i++)
            d[i * sd] = *s;
        return;
    case 2: {
        uint16_t v;
        memcpy(&v, s, 2);
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)d)[i * sd] = v;
        return;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, s, 4);
        if (sd == 1) {
            uint32_t *restrict o = (uint32_t *)d;
            for (int64_t i = 0; i < n; i++)
                o[i] = v;
            return;
        }
        for (int64_t i = 0; i < n; i++)
            ((uint32_t *)d)[i * sd] = v;
        return;
    }
    default: {
        uint64_t v;
        memcpy(&v, s, 8);
        for (int64_t i = 0; i < n; i++)
            ((uint64_t *)d)[i * sd] = v;
        return;
    }
    }
}

static const char *dev_name(dt_device d, char *buf, size_t len)
{
    snprintf(buf, len, "%s:%d", dt_device_type_name(d.type), d.index);
    return buf;
}

/* The device hooks of @p dev (its allocator's vtable: core does not see the
 * kernel tables, alloc.h), else DT_ERR_UNSUPPORTED. */
static dt_status device_ops(const char *fn, dt_device dev, const dt_allocator_ops **out)
{
    const dt_allocator_ops *k = dt__allocator_for(dev);
    if (k == NULL) {
        char b[32];
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: no kernels for device %s in this build", fn,
                      dev_name(dev, b, sizeof(b)));
    }
    *out = k;
    return DT_OK;
}

/* dst = src for tensors of the same shape: host loops when both are on the
 * CPU, else the copy kernel of the non-CPU side (the CUDA one also moves data
 * between host and device and between GPUs), reached through its hooks. */
static dt_status copy_any(const char *fn, dt_tensor *dst, const dt_tensor *src)
{
    if (dst->device.type == DT_DEVICE_CPU && src->device.type == DT_DEVICE_CPU) {
        dt__host_copy(dst, src);
        return DT_OK;
    }
    dt_device dev = dst->device.type != DT_DEVICE_CPU ? dst->device : src->device;
    const dt_allocator_ops *k = NULL;
    DT_CHECK(device_ops(fn, dev, &k));
    if (k->copy == NULL)
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: the %s kernels have no copy", fn, k->name);
    return k->copy(dst, src);
}

dt_status dt_tensor_fill(dt_tensor *t, double value)
{
    DT_CHECK(dt__check_local_tensor(__func__, "t", t));
    if (t->device.type != DT_DEVICE_CPU) {
        const dt_allocator_ops *k = NULL;
        DT_CHECK(device_ops(__func__, t->device, &k));
        if (k->fill == NULL)
            return DT_ERR(DT_ERR_UNSUPPORTED, "dt_tensor_fill: the %s kernels have no fill",
                          k->name);
        return k->fill(t, value);
    }
    if (dt_tensor_numel(t) == 0)
        return DT_OK;
    char elem[8];
    dt__store_elem(elem, t->dtype, value);
    copy_ctx c = {t->dtype, t->dtype, dt_dtype_size(t->dtype), 0};
    geom g;
    geom_init(&g, t, NULL);
    geom_for_rows(&g, c.des, 0, dt_tensor_data(t), elem, fill_row, &c);
    return DT_OK;
}

/* ------------------------------------------------------------ copies */

/* A contiguous copy of @p t in @p dtype on t's device. */
static dt_status copy_as(const char *fn, const dt_tensor *t, dt_dtype dtype, dt_tensor **out)
{
    dt_tensor *c = NULL;
    DT_CHECK(dt_tensor_empty(t->ndim, t->shape, dtype, t->device, &c));
    dt_status status = copy_any(fn, c, t);
    if (status != DT_OK) {
        dt_tensor_release(c);
        return status;
    }
    *out = c;
    return DT_OK;
}

dt_status dt_tensor_clone(const dt_tensor *t, dt_tensor **out)
{
    DT_ARG_NOT_NULL(out);
    DT_CHECK(dt__check_local_tensor(__func__, "t", t));
    return copy_as(__func__, t, t->dtype, out);
}

dt_status dt_tensor_contiguous(dt_tensor *t, dt_tensor **out)
{
    DT_ARG_NOT_NULL(out);
    DT_CHECK(dt__check_local_tensor(__func__, "t", t));
    if (dt_tensor_is_contiguous(t)) {
        *out = dt_tensor_retain(t);
        return DT_OK;
    }
    return dt_tensor_clone(t, out);
}

dt_status dt_tensor_copy_(dt_tensor *dst, const dt_tensor *src)
{
    DT_CHECK(dt__check_local_tensor(__func__, "dst", dst));
    DT_CHECK(dt__check_local_tensor(__func__, "src", src));
    if (dst->ndim != src->ndim ||
        memcmp(dst->shape, src->shape, (size_t)dst->ndim * sizeof(int64_t)) != 0) {
        char b1[256], b2[256];
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_tensor_copy_: dst shape %s differs from src shape %s",
                      dt__shape_str(dst->ndim, dst->shape, b1, sizeof(b1)),
                      dt__shape_str(src->ndim, src->shape, b2, sizeof(b2)));
    }
    return copy_any(__func__, dst, src);
}

dt_status dt_tensor_copy_async_(dt_tensor *dst, const dt_tensor *src)
{
    DT_CHECK(dt__check_local_tensor(__func__, "dst", dst));
    DT_CHECK(dt__check_local_tensor(__func__, "src", src));
    dt_device dev = dst->device.type != DT_DEVICE_CPU ? dst->device : src->device;
    const dt_allocator_ops *k = dt__allocator_for(dev);
    if (k == NULL || k->copy_async == NULL || dst->ndim != src->ndim ||
        memcmp(dst->shape, src->shape, (size_t)dst->ndim * sizeof(int64_t)) != 0)
        return dt_tensor_copy_(dst, src); /* checks, errors and synchronous devices */
    return k->copy_async(dst, src);
}

dt_status dt_tensor_to_dtype(const dt_tensor *t, dt_dtype dtype, dt_tensor **out)
{
    DT_ARG_NOT_NULL(out);
    DT_CHECK(dt__check_local_tensor(__func__, "t", t));
    DT_CHECK(dt__check_dtype(__func__, dtype));
    return copy_as(__func__, t, dtype, out);
}

dt_status dt_tensor_to_device(dt_tensor *t, dt_device device, dt_tensor **out)
{
    DT_ARG_NOT_NULL(out);
    DT_CHECK(dt__check_local_tensor(__func__, "t", t));
    if (t->device.type == device.type && t->device.index == device.index) {
        *out = dt_tensor_retain(t);
        return DT_OK;
    }
    dt_tensor *c = NULL;
    DT_CHECK(dt_tensor_empty(t->ndim, t->shape, t->dtype, device, &c));
    dt_status status = copy_any(__func__, c, t);
    if (status != DT_OK) {
        dt_tensor_release(c);
        return status;
    }
    *out = c;
    return DT_OK;
}

/* @p t itself when on the host, else a host copy of it (waits for the device). */
static dt_status on_host(const char *fn, const char *what, const dt_tensor *t, dt_tensor **out)
{
    DT_CHECK(dt__check_local_tensor(fn, what, t));
    return dt_tensor_to_device((dt_tensor *)t, dt_device_cpu(), out);
}

static bool host_equal(const dt_tensor *a, const dt_tensor *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim ||
        memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(int64_t)) != 0)
        return false;
    size_t es = dt_dtype_size(a->dtype);
    const char *pa = dt_tensor_data(a), *pb = dt_tensor_data(b);
    int64_t n = dt_tensor_numel(a);
    if (dt_tensor_is_contiguous(a) && dt_tensor_is_contiguous(b))
        return n == 0 || memcmp(pa, pb, (size_t)n * es) == 0;
    for (int64_t i = 0; i < n; i++)
        if (memcmp(pa + dt__elem_offset(a, i) * (int64_t)es,
                   pb + dt__elem_offset(b, i) * (int64_t)es, es) != 0)
            return false;
    return true;
}

bool dt_tensor_equal(const dt_tensor *a, const dt_tensor *b)
{
    dt_tensor *ha = NULL, *hb = NULL;
    bool eq = on_host(__func__, "a", a, &ha) == DT_OK && on_host(__func__, "b", b, &hb) == DT_OK &&
              host_equal(ha, hb);
    dt_tensor_release(ha);
    dt_tensor_release(hb);
    return eq;
}

/* ------------------------------------------------------------ items, print */

static double host_item_at(const dt_tensor *t, int64_t i)
{
    const char *p = dt_tensor_data(t);
    return dt__load_elem(p + dt__elem_offset(t, i) * (int64_t)dt_dtype_size(t->dtype), t->dtype);
}

double dt_tensor_item_at(const dt_tensor *t, int64_t i)
{
    if (dt__check_local_tensor(__func__, "t", t) != DT_OK)
        return NAN;
    int64_t n = dt_tensor_numel(t);
    if (i < 0 || i >= n) {
        DT_ERR(DT_ERR_INVALID_ARG,
               "dt_tensor_item_at: index %" PRId64 " is out of range for %" PRId64 " elements", i,
               n);
        return NAN;
    }
    if (t->device.type == DT_DEVICE_CPU)
        return host_item_at(t, i);
    /* one element: a 0-d view of it, staged to the host */
    dt_tensor *elem = NULL, *h = NULL;
    double v = NAN;
    int64_t none[1] = {0};
    if (dt__tensor_make_view((dt_tensor *)t, 0, none, none, t->offset + dt__elem_offset(t, i),
                             &elem) == DT_OK &&
        on_host(__func__, "t", elem, &h) == DT_OK)
        v = host_item_at(h, 0);
    dt_tensor_release(elem);
    dt_tensor_release(h);
    return v;
}

dt_status dt_tensor_item(const dt_tensor *t, double *out)
{
    DT_ARG_NOT_NULL(out);
    DT_CHECK(dt__check_local_tensor(__func__, "t", t));
    int64_t n = dt_tensor_numel(t);
    if (n != 1)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_tensor_item: tensor has %" PRId64 " elements, not 1",
                      n);
    dt_tensor *h = NULL;
    DT_CHECK(on_host(__func__, "t", t, &h));
    *out = host_item_at(h, 0);
    dt_tensor_release(h);
    return DT_OK;
}

void dt_tensor_print(const dt_tensor *t, FILE *f, int max_elems)
{
    if (f == NULL)
        return;
    if (t == NULL) {
        fprintf(f, "tensor(NULL)\n");
        return;
    }
    char buf[256];
    fprintf(f, "tensor(shape=%s, dtype=%s, device=%s:%d%s",
            dt__shape_str(t->ndim, t->shape, buf, sizeof(buf)), dt_dtype_name(t->dtype),
            dt_device_type_name(t->device.type), t->device.index,
            t->dist != NULL ? ", distributed" : "");
    dt_tensor *h = NULL;
    if (t->dist != NULL || t->storage == NULL || on_host(__func__, "t", t, &h) != DT_OK) {
        fprintf(f, ")\n");
        return;
    }
    int64_t n = dt_tensor_numel(h);
    int64_t show = max_elems < 0 ? n : (n < max_elems ? n : max_elems);
    fprintf(f, ", values=[");
    for (int64_t i = 0; i < show; i++)
        fprintf(f, i ? ", %.6g" : "%.6g", host_item_at(h, i));
    fprintf(f, "%s])\n", show < n ? ", ..." : "");
    dt_tensor_release(h);
}
