/*
 * Autocast for matrix products (dt_autocast_set), as torch.autocast("cpu",
 * dtype=torch.bfloat16) does for mm/linear: the per-thread compute dtype, and
 * the GEMM that rounds f32 operands to it. Only the products change: their
 * results, every other op, the weights and the optimizer stay f32, so the
 * speed of a bf16 kernel comes without a second copy of the model.
 */
#include "dtensor/ops.h"
#include "ops/ops_internal.h"

static _Thread_local dt_dtype g_compute = DT_DTYPE_F32;

dt_status dt_autocast_set(dt_dtype dtype, dt_dtype *prev)
{
    if (dtype != DT_DTYPE_F32 && dtype != DT_DTYPE_BF16)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_autocast_set: dtype %s, expected f32 (off) or bf16",
                      dt_dtype_name(dtype));
    if (prev != NULL)
        *prev = g_compute;
    g_compute = dtype;
    return DT_OK;
}

dt_dtype dt_autocast_get(void)
{
    return g_compute;
}

/*
 * @p t rounded to bf16 on its device. Broadcast dims (stride 0: a weight
 * shared by a batch) are converted once and expanded again, not materialised.
 */
static dt_status to_bf16(const dt_kernel_ops *k, dt_tensor *t, dt_tensor **out)
{
    int64_t compact[DT_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++)
        compact[d] = t->strides[d] == 0 ? 1 : t->shape[d];
    dt_tensor *v = NULL, *h = NULL;
    dt_status s = dt__tensor_make_view(t, t->ndim, compact, t->strides, t->offset, &v);
    if (s == DT_OK)
        s = dt__kt_empty_as(t->ndim, compact, DT_DTYPE_BF16, t->device, DT_MEM_ACTIVATION, &h);
    if (s == DT_OK)
        s = k->copy(h, v);
    if (s == DT_OK)
        s = dt_tensor_expand(h, t->ndim, t->shape, out);
    dt_tensor_release(h);
    dt_tensor_release(v);
    return s;
}

/* Whether the last two dims of @p t are a transposed row-major matrix (a view x^T). */
static bool is_transposed_matrix(const dt_tensor *t)
{
    int n = t->ndim;
    if (n < 2 || t->shape[n - 2] < 2)
        return false;
    int64_t rows = t->shape[n - 2], cols = t->shape[n - 1];
    int64_t sr = t->strides[n - 2], sc = t->strides[n - 1];
    return !(sc == 1 && sr >= (cols > 1 ? cols : 1)) && sr == 1 && sc >= rows;
}

dt_status dt__ops_round(const dt_kernel_ops *k, dt_dtype compute, dt_tensor *t, dt_tensor **out)
{
    bool round = compute == DT_DTYPE_BF16 && t->dtype == DT_DTYPE_F32 &&
                 (k->supports == NULL || k->supports(DT_KOP_GEMM, DT_DTYPE_BF16));
    if (!round) {
        *out = dt_tensor_retain(t);
        return DT_OK;
    }
    if (!is_transposed_matrix(t))
        return to_bf16(k, t, out);
    /* x^T stays x^T: the copy keeps x's memory order, as the GEMM reads it */
    dt_tensor *x = NULL, *h = NULL;
    int n = t->ndim;
    DT_CHECK(dt_tensor_transpose(t, n - 2, n - 1, &x));
    dt_status s = to_bf16(k, x, &h);
    if (s == DT_OK)
        s = dt_tensor_transpose(h, n - 2, n - 1, out);
    dt_tensor_release(h);
    dt_tensor_release(x);
    return s;
}

dt_status dt__ops_gemm(const dt_kernel_ops *k, dt_dtype compute, dt_tensor *a, dt_tensor *b,
                       bool ta, bool tb, float alpha, float beta, dt_tensor *c)
{
    dt_tensor *ha = NULL, *hb = NULL;
    dt_status s = dt__ops_round(k, compute, a, &ha);
    if (s == DT_OK)
        s = dt__ops_round(k, compute, b, &hb);
    if (s == DT_OK)
        s = k->gemm(ha, hb, ta, tb, alpha, beta, c);
    dt_tensor_release(ha);
    dt_tensor_release(hb);
    return s;
}

dt_status dt__ops_gemm_bias(const dt_kernel_ops *k, dt_dtype compute, dt_tensor *a, dt_tensor *b,
                            bool ta, bool tb, dt_tensor *bias, dt_tensor *c)
{
    dt_tensor *ha = NULL, *hb = NULL, *eb = NULL;
    dt_status s = dt__ops_round(k, compute, a, &ha);
    if (s == DT_OK)
        s = dt__ops_round(k, compute, b, &hb);
    if (s == DT_OK && k->gemm_bias != NULL) {
        s = dt__kt_contiguous(bias, &eb);
        if (s == DT_OK)
            s = k->gemm_bias(ha, hb, ta, tb, eb, c);
    } else if (s == DT_OK) { /* the bias in c first, the product added to it */
        s = dt_tensor_expand(bias, c->ndim, c->shape, &eb);
        if (s == DT_OK)
            s = k->copy(c, eb);
        if (s == DT_OK)
            s = k->gemm(ha, hb, ta, tb, 1.0f, 1.0f, c);
    }
    dt_tensor_release(eb);
    dt_tensor_release(ha);
    dt_tensor_release(hb);
    return s;
}
