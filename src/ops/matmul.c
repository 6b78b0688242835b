/* Matrix products: batched matmul with transposes, and linear (y = x W^T + b). */
#include <string.h>

#include "dtensor/autograd.h"
#include "dtensor/ops.h"
#include "ops/ops_internal.h"

/* The node slot holding the dtype the forward's products ran in (autocast.c). */
#define IV_COMPUTE 8
/* dt_matmul's node: the rank of b (the weight-gradient shortcut needs it) */
#define IV_B_NDIM 2

/*
 * A gemm operand with unit stride in its last dim, expanded to the batch
 * dims of the result. A transposed view of a contiguous matrix is used as is
 * with its transpose flag flipped, so x^T never costs a copy.
 */
static dt_status gemm_operand(dt_tensor *t, bool *trans, int bnd, const int64_t *bshape,
                              dt_tensor **out)
{
    int n = t->ndim;
    int64_t rows = t->shape[n - 2], cols = t->shape[n - 1];
    int64_t sr = t->strides[n - 2], sc = t->strides[n - 1];
    int64_t shape[DT_MAX_DIMS];
    dt_tensor *base = NULL;
    dt_status s;
    if (sc == 1 && sr >= (cols > 1 ? cols : 1)) {
        base = dt_tensor_retain(t);
    } else if (sr == 1 && sc >= (rows > 1 ? rows : 1) && rows > 1) {
        DT_CHECK(dt_tensor_transpose(t, n - 2, n - 1, &base));
        *trans = !*trans;
    } else {
        DT_CHECK(dt__kt_contiguous(t, &base));
    }
    memcpy(shape, bshape, sizeof(shape[0]) * (size_t)bnd);
    shape[bnd] = base->shape[n - 2];
    shape[bnd + 1] = base->shape[n - 1];
    s = dt_tensor_expand(base, bnd + 2, shape, out);
    dt_tensor_release(base);
    return s;
}

/* Broadcast the batch dims (all but the last two) of a and b. */
static dt_status batch_shape(const char *op, const dt_tensor *a, const dt_tensor *b, int *bnd,
                             int64_t *bshape)
{
    int na = a->ndim - 2, nb = b->ndim - 2, n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int ia = i - (n - na), ib = i - (n - nb);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return DT_ERR(DT_ERR_INVALID_ARG, "%s: batch dim %d does not broadcast (%lld vs %lld)",
                          op, i, (long long)da, (long long)db);
        bshape[i] = da == 1 ? db : da;
    }
    *bnd = n;
    return DT_OK;
}

/* c = op(a) @ op(b) into a new activation tensor; shapes already validated. */
static dt_status matmul_raw(dt_tensor *a, dt_tensor *b, bool ta, bool tb, dt_dtype compute,
                            dt_tensor **out)
{
    const dt_kernel_ops *k = NULL;
    int bnd = 0;
    int64_t shape[DT_MAX_DIMS];
    dt_tensor *ea = NULL, *eb = NULL, *c = NULL;
    dt_status s;
    DT_CHECK(dt__kt_kernels("dt_matmul", a->device, DT_KOP_GEMM, &k));
    DT_CHECK(batch_shape("dt_matmul", a, b, &bnd, shape));
    shape[bnd] = ta ? a->shape[a->ndim - 1] : a->shape[a->ndim - 2];
    shape[bnd + 1] = tb ? b->shape[b->ndim - 2] : b->shape[b->ndim - 1];
    DT_CHECK_GOTO(gemm_operand(a, &ta, bnd, shape, &ea), s, err);
    DT_CHECK_GOTO(gemm_operand(b, &tb, bnd, shape, &eb), s, err);
    DT_CHECK_GOTO(dt__kt_empty(bnd + 2, shape, a->device, &c), s, err);
    DT_CHECK_GOTO(dt__ops_gemm(k, compute, ea, eb, ta, tb, 1.0f, 0.0f, c), s, err);
    dt_tensor_release(ea);
    dt_tensor_release(eb);
    *out = c;
    return DT_OK;
err:
    dt_tensor_release(c);
    dt_tensor_release(ea);
    dt_tensor_release(eb);
    return s;
}

/*
 * Gradient of a 2-d b shared by every batch of a [..., M, K]: one gemm over
 * the flattened rows, instead of a batched product summed afterwards.
 */
static dt_status flat_weight_grad(dt_tensor *a, dt_tensor *g, bool tb, dt_dtype compute,
                                  dt_tensor **out)
{
    const dt_kernel_ops *k = NULL;
    dt_tensor *ac = NULL, *a2 = NULL, *g2 = NULL, *r = NULL;
    int64_t kk = a->shape[a->ndim - 1], n = g->shape[g->ndim - 1];
    int64_t rows = dt_tensor_numel(g) / (n ? n : 1);
    int64_t as[2] = {rows, kk}, ast[2] = {kk, 1}, gs[2] = {rows, n}, gst[2] = {n, 1};
    int64_t rs[2] = {tb ? n : kk, tb ? kk : n};
    dt_status s;
    DT_CHECK(dt__kt_kernels("dt_matmul", g->device, DT_KOP_GEMM, &k));
    DT_CHECK(dt__kt_contiguous(a, &ac));
    DT_CHECK_GOTO(dt__tensor_make_view(ac, 2, as, ast, ac->offset, &a2), s, out);
    DT_CHECK_GOTO(dt__tensor_make_view(g, 2, gs, gst, g->offset, &g2), s, out);
    DT_CHECK_GOTO(dt__kt_empty(2, rs, g->device, &r), s, out);
    if (!tb) /* dB [K, N] = A^T dC */
        DT_CHECK_GOTO(dt__ops_gemm(k, compute, a2, g2, true, false, 1.0f, 0.0f, r), s, out);
    else /* dB [N, K] = dC^T A */
        DT_CHECK_GOTO(dt__ops_gemm(k, compute, g2, a2, true, false, 1.0f, 0.0f, r), s, out);
    *out = r;
    r = NULL;
out:
    dt_tensor_release(r);
    dt_tensor_release(g2);
    dt_tensor_release(a2);
    dt_tensor_release(ac);
    return s;
}

/* Both input gradients from g (already rounded to the forward's dtype). */
static dt_status matmul_grads(dt_ag_node *node, dt_tensor *g, dt_dtype cd, dt_tensor **gx)
{
    dt_tensor *a = node->saved[0], *b = node->saved[1];
    bool ta = node->iv[0] != 0, tb = node->iv[1] != 0;
    /* C = A' B' with A' = op(A), B' = op(B): dA' = dC B'^T, dB' = A'^T dC. */
    if (dt__ag_input_needs_grad(node, 0)) {
        if (!ta)
            DT_CHECK(matmul_raw(g, b, false, !tb, cd, &gx[0]));
        else
            DT_CHECK(matmul_raw(b, g, tb, true, cd, &gx[0]));
    }
    /* b itself is saved only when a needs a gradient: its rank is in iv */
    if (dt__ag_input_needs_grad(node, 1) && node->iv[IV_B_NDIM] == 2 && a->ndim > 2 && !ta)
        return flat_weight_grad(a, g, tb, cd, &gx[1]);
    if (dt__ag_input_needs_grad(node, 1)) {
        if (!tb)
            DT_CHECK(matmul_raw(a, g, !ta, false, cd, &gx[1]));
        else
            DT_CHECK(matmul_raw(g, a, true, ta, cd, &gx[1]));
    }
    return DT_OK;
}

static dt_status matmul_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    const dt_kernel_ops *k = NULL;
    dt_tensor *g = NULL;
    dt_dtype cd = (dt_dtype)node->iv[IV_COMPUTE];
    DT_CHECK(dt__kt_kernels("dt_matmul", gy[0]->device, DT_KOP_GEMM, &k));
    DT_CHECK(dt__ops_round(k, cd, gy[0], &g)); /* once for both products */
    dt_status s = matmul_grads(node, g, cd, gx);
    dt_tensor_release(g);
    return s;
}

/*
 * What the node keeps of operand @p t (@p rounded: it as the product used
 * it). An activation is kept rounded: half the bytes, and backward does not
 * round it again. Anything else (a parameter) is kept as is, so ZeRO-3 can
 * drop a gathered parameter's storage between forward and backward.
 */
static dt_tensor *saved_operand(dt_tensor *t, dt_tensor *rounded)
{
    return t->storage != NULL && t->storage->category == DT_MEM_ACTIVATION ? rounded : t;
}

dt_status dt_matmul(dt_tensor *a, dt_tensor *b, bool trans_a, bool trans_b, dt_tensor **out)
{
    const char *name = "dt_matmul";
    const dt_kernel_ops *k = NULL;
    dt_tensor *ins[2] = {a, b}, *y = NULL, *ra = NULL, *rb = NULL;
    dt_ag_node *node = NULL;
    int bnd = 0;
    int64_t bshape[DT_MAX_DIMS];
    dt_status s;
    DT_CHECK(dt__kt_check_f32(name, "a", a));
    DT_CHECK(dt__kt_check_f32(name, "b", b));
    if (out == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'out' is NULL", name);
    DT__DIST_DISPATCH(name, 2, ins, matmul, a, b, trans_a, trans_b, out);
    DT_CHECK(dt__ops_check_same_device(name, a, b));
    if (a->ndim < 2 || b->ndim < 2)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: inputs need >= 2 dims (a has %d, b has %d)", name,
                      a->ndim, b->ndim);
    int64_t ka = trans_a ? a->shape[a->ndim - 2] : a->shape[a->ndim - 1];
    int64_t kb = trans_b ? b->shape[b->ndim - 1] : b->shape[b->ndim - 2];
    if (ka != kb) {
        char sa[96], sb[96];
        return DT_ERR(
            DT_ERR_INVALID_ARG, "%s: inner dims differ: a %s%s has K=%lld, b %s%s has K=%lld", name,
            dt__shape_str(a->ndim, a->shape, sa, sizeof(sa)), trans_a ? "^T" : "", (long long)ka,
            dt__shape_str(b->ndim, b->shape, sb, sizeof(sb)), trans_b ? "^T" : "", (long long)kb);
    }
    DT_CHECK(batch_shape(name, a, b, &bnd, bshape));
    DT_CHECK(dt__kt_kernels(name, a->device, DT_KOP_GEMM, &k));
    dt_dtype compute = dt_autocast_get();
    /* under autocast the operands are rounded here, so backward can keep them */
    DT_CHECK_GOTO(dt__ops_round(k, compute, a, &ra), s, err_y);
    DT_CHECK_GOTO(dt__ops_round(k, compute, b, &rb), s, err_y);
    DT_CHECK_GOTO(matmul_raw(ra, rb, trans_a, trans_b, compute, &y), s, err_y);
    if (dt__ag_should_record(2, ins)) {
        DT_CHECK_GOTO(dt__ag_node_create(name, matmul_backward, 2, ins, &node), s, err_y);
        node->iv[0] = trans_a;
        node->iv[1] = trans_b;
        node->iv[IV_COMPUTE] = compute;
        node->iv[IV_B_NDIM] = b->ndim;
        dt_tensor *sa = dt__ag_input_needs_grad(node, 1) ? saved_operand(a, ra) : NULL;
        dt_tensor *sb = dt__ag_input_needs_grad(node, 0) ? saved_operand(b, rb) : NULL;
        DT_CHECK_GOTO(dt__ag_save(node, sa), s, err_node);
        DT_CHECK_GOTO(dt__ag_save(node, sb), s, err_node);
        DT_CHECK_GOTO(dt__ag_attach(node, 1, &y), s, err_y);
    }
    dt_tensor_release(ra);
    dt_tensor_release(rb);
    *out = y;
    return DT_OK;
err_node:
    dt__ag_node_release(node);
err_y:
    dt_tensor_release(ra);
    dt_tensor_release(rb);
    dt_tensor_release(y);
    return s;
}

/* ------------------------------------------------------------ linear */

/* Product of all dims but the last: the rows of x [..., in], even when in is 0. */
static int64_t lead_rows(const dt_tensor *x)
{
    int64_t r = 1;
    for (int d = 0; d + 1 < x->ndim; d++)
        r *= x->shape[d];
    return r;
}

/* A 2-d [rows, cols] view of contiguous t. */
static dt_status view2d(dt_tensor *t, int64_t rows, int64_t cols, dt_tensor **out)
{
    int64_t shape[2] = {rows, cols}, strides[2] = {cols, 1};
    return dt__tensor_make_view(t, 2, shape, strides, t->offset, out);
}

static dt_status linear_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    const dt_kernel_ops *k = NULL;
    dt_tensor *x = node->saved[0], *w = NULL, *g2 = NULL, *gh = NULL, *x2 = NULL, *v = NULL;
    dt_tensor *r = NULL;
    int64_t in = node->iv[0], outf = node->iv[1], rows = node->iv[2];
    dt_dtype cd = (dt_dtype)node->iv[IV_COMPUTE];
    int64_t wshape[2] = {outf, in};
    dt_status s;
    DT_CHECK(dt__kt_kernels("dt_linear", gy[0]->device, DT_KOP_GEMM, &k));
    DT_CHECK(view2d(gy[0], rows, outf, &g2));
    DT_CHECK_GOTO(dt__ops_round(k, cd, g2, &gh), s, err); /* once for both products */
    if (dt__ag_input_needs_grad(node, 0)) {               /* gx = gy W */
        dt_ag_meta *m = &node->inputs[0].meta;
        DT_CHECK_GOTO(dt__kt_contiguous(node->saved[1], &w), s, err);
        DT_CHECK_GOTO(dt__kt_empty(m->ndim, m->shape, m->device, &r), s, err);
        DT_CHECK_GOTO(view2d(r, rows, in, &v), s, err);
        DT_CHECK_GOTO(dt__ops_gemm(k, cd, gh, w, false, false, 1.0f, 0.0f, v), s, err);
        dt_tensor_release(v);
        v = NULL;
        gx[0] = r;
        r = NULL;
    }
    if (dt__ag_input_needs_grad(node, 1)) { /* gW = gy^T x (x saved rounded when autocast) */
        DT_CHECK_GOTO(view2d(x, rows, in, &x2), s, err);
        DT_CHECK_GOTO(dt__kt_empty(2, wshape, gy[0]->device, &r), s, err);
        DT_CHECK_GOTO(dt__ops_gemm(k, cd, gh, x2, true, false, 1.0f, 0.0f, r), s, err);
        gx[1] = r;
        r = NULL;
    }
    if (dt__ag_input_needs_grad(node, 2)) /* gb = sum of gy over rows */
        DT_CHECK_GOTO(dt__kt_reduce_to_shape(g2, 1, &outf, &gx[2]), s, err);
    s = DT_OK;
err:
    dt_tensor_release(r);
    dt_tensor_release(v);
    dt_tensor_release(x2);
    dt_tensor_release(w);
    dt_tensor_release(gh);
    dt_tensor_release(g2);
    return s;
}

static dt_status linear_check(const char *name, dt_tensor *x, dt_tensor *w, dt_tensor *bias)
{
    char sx[96], sw[96];
    DT_CHECK(dt__kt_check_f32(name, "x", x));
    DT_CHECK(dt__kt_check_f32(name, "w", w));
    if (bias != NULL)
        DT_CHECK(dt__kt_check_f32(name, "bias", bias));
    DT_CHECK(dt__ops_check_same_device(name, x, w));
    if (bias != NULL)
        DT_CHECK(dt__ops_check_same_device(name, x, bias));
    if (w->ndim != 2 || x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1])
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: x %s and w %s do not fit (w must be [out, in], x [..., in])", name,
                      dt__shape_str(x->ndim, x->shape, sx, sizeof(sx)),
                      dt__shape_str(w->ndim, w->shape, sw, sizeof(sw)));
    if (bias != NULL && (bias->ndim != 1 || bias->shape[0] != w->shape[0]))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: bias shape %s, expected [%lld]", name,
                      dt__shape_str(bias->ndim, bias->shape, sx, sizeof(sx)),
                      (long long)w->shape[0]);
    return DT_OK;
}

/* y = x W^T (+ b): x flattened to [rows, in], one gemm with the bias in its epilogue. */
static dt_status linear_raw(const dt_kernel_ops *k, dt_dtype compute, dt_tensor *x, dt_tensor *w,
                            dt_tensor *bias, dt_tensor **xc_out, dt_tensor **out)
{
    int64_t in = w->shape[1], outf = w->shape[0], rows = lead_rows(x);
    int64_t shape[DT_MAX_DIMS];
    dt_tensor *xc = NULL, *xs = NULL, *wc = NULL, *x2 = NULL, *y = NULL, *y2 = NULL;
    dt_status s;
    bool tw = true;
    memcpy(shape, x->shape, sizeof(shape[0]) * (size_t)x->ndim);
    shape[x->ndim - 1] = outf;
    DT_CHECK_GOTO(dt__kt_contiguous(x, &xc), s, err);
    /* under autocast x is rounded once: the product and the backward share it
     * (and the saved copy is half the size) */
    DT_CHECK_GOTO(dt__ops_round(k, compute, xc, &xs), s, err);
    DT_CHECK_GOTO(dt__kt_contiguous(w, &wc), s, err);
    DT_CHECK_GOTO(view2d(xs, rows, in, &x2), s, err);
    DT_CHECK_GOTO(dt__kt_empty(x->ndim, shape, x->device, &y), s, err);
    DT_CHECK_GOTO(view2d(y, rows, outf, &y2), s, err);
    if (bias != NULL)
        DT_CHECK_GOTO(dt__ops_gemm_bias(k, compute, x2, wc, false, tw, bias, y2), s, err);
    else
        DT_CHECK_GOTO(dt__ops_gemm(k, compute, x2, wc, false, tw, 1.0f, 0.0f, y2), s, err);
    *xc_out = xs;
    xs = NULL;
    *out = y;
    y = NULL;
err:
    dt_tensor_release(xs);
    dt_tensor_release(y2);
    dt_tensor_release(y);
    dt_tensor_release(x2);
    dt_tensor_release(wc);
    dt_tensor_release(xc);
    return s;
}

dt_status dt_linear(dt_tensor *x, dt_tensor *w, dt_tensor *bias, dt_tensor **out)
{
    const char *name = "dt_linear";
    const dt_kernel_ops *k = NULL;
    dt_tensor *ins[3] = {x, w, bias}, *y = NULL, *xc = NULL;
    dt_ag_node *node = NULL;
    dt_status s;
    DT_CHECK(linear_check(name, x, w, bias));
    if (out == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'out' is NULL", name);
    DT__DIST_DISPATCH(name, 3, ins, linear, x, w, bias, out);
    DT_CHECK(dt__kt_kernels(name, x->device, DT_KOP_GEMM, &k));
    dt_dtype compute = dt_autocast_get();
    DT_CHECK(linear_raw(k, compute, x, w, bias, &xc, &y));
    if (dt__ag_should_record(3, ins)) {
        DT_CHECK_GOTO(dt__ag_node_create(name, linear_backward, 3, ins, &node), s, err_y);
        node->iv[0] = w->shape[1];
        node->iv[1] = w->shape[0];
        node->iv[2] = lead_rows(x);
        node->iv[IV_COMPUTE] = compute;
        DT_CHECK_GOTO(dt__ag_save(node, dt__ag_input_needs_grad(node, 1) ? xc : NULL), s, err_node);
        DT_CHECK_GOTO(dt__ag_save(node, dt__ag_input_needs_grad(node, 0) ? w : NULL), s, err_node);
        DT_CHECK_GOTO(dt__ag_attach(node, 1, &y), s, err_y);
    }
    dt_tensor_release(xc);
    *out = y;
    return DT_OK;
err_node:
    dt__ag_node_release(node);
err_y:
    dt_tensor_release(xc);
    dt_tensor_release(y);
    return s;
}
