/* Table entries for the row kernels: softmax, layer norm, embedding, cross entropy. */
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/kernels_cuda.h"

dt_status dt__cuda_softmax(const dt_tensor *x, float scale, bool causal, bool log, dt_tensor *y)
{
    const char *fn = "dt_kernel_softmax";
    DT_CHECK(dt__cuda_check_out(fn, "y", y, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check(fn, "x", x, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check_same_shape(fn, "x", x, y));
    if (x->ndim < 1 || (causal && x->ndim < 2))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: x has %d dims, needs %d", fn, x->ndim,
                      causal ? 2 : 1);
    int64_t n = x->shape[x->ndim - 1], numel = dt__shape_numel(x->ndim, x->shape);
    if (numel == 0)
        return DT_OK;
    int64_t tq = causal ? x->shape[x->ndim - 2] : 1;
    DT_CHECK(dt__cuda_use_device(fn, y));
    const void *xd = NULL;
    void *tmp = NULL;
    DT_CHECK(dt__cuda_contig(fn, x, &xd, &tmp));
    cudaError_t e =
        dt__cu_softmax(xd, dt__cuda_ptr(y), numel / n, n, tq, scale, causal, log, DT_CUDA_STREAM);
    dt__cuda_scratch_free(tmp);
    DT_CUDA_CHECK(e, fn);
    return DT_OK;
}

dt_status dt__cuda_softmax_backward(const dt_tensor *y, const dt_tensor *gy, float scale, bool log,
                                    dt_tensor *gx)
{
    const char *fn = "dt_kernel_softmax_backward";
    DT_CHECK(dt__cuda_check_out(fn, "gx", gx, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check(fn, "y", y, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check(fn, "gy", gy, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check_same_shape(fn, "y", y, gx));
    DT_CHECK(dt__cuda_check_same_shape(fn, "gy", gy, gx));
    if (gx->ndim < 1)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: tensors have no dims", fn);
    int64_t n = gx->shape[gx->ndim - 1], numel = dt__shape_numel(gx->ndim, gx->shape);
    if (numel == 0)
        return DT_OK;
    DT_CHECK(dt__cuda_use_device(fn, gx));
    const void *yd = NULL, *gd = NULL;
    void *ty = NULL, *tg = NULL;
    dt_status s = DT_OK;
    DT_CHECK(dt__cuda_contig(fn, y, &yd, &ty));
    DT_CHECK_GOTO(dt__cuda_contig(fn, gy, &gd, &tg), s, out_free);
    DT_CUDA_CHECK_GOTO(
        dt__cu_softmax_backward(yd, gd, dt__cuda_ptr(gx), numel / n, n, scale, log, DT_CUDA_STREAM),
        fn, s, out_free);
out_free:
    dt__cuda_scratch_free(tg);
    dt__cuda_scratch_free(ty);
    return s;
}

/* Optional [n] parameter or [rows] statistic: contiguous data or NULL. */
static dt_status optional_vec(const char *fn, const char *what, const dt_tensor *t, int64_t n,
                              const void **data, void **tmp)
{
    *data = NULL;
    *tmp = NULL;
    if (t == NULL)
        return DT_OK;
    DT_CHECK(dt__cuda_check(fn, what, t, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check_numel(fn, what, t, n));
    return dt__cuda_contig(fn, t, data, tmp);
}

/* An optional f32 output (NULL: not wanted) of @p n elements. */
static dt_status optional_out(const char *fn, const char *what, const dt_tensor *o, int64_t n)
{
    if (o == NULL)
        return DT_OK;
    DT_CHECK(dt__cuda_check_out(fn, what, o, DT_DTYPE_F32));
    return dt__cuda_check_numel(fn, what, o, n);
}

dt_status dt__cuda_layer_norm(const dt_tensor *x, const dt_tensor *w, const dt_tensor *b, float eps,
                              dt_tensor *y, dt_tensor *mean, dt_tensor *rstd)
{
    const char *fn = "dt_kernel_layer_norm";
    DT_CHECK(dt__cuda_check_out(fn, "y", y, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check(fn, "x", x, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check_same_shape(fn, "x", x, y));
    if (x->ndim < 1)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: x has no dims", fn);
    int64_t n = x->shape[x->ndim - 1], numel = dt__shape_numel(x->ndim, x->shape);
    int64_t rows = dt__shape_numel(x->ndim - 1, x->shape); /* also when n == 0 (CPU does too) */
    DT_CHECK(optional_out(fn, "mean", mean, rows));
    DT_CHECK(optional_out(fn, "rstd", rstd, rows));
    if (numel == 0)
        return DT_OK;
    DT_CHECK(dt__cuda_use_device(fn, y));
    const void *xd = NULL, *wd = NULL, *bd = NULL;
    void *tx = NULL, *tw = NULL, *tb = NULL;
    dt_status s = DT_OK;
    DT_CHECK_GOTO(optional_vec(fn, "w", w, n, &wd, &tw), s, out_free);
    DT_CHECK_GOTO(optional_vec(fn, "b", b, n, &bd, &tb), s, out_free);
    DT_CHECK_GOTO(dt__cuda_contig(fn, x, &xd, &tx), s, out_free);
    DT_CUDA_CHECK_GOTO(dt__cu_layer_norm(xd, wd, bd, eps, dt__cuda_ptr(y),
                                         mean ? dt__cuda_ptr(mean) : NULL,
                                         rstd ? dt__cuda_ptr(rstd) : NULL, rows, n, DT_CUDA_STREAM),
                       fn, s, out_free);
out_free:
    dt__cuda_scratch_free(tx);
    dt__cuda_scratch_free(tb);
    dt__cuda_scratch_free(tw);
    return s;
}

dt_status dt__cuda_layer_norm_backward(const dt_tensor *x, const dt_tensor *w,
                                       const dt_tensor *mean, const dt_tensor *rstd,
                                       const dt_tensor *gy, dt_tensor *gx, dt_tensor *gw,
                                       dt_tensor *gb)
{
    const char *fn = "dt_kernel_layer_norm_backward";
    DT_CHECK(dt__cuda_check(fn, "x", x, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check(fn, "gy", gy, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check_same_shape(fn, "gy", gy, x));
    if (x->ndim < 1 || mean == NULL || rstd == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: needs x with dims and the saved mean/rstd", fn);
    int64_t n = x->shape[x->ndim - 1], numel = dt__shape_numel(x->ndim, x->shape);
    int64_t rows = dt__shape_numel(x->ndim - 1, x->shape); /* also when n == 0 (CPU does too) */
    if (gx != NULL) {
        DT_CHECK(dt__cuda_check_out(fn, "gx", gx, DT_DTYPE_F32));
        DT_CHECK(dt__cuda_check_same_shape(fn, "gx", gx, x));
    }
    DT_CHECK(optional_out(fn, "gw", gw, n));
    DT_CHECK(optional_out(fn, "gb", gb, n));
    if (numel == 0)
        return DT_OK;
    DT_CHECK(dt__cuda_use_device(fn, x));
    const void *xd = NULL, *wd = NULL, *md = NULL, *rd = NULL, *gd = NULL;
    void *tx = NULL, *tw = NULL, *tm = NULL, *tr = NULL, *tg = NULL;
    dt_status s = DT_OK;
    DT_CHECK_GOTO(optional_vec(fn, "w", w, n, &wd, &tw), s, out_free);
    DT_CHECK_GOTO(optional_vec(fn, "mean", mean, rows, &md, &tm), s, out_free);
    DT_CHECK_GOTO(optional_vec(fn, "rstd", rstd, rows, &rd, &tr), s, out_free);
    DT_CHECK_GOTO(dt__cuda_contig(fn, x, &xd, &tx), s, out_free);
    DT_CHECK_GOTO(dt__cuda_contig(fn, gy, &gd, &tg), s, out_free);
    DT_CUDA_CHECK_GOTO(dt__cu_layer_norm_backward(xd, wd, md, rd, gd, gx ? dt__cuda_ptr(gx) : NULL,
                                                  gw ? dt__cuda_ptr(gw) : NULL,
                                                  gb ? dt__cuda_ptr(gb) : NULL, rows, n,
                                                  DT_CUDA_STREAM),
                       fn, s, out_free);
out_free:
    dt__cuda_scratch_free(tg);
    dt__cuda_scratch_free(tx);
    dt__cuda_scratch_free(tr);
    dt__cuda_scratch_free(tm);
    dt__cuda_scratch_free(tw);
    return s;
}

dt_status dt__cuda_embedding(const dt_tensor *weight, const dt_tensor *ids, int64_t vocab_start,
                             dt_tensor *out)
{
    const char *fn = "dt_kernel_embedding";
    DT_CHECK(dt__cuda_check_out(fn, "out", out, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check(fn, "weight", weight, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check_int(fn, "ids", ids));
    int64_t rows, dim, n;
    DT_CHECK(dt__kernel_embedding_dims(fn, "weight", weight, ids, "out", out, &rows, &dim, &n));
    if (n == 0 || dim == 0)
        return DT_OK;
    DT_CHECK(dt__cuda_use_device(fn, out));
    const void *idd = NULL, *wd = dt__cuda_ptr(weight);
    void *tid = NULL, *tw = NULL;
    dt_status s = DT_OK;
    int64_t ld = weight->strides[0];
    if (weight->strides[1] != 1 && dim > 1) { /* a transposed view: pack it */
        DT_CHECK(dt__cuda_contig(fn, weight, &wd, &tw));
        ld = dim;
    }
    DT_CHECK_GOTO(dt__cuda_contig(fn, ids, &idd, &tid), s, out_free);
    DT_CUDA_CHECK_GOTO(dt__cu_embedding(wd, rows, ld, dim, idd, (int)ids->dtype, n, vocab_start,
                                        dt__cuda_ptr(out), DT_CUDA_STREAM),
                       fn, s, out_free);
out_free:
    dt__cuda_scratch_free(tid);
    dt__cuda_scratch_free(tw);
    return s;
}

dt_status dt__cuda_embedding_backward(const dt_tensor *ids, const dt_tensor *gy,
                                      int64_t vocab_start, dt_tensor *gweight)
{
    const char *fn = "dt_kernel_embedding_backward";
    DT_CHECK(dt__cuda_check_out(fn, "gweight", gweight, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check(fn, "gy", gy, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check_int(fn, "ids", ids));
    int64_t rows, dim, n;
    DT_CHECK(dt__kernel_embedding_dims(fn, "gweight", gweight, ids, "gy", gy, &rows, &dim, &n));
    if (n == 0 || dim == 0)
        return DT_OK;
    DT_CHECK(dt__cuda_use_device(fn, gweight));
    const void *idd = NULL, *gd = NULL;
    void *tid = NULL, *tg = NULL;
    dt_status s = DT_OK;
    DT_CHECK(dt__cuda_contig(fn, ids, &idd, &tid));
    DT_CHECK_GOTO(dt__cuda_contig(fn, gy, &gd, &tg), s, out_free);
    DT_CUDA_CHECK_GOTO(dt__cu_embedding_backward(idd, (int)ids->dtype, n, gd, dim, vocab_start,
                                                 dt__cuda_ptr(gweight), rows, DT_CUDA_STREAM),
                       fn, s, out_free);
out_free:
    dt__cuda_scratch_free(tg);
    dt__cuda_scratch_free(tid);
    return s;
}
