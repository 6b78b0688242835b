/* Cross entropy (mean over non-ignored targets) of logits [..., C] against ids [...]. */
#include <math.h>
#include <string.h>

#include "dtensor/autograd.h"
#include "dtensor/ops.h"
#include "ops/ops_internal.h"

/* Contiguous [rows, cols] view of t (a copy when strided). */
static dt_status flat2(dt_tensor *t, int ndim, int64_t rows, int64_t cols, dt_tensor **out)
{
    dt_tensor *c = NULL;
    int64_t shape[2] = {rows, cols}, strides[2] = {cols, 1};
    dt_status s;
    DT_CHECK(dt__kt_contiguous(t, &c));
    s = dt__tensor_make_view(c, ndim, shape, strides, c->offset, out);
    dt_tensor_release(c);
    return s;
}

static dt_status cross_entropy_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    const dt_kernel_ops *k = NULL;
    dt_tensor *lg = node->saved[0], *tg = node->saved[1], *lse = node->saved[2];
    dt_tensor *g1 = NULL, *ge = NULL, *gl = NULL, *gout = NULL;
    dt_ag_meta *m = &node->inputs[0].meta;
    int64_t rows = lg->shape[0], st[DT_MAX_DIMS];
    dt_status s;
    DT_CHECK(dt__kt_kernels(node->name, lg->device, DT_KOP_CROSS_ENTROPY, &k));
    /* d mean / d loss[i] = gy / n_valid for every row (ignored rows give 0 in the kernel) */
    DT_CHECK(dt__kt_unary_raw(DT_UNARY_SCALE, gy[0], (float)node->dv[0], &g1));
    DT_CHECK_GOTO(dt_tensor_expand(g1, 1, &rows, &ge), s, err);
    DT_CHECK_GOTO(dt__kt_empty(1, &rows, lg->device, &gl), s, err);
    DT_CHECK_GOTO(k->copy(gl, ge), s, err);
    DT_CHECK_GOTO(dt__kt_empty(m->ndim, m->shape, m->device, &gout), s, err);
    dt__contiguous_strides(2, lg->shape, st);
    dt_tensor *g2 = NULL;
    DT_CHECK_GOTO(dt__tensor_make_view(gout, 2, lg->shape, st, 0, &g2), s, err);
    s = k->cross_entropy_backward(lg, tg, node->iv[0], lse, gl, g2);
    dt_tensor_release(g2);
    if (s != DT_OK)
        goto err;
    gx[0] = gout;
    gout = NULL;
err:
    dt_tensor_release(gout);
    dt_tensor_release(gl);
    dt_tensor_release(ge);
    dt_tensor_release(g1);
    return s;
}

static dt_status ce_check(const char *name, dt_tensor *logits, dt_tensor *targets)
{
    char sl[96], st[96];
    DT_CHECK(dt__kt_check_f32(name, "logits", logits));
    DT_CHECK(dt__ops_check_ids(name, "targets", targets));
    DT_CHECK(dt__ops_check_same_device(name, logits, targets));
    if (logits->ndim < 1 || targets->ndim != logits->ndim - 1 ||
        memcmp(targets->shape, logits->shape, sizeof(int64_t) * (size_t)targets->ndim) != 0)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: logits %s and targets %s do not match (want [..., C] and [...])", name,
                      dt__shape_str(logits->ndim, logits->shape, sl, sizeof(sl)),
                      dt__shape_str(targets->ndim, targets->shape, st, sizeof(st)));
    return DT_OK;
}

dt_status dt_cross_entropy(dt_tensor *logits, dt_tensor *targets, int64_t ignore_index,
                           dt_tensor **out)
{
    const char *name = "dt_cross_entropy";
    const dt_kernel_ops *k = NULL;
    dt_tensor *ins[2] = {logits, targets}, *lg = NULL, *tg = NULL, *loss = NULL, *lse = NULL;
    dt_tensor *sum = NULL, *y = NULL;
    dt_ag_node *node = NULL;
    int64_t n_valid = 0;
    dt_status s;
    DT_CHECK(ce_check(name, logits, targets));
    if (out == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'out' is NULL", name);
    DT__DIST_DISPATCH(name, 2, ins, cross_entropy, logits, targets, ignore_index, out);
    int64_t c = logits->shape[logits->ndim - 1], rows = dt_tensor_numel(targets);
    DT_CHECK(dt__ops_check_id_range(name, "targets", targets, c, ignore_index, &n_valid));
    DT_CHECK(dt__kt_kernels(name, logits->device, DT_KOP_CROSS_ENTROPY, &k));
    DT_CHECK_GOTO(flat2(logits, 2, rows, c, &lg), s, out_release);
    DT_CHECK_GOTO(flat2(targets, 1, rows, 1, &tg), s, out_release);
    DT_CHECK_GOTO(dt__kt_empty(1, &rows, logits->device, &loss), s, out_release);
    DT_CHECK_GOTO(dt__kt_empty(1, &rows, logits->device, &lse), s, out_release);
    DT_CHECK_GOTO(k->cross_entropy(lg, tg, ignore_index, loss, lse), s, out_release);
    DT_CHECK_GOTO(dt__kt_empty(0, NULL, logits->device, &sum), s, out_release);
    DT_CHECK_GOTO(k->reduce(DT_REDUCE_KIND_SUM, loss, 0, sum, NULL), s, out_release);
    /* no valid target: 0/0 = NaN, as PyTorch's mean reduction gives */
    double inv = n_valid > 0 ? 1.0 / (double)n_valid : NAN;
    DT_CHECK_GOTO(dt__kt_unary_raw(DT_UNARY_SCALE, sum, (float)inv, &y), s, out_release);
    if (dt__ag_should_record(1, &logits)) {
        DT_CHECK_GOTO(dt__ag_node_create(name, cross_entropy_backward, 1, &logits, &node), s,
                      out_release);
        node->iv[0] = ignore_index;
        node->dv[0] = inv;
        DT_CHECK_GOTO(dt__ag_save(node, lg), s, err_node);
        DT_CHECK_GOTO(dt__ag_save(node, tg), s, err_node);
        DT_CHECK_GOTO(dt__ag_save(node, lse), s, err_node);
        DT_CHECK_GOTO(dt__ag_attach(node, 1, &y), s, out_release);
    }
    *out = y;
    y = NULL; /* success: only the temporaries below are dropped */
    s = DT_OK;
    goto out_release;
err_node:
    dt__ag_node_release(node);
out_release:
    dt_tensor_release(y);
    dt_tensor_release(sum);
    dt_tensor_release(lse);
    dt_tensor_release(loss);
    dt_tensor_release(tg);
    dt_tensor_release(lg);
    return s;
}
