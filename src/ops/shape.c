/*
 * Differentiable shape ops: reshape, permute, transpose, narrow, contiguous
 * (views where the layout allows) and concat / split along a dim.
 */
#include <stdlib.h>
#include <string.h>

#include "dtensor/autograd.h"
#include "dtensor/ops.h"
#include "ops/ops_internal.h"

/* Record a one-input node for view-like op output y (y must be a new handle). */
static dt_status record1(const char *name, dt_ag_backward_fn fn, dt_tensor *x, dt_tensor *y,
                         const int64_t *iv, int niv)
{
    dt_ag_node *node = NULL;
    if (!dt__ag_should_record(1, &x))
        return DT_OK;
    DT_CHECK(dt__ag_node_create(name, fn, 1, &x, &node));
    for (int i = 0; i < niv; i++)
        node->iv[i] = iv[i];
    return dt__ag_attach(node, 1, &y);
}

/* Core may hand back the input itself (retained): give the op result its own handle. */
static dt_status own_handle(dt_tensor *x, dt_tensor **y)
{
    dt_tensor *a = NULL;
    if (*y != x)
        return DT_OK;
    DT_CHECK(dt__kt_alias(x, &a));
    dt_tensor_release(*y);
    *y = a;
    return DT_OK;
}

static dt_status entry(const char *name, dt_tensor *x, void *out)
{
    DT_CHECK(dt__kt_check_f32(name, "x", x));
    if (out == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'out' is NULL", name);
    return DT_OK;
}

/* Finish a view op: own handle, record; releases y on failure. */
static dt_status finish(const char *name, dt_ag_backward_fn fn, dt_tensor *x, dt_tensor *y,
                        const int64_t *iv, int niv, dt_tensor **out)
{
    dt_status s;
    DT_CHECK_GOTO(own_handle(x, &y), s, err);
    DT_CHECK_GOTO(record1(name, fn, x, y, iv, niv), s, err);
    *out = y;
    return DT_OK;
err:
    dt_tensor_release(y);
    return s;
}

/* ------------------------------------------------------------ reshape / contiguous */

static dt_status reshape_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    dt_ag_meta *m = &node->inputs[0].meta;
    return dt_tensor_reshape(gy[0], m->ndim, m->shape, &gx[0]);
}

dt_status dt_reshape(dt_tensor *x, int ndim, const int64_t *shape, dt_tensor **out)
{
    dt_tensor *y = NULL;
    DT_CHECK(entry("dt_reshape", x, out));
    DT__DIST_DISPATCH("dt_reshape", 1, &x, reshape, x, ndim, shape, out);
    if (ndim > 0 && shape == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_reshape: argument 'shape' is NULL");
    dt_mem_category prev = dt_memory_set_default_category(DT_MEM_ACTIVATION);
    dt_status s = dt_tensor_reshape(x, ndim, shape, &y);
    dt_memory_set_default_category(prev);
    DT_CHECK(s);
    return finish("dt_reshape", reshape_backward, x, y, NULL, 0, out);
}

static dt_status identity_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    (void)node;
    gx[0] = dt_tensor_retain(gy[0]);
    return DT_OK;
}

dt_status dt_contiguous(dt_tensor *x, dt_tensor **out)
{
    dt_tensor *y = NULL;
    DT_CHECK(entry("dt_contiguous", x, out));
    DT__DIST_DISPATCH("dt_contiguous", 1, &x, contiguous, x, out);
    DT_CHECK(dt__kt_contiguous(x, &y));
    return finish("dt_contiguous", identity_backward, x, y, NULL, 0, out);
}

/* ------------------------------------------------------------ permute / transpose */

static dt_status permute_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    int inv[DT_MAX_DIMS];
    for (int i = 0; i < gy[0]->ndim; i++)
        inv[node->iv[i]] = i;
    return dt_tensor_permute(gy[0], inv, &gx[0]);
}

dt_status dt_permute(dt_tensor *x, const int *perm, dt_tensor **out)
{
    dt_tensor *y = NULL;
    int64_t iv[DT_MAX_DIMS];
    DT_CHECK(entry("dt_permute", x, out));
    if (perm == NULL && x->ndim > 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_permute: argument 'perm' is NULL");
    DT__DIST_DISPATCH("dt_permute", 1, &x, permute, x, perm, out);
    DT_CHECK(dt_tensor_permute(x, perm, &y)); /* validates perm */
    for (int i = 0; i < x->ndim; i++)
        iv[i] = perm[i] < 0 ? perm[i] + x->ndim : perm[i];
    return finish("dt_permute", permute_backward, x, y, iv, x->ndim, out);
}

static dt_status transpose_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    return dt_tensor_transpose(gy[0], (int)node->iv[0], (int)node->iv[1], &gx[0]);
}

dt_status dt_transpose(dt_tensor *x, int d0, int d1, dt_tensor **out)
{
    dt_tensor *y = NULL;
    int64_t iv[2];
    int a = 0, b = 0;
    DT_CHECK(entry("dt_transpose", x, out));
    DT_CHECK(dt__ops_wrap_dim("dt_transpose", d0, x->ndim, &a));
    DT_CHECK(dt__ops_wrap_dim("dt_transpose", d1, x->ndim, &b));
    if (x->dist != NULL) { /* a transpose is the permute that swaps a and b */
        int perm[DT_MAX_DIMS];
        for (int i = 0; i < x->ndim; i++)
            perm[i] = i == a ? b : (i == b ? a : i);
        return dt_permute(x, perm, out);
    }
    DT_CHECK(dt_tensor_transpose(x, a, b, &y));
    iv[0] = a;
    iv[1] = b;
    return finish("dt_transpose", transpose_backward, x, y, iv, 2, out);
}

/* ------------------------------------------------------------ narrow */

/* Zeros of the input's shape with @p g copied into [start, start+len) of dim d. */
static dt_status scatter_slice(const dt_ag_meta *m, int d, int64_t start, dt_tensor *g,
                               dt_tensor *base)
{
    dt_tensor *v = NULL;
    dt_status s;
    (void)m;
    DT_CHECK(dt_tensor_narrow(base, d, start, g->shape[d], &v));
    s = dt_tensor_copy_(v, g);
    dt_tensor_release(v);
    return s;
}

static dt_status narrow_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    dt_ag_meta *m = &node->inputs[0].meta;
    dt_tensor *z = NULL;
    dt_status s;
    DT_CHECK(dt__kt_zeros(m->ndim, m->shape, m->device, &z));
    DT_CHECK_GOTO(scatter_slice(m, (int)node->iv[0], node->iv[1], gy[0], z), s, err);
    gx[0] = z;
    return DT_OK;
err:
    dt_tensor_release(z);
    return s;
}

dt_status dt_narrow(dt_tensor *x, int dim, int64_t start, int64_t length, dt_tensor **out)
{
    dt_tensor *y = NULL;
    int64_t iv[2];
    int d = 0;
    DT_CHECK(entry("dt_narrow", x, out));
    DT__DIST_DISPATCH("dt_narrow", 1, &x, narrow, x, dim, start, length, out);
    DT_CHECK(dt__ops_wrap_dim("dt_narrow", dim, x->ndim, &d));
    DT_CHECK(dt_tensor_narrow(x, d, start, length, &y)); /* validates the range */
    iv[0] = d;
    iv[1] = start;
    return finish("dt_narrow", narrow_backward, x, y, iv, 2, out);
}

/* ------------------------------------------------------------ concat */

static dt_status concat_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    int d = (int)node->iv[0];
    int64_t start = 0;
    for (int i = 0; i < node->n_inputs; i++) {
        int64_t len = node->inputs[i].meta.shape[d];
        if (dt__ag_input_needs_grad(node, i))
            DT_CHECK(dt_tensor_narrow(gy[0], d, start, len, &gx[i]));
        start += len;
    }
    return DT_OK;
}

static dt_status concat_check(int n, dt_tensor *const *xs, int dim, int *d, int64_t *shape)
{
    const char *name = "dt_concat";
    char s0[96], si[96];
    if (n < 1 || xs == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_concat: needs >= 1 tensors, got n=%d%s", n,
                      xs == NULL ? " (xs is NULL)" : "");
    for (int i = 0; i < n; i++) {
        if (xs[i] == NULL)
            return DT_ERR(DT_ERR_INVALID_ARG, "dt_concat: xs[%d] is NULL", i);
        char what[24];
        snprintf(what, sizeof(what), "xs[%d]", i);
        DT_CHECK(dt__kt_check_f32(name, what, xs[i]));
    }
    DT_CHECK(dt__ops_wrap_dim(name, dim, xs[0]->ndim, d));
    memcpy(shape, xs[0]->shape, sizeof(int64_t) * (size_t)xs[0]->ndim);
    shape[*d] = 0;
    for (int i = 0; i < n; i++) {
        dt_tensor *t = xs[i];
        bool ok = t->ndim == xs[0]->ndim;
        for (int j = 0; ok && j < t->ndim; j++)
            ok = j == *d || t->shape[j] == xs[0]->shape[j];
        if (!ok)
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_concat: xs[%d] shape %s does not match xs[0] %s "
                          "outside dim %d",
                          i, dt__shape_str(t->ndim, t->shape, si, sizeof(si)),
                          dt__shape_str(xs[0]->ndim, xs[0]->shape, s0, sizeof(s0)), *d);
        DT_CHECK(dt__ops_check_same_device(name, xs[0], t));
        shape[*d] += t->shape[*d];
    }
    return DT_OK;
}

dt_status dt_concat(int n, dt_tensor *const *xs, int dim, dt_tensor **out)
{
    dt_tensor *y = NULL, *v = NULL;
    dt_ag_node *node = NULL;
    int64_t shape[DT_MAX_DIMS], start = 0;
    int d = 0;
    dt_status s;
    if (out == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_concat: argument 'out' is NULL");
    DT_CHECK(concat_check(n, xs, dim, &d, shape));
    DT__DIST_DISPATCH("dt_concat", n, xs, concat, n, xs, dim, out);
    DT_CHECK(dt__kt_empty(xs[0]->ndim, shape, xs[0]->device, &y));
    for (int i = 0; i < n; i++) {
        DT_CHECK_GOTO(dt_tensor_narrow(y, d, start, xs[i]->shape[d], &v), s, err);
        DT_CHECK_GOTO(dt_tensor_copy_(v, xs[i]), s, err);
        dt_tensor_release(v);
        v = NULL;
        start += xs[i]->shape[d];
    }
    if (dt__ag_should_record(n, xs)) {
        DT_CHECK_GOTO(dt__ag_node_create("dt_concat", concat_backward, n, xs, &node), s, err);
        node->iv[0] = d;
        DT_CHECK_GOTO(dt__ag_attach(node, 1, &y), s, err);
    }
    *out = y;
    return DT_OK;
err:
    dt_tensor_release(v);
    dt_tensor_release(y);
    return s;
}

/* ------------------------------------------------------------ split */

static dt_status split_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    dt_ag_meta *m = &node->inputs[0].meta;
    int d = (int)node->iv[0];
    int64_t start = 0;
    dt_tensor *z = NULL;
    dt_status s;
    DT_CHECK(dt__kt_empty(m->ndim, m->shape, m->device, &z));
    for (int i = 0; i < node->n_outputs; i++) {
        DT_CHECK_GOTO(scatter_slice(m, d, start, gy[i], z), s, err);
        start += gy[i]->shape[d];
    }
    gx[0] = z;
    return DT_OK;
err:
    dt_tensor_release(z);
    return s;
}

dt_status dt_split(dt_tensor *x, int dim, int n, const int64_t *sizes, dt_tensor **outs)
{
    const char *name = "dt_split";
    dt_ag_node *node = NULL;
    int64_t total = 0, start = 0;
    int d = 0, made = 0;
    dt_status s = DT_OK;
    DT_CHECK(entry(name, x, outs));
    DT__DIST_DISPATCH(name, 1, &x, split, x, dim, n, sizes, outs);
    if (n < 1 || sizes == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_split: needs n >= 1 sizes, got n=%d%s", n,
                      sizes == NULL ? " (sizes is NULL)" : "");
    DT_CHECK(dt__ops_wrap_dim(name, dim, x->ndim, &d));
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0)
            return DT_ERR(DT_ERR_INVALID_ARG, "dt_split: sizes[%d] = %lld is negative", i,
                          (long long)sizes[i]);
        total += sizes[i];
    }
    if (total != x->shape[d])
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_split: sizes sum to %lld, dim %d has %lld",
                      (long long)total, d, (long long)x->shape[d]);
    dt_tensor **ys = calloc((size_t)n, sizeof(*ys));
    if (ys == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_split: %d outputs", n);
    for (made = 0; made < n; made++) {
        DT_CHECK_GOTO(dt_tensor_narrow(x, d, start, sizes[made], &ys[made]), s, err);
        start += sizes[made];
    }
    if (dt__ag_should_record(1, &x)) {
        DT_CHECK_GOTO(dt__ag_node_create(name, split_backward, 1, &x, &node), s, err);
        node->iv[0] = d;
        DT_CHECK_GOTO(dt__ag_attach(node, n, ys), s, err);
    }
    memcpy(outs, ys, sizeof(*ys) * (size_t)n);
    free(ys);
    return DT_OK;
err:
    dt__kt_release_all(made, ys);
    free(ys);
    return s;
}
