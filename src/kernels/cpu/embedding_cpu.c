/*
 * Embedding gather and its scatter-add backward over a vocabulary shard:
 * rows [vocab_start, vocab_start + rows) of the full table live here; other
 * ids give zero rows (the Rowwise-on-Embedding style masks them).
 */
#include <stdlib.h>

#include "kernels/cpu/cpu_internal.h"

dt_status dt__cpu_embedding(const dt_tensor *weight, const dt_tensor *ids, int64_t vocab_start,
                            dt_tensor *out)
{
    const char *fn = "dt_kernel_embedding";
    DT_CHECK(dt__cpu_check_out(fn, "out", out, DT_DTYPE_F32));
    DT_CHECK(dt__cpu_check(fn, "weight", weight, DT_DTYPE_F32));
    DT_CHECK(dt__cpu_check_local(fn, "ids", ids));
    int64_t rows, dim, n;
    DT_CHECK(dt__kernel_embedding_dims(fn, "weight", weight, ids, "out", out, &rows, &dim, &n));
    int64_t *v = NULL;
    DT_CHECK(dt__cpu_load_ids(fn, ids, &v));
    const float *w = dt__f32(weight);
    int64_t rs = weight->strides[0], cs = weight->strides[1];
    float *o = dt__f32(out);
    for (int64_t i = 0; i < n; i++) {
        int64_t r = v[i] - vocab_start;
        float *dst = o + i * dim;
        if (r < 0 || r >= rows) {
            memset(dst, 0, (size_t)dim * sizeof(float));
        } else if (cs == 1) {
            memcpy(dst, w + r * rs, (size_t)dim * sizeof(float));
        } else {
            for (int64_t j = 0; j < dim; j++)
                dst[j] = w[r * rs + j * cs];
        }
    }
    free(v);
    return DT_OK;
}

dt_status dt__cpu_embedding_backward(const dt_tensor *ids, const dt_tensor *gy, int64_t vocab_start,
                                     dt_tensor *gweight)
{
    const char *fn = "dt_kernel_embedding_backward";
    DT_CHECK(dt__cpu_check_out(fn, "gweight", gweight, DT_DTYPE_F32));
    DT_CHECK(dt__cpu_check(fn, "gy", gy, DT_DTYPE_F32));
    DT_CHECK(dt__cpu_check_local(fn, "ids", ids));
    int64_t rows, dim, n;
    DT_CHECK(dt__kernel_embedding_dims(fn, "gweight", gweight, ids, "gy", gy, &rows, &dim, &n));
    int64_t *v = NULL;
    dt_tensor *tg = NULL;
    const void *gd = NULL;
    DT_CHECK(dt__cpu_load_ids(fn, ids, &v));
    dt_status s = dt__cpu_contig(gy, &tg, &gd);
    if (s != DT_OK) {
        free(v);
        return s;
    }
    float *gw = dt__f32(gweight);
    for (int64_t i = 0; i < n; i++) {
        int64_t r = v[i] - vocab_start;
        if (r < 0 || r >= rows)
            continue;
        const float *restrict src = (const float *)gd + i * dim;
        float *restrict dst = gw + r * dim;
        for (int64_t j = 0; j < dim; j++)
            dst[j] += src[j];
    }
    dt_tensor_release(tg);
    free(v);
    return DT_OK;
}
