/*
 * Counter-based random fills: a value depends only on (seed, the element's flat
 * row-major index g in the global tensor), so every shard equals the same
 * slice of the full tensor. The exact algorithm (reproducible in Python):
 *
 *   r[0..3] = Philox4x32-10(counter = (g & 0xffffffff, g >> 32, 0, 0),
 *                           key = (seed & 0xffffffff, seed >> 32))
 *             (Salmon et al. 2011; multipliers 0xD2511F53, 0xCD9E8D57,
 *              key increments 0x9E3779B9, 0xBB67AE85; the key is bumped
 *              between rounds, 10 rounds)
 *   u01(a, b) = (((uint64)a << 21) | (b >> 11)) * 2^-53, in [0, 1)
 *   uniform:  lo + (hi - lo) * u01(r0, r1)
 *   normal:   u1 = 1 - u01(r0, r1) (in (0, 1]), u2 = u01(r2, r3),
 *             mean + std * sqrt(-2 ln u1) * cos(2 pi u2)
 *   computed in double, then stored in the tensor's dtype (round to nearest).
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/tensor_impl.h"

void dt__philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0;
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

static double u01(uint32_t a, uint32_t b)
{
    return (double)(((uint64_t)a << 21) | (b >> 11)) * 0x1p-53;
}

typedef struct rng_fill {
    bool normal;
    double p0, p1; /* mean, std or lo, hi */
    uint32_t key[2];
} rng_fill;

static double rng_value(const rng_fill *f, uint64_t g)
{
    uint32_t ctr[4] = {(uint32_t)g, (uint32_t)(g >> 32), 0, 0}, r[4];
    dt__philox4x32_10(ctr, f->key, r);
    if (!f->normal)
        return f->p0 + (f->p1 - f->p0) * u01(r[0], r[1]);
    double u1 = 1.0 - u01(r[0], r[1]);
    double u2 = u01(r[2], r[3]);
    return f->p0 + f->p1 * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

static dt_status rng_fill_host(const char *fn, dt_tensor *t, const rng_fill *f,
                               const int64_t *global_shape, const int64_t *global_offset);

/* A device tensor is filled on a host copy of its shape, then copied over:
 * the values are a function of the global index, wherever they live. */
static dt_status rng_fill_tensor(const char *fn, dt_tensor *t, const rng_fill *f,
                                 const int64_t *global_shape, const int64_t *global_offset)
{
    DT_CHECK(dt__check_local_tensor(fn, "t", t));
    if (t->device.type == DT_DEVICE_CPU)
        return rng_fill_host(fn, t, f, global_shape, global_offset);
    dt_tensor *h = NULL;
    DT_CHECK(dt_tensor_empty(t->ndim, t->shape, t->dtype, dt_device_cpu(), &h));
    dt_status st = rng_fill_host(fn, h, f, global_shape, global_offset);
    if (st == DT_OK)
        st = dt_tensor_copy_(t, h);
    dt_tensor_release(h);
    return st;
}

static dt_status rng_fill_host(const char *fn, dt_tensor *t, const rng_fill *f,
                               const int64_t *global_shape, const int64_t *global_offset)
{
    DT_CHECK(dt__check_host_tensor(fn, "t", t));
    if (!dt__dtype_is_float(t->dtype))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: dtype %s is not a float dtype", fn,
                      dt_dtype_name(t->dtype));
    const int64_t *gs = global_shape != NULL ? global_shape : t->shape;
    DT_CHECK(dt__check_shape(fn, t->ndim, gs));
    int64_t gstride[DT_MAX_DIMS], off[DT_MAX_DIMS] = {0};
    for (int d = 0; d < t->ndim; d++) {
        off[d] = global_offset != NULL ? global_offset[d] : 0;
        if (off[d] < 0 || t->shape[d] > gs[d] || off[d] > gs[d] - t->shape[d])
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "%s: dim %d: local [%" PRId64 ", %" PRId64 " + %" PRId64
                          ") is outside the global size %" PRId64,
                          fn, d, off[d], off[d], t->shape[d], gs[d]);
    }
    dt__contiguous_strides(t->ndim, gs, gstride);
    int64_t n = dt_tensor_numel(t);
    size_t es = dt_dtype_size(t->dtype);
    char *base = dt_tensor_data(t);
    int64_t idx[DT_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t g = 0, o = 0;
        for (int d = 0; d < t->ndim; d++) {
            g += (off[d] + idx[d]) * gstride[d];
            o += idx[d] * t->strides[d];
        }
        dt__store_elem(base + o * (int64_t)es, t->dtype, rng_value(f, (uint64_t)g));
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->shape[d])
                break;
            idx[d] = 0;
        }
    }
    return DT_OK;
}

dt_status dt_tensor_fill_normal(dt_tensor *t, double mean, double std, uint64_t seed,
                                const int64_t *global_shape, const int64_t *global_offset)
{
    if (!(std >= 0.0) || !isfinite(std) || !isfinite(mean))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_tensor_fill_normal: mean %g / std %g must be finite "
                      "with std >= 0",
                      mean, std);
    rng_fill f = {true, mean, std, {(uint32_t)seed, (uint32_t)(seed >> 32)}};
    return rng_fill_tensor(__func__, t, &f, global_shape, global_offset);
}

dt_status dt_tensor_fill_uniform(dt_tensor *t, double lo, double hi, uint64_t seed,
                                 const int64_t *global_shape, const int64_t *global_offset)
{
    if (!isfinite(lo) || !isfinite(hi) || !(lo <= hi))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_tensor_fill_uniform: range [%g, %g) is not finite "
                      "with lo <= hi",
                      lo, hi);
    rng_fill f = {false, lo, hi, {(uint32_t)seed, (uint32_t)(seed >> 32)}};
    return rng_fill_tensor(__func__, t, &f, global_shape, global_offset);
}
