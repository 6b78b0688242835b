/* Embedding lookup (gather of weight rows by id) and the host-side id checks it shares. */
#include <math.h>

#include "dtensor/autograd.h"
#include "dtensor/ops.h"
#include "ops/ops_internal.h"

dt_status dt__ops_check_id_range(const char *op, const char *what, const dt_tensor *ids, int64_t n,
                                 int64_t ignore, int64_t *n_valid)
{
    int64_t count = 0, numel = dt_tensor_numel(ids);
    /* device ids are checked on a host copy: an id out of range is an error on
     * every device (a kernel would read outside the table), not zeros */
    dt_tensor *h = NULL;
    DT_CHECK(dt_tensor_to_device((dt_tensor *)ids, dt_device_cpu(), &h));
    const char *base = dt_tensor_data(h);
    size_t esz = dt_dtype_size(h->dtype);
    dt_status st = DT_OK;
    for (int64_t i = 0; i < numel && st == DT_OK; i++) {
        int64_t v = dt__load_elem_int(base + dt__elem_offset(h, i) * (int64_t)esz, h->dtype);
        if (v == ignore)
            continue;
        if (v < 0 || v >= n)
            st = DT_ERR(DT_ERR_INVALID_ARG, "%s: %s[%lld] = %lld is outside [0, %lld)", op, what,
                        (long long)i, (long long)v, (long long)n);
        count++;
    }
    dt_tensor_release(h);
    *n_valid = count;
    return st;
}

/* Contiguous 1-d [numel] view of ids (a copy when strided). */
static dt_status ids_flat(dt_tensor *ids, dt_tensor **out)
{
    dt_tensor *c = NULL;
    int64_t n = dt_tensor_numel(ids), st = 1;
    dt_status s;
    DT_CHECK(dt__kt_contiguous(ids, &c));
    s = dt__tensor_make_view(c, 1, &n, &st, c->offset, out);
    dt_tensor_release(c);
    return s;
}

static dt_status embedding_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    const dt_kernel_ops *k = NULL;
    dt_tensor *ids = node->saved[0], *gw = NULL, *g2 = NULL;
    dt_ag_meta *wm = &node->inputs[0].meta;
    int64_t shape[2] = {ids->shape[0], wm->shape[1]}, strides[2] = {wm->shape[1], 1};
    dt_status s;
    DT_CHECK(dt__kt_kernels(node->name, wm->device, DT_KOP_EMBEDDING, &k));
    DT_CHECK(dt__kt_zeros(2, wm->shape, wm->device, &gw));
    DT_CHECK_GOTO(dt__tensor_make_view(gy[0], 2, shape, strides, gy[0]->offset, &g2), s, err);
    DT_CHECK_GOTO(k->embedding_backward(ids, g2, node->iv[0], gw), s, err);
    dt_tensor_release(g2);
    gx[0] = gw;
    return DT_OK;
err:
    dt_tensor_release(g2);
    dt_tensor_release(gw);
    return s;
}

/* The lookup on local tensors; with @p shard, ids outside [vocab_start,
 * vocab_start + rows) give zero rows instead of an error. */
static dt_status embedding_local(const char *name, dt_tensor *weight, dt_tensor *ids,
                                 int64_t vocab_start, bool shard, dt_tensor **out)
{
    const dt_kernel_ops *k = NULL;
    dt_tensor *flat = NULL, *y = NULL, *y2 = NULL;
    dt_ag_node *node = NULL;
    int64_t shape[DT_MAX_DIMS], n_valid = 0;
    dt_status s;
    DT_CHECK(dt__ops_check_same_device(name, weight, ids));
    if (weight->ndim != 2)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: weight must be 2-d [rows, dim], has %d dims", name,
                      weight->ndim);
    if (ids->ndim + 1 > DT_MAX_DIMS)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: ids have %d dims, at most %d allowed", name,
                      ids->ndim, DT_MAX_DIMS - 1);
    if (!shard)
        DT_CHECK(dt__ops_check_id_range(name, "ids", ids, weight->shape[0], INT64_MIN, &n_valid));
    DT_CHECK(dt__kt_kernels(name, weight->device, DT_KOP_EMBEDDING, &k));
    for (int i = 0; i < ids->ndim; i++)
        shape[i] = ids->shape[i];
    shape[ids->ndim] = weight->shape[1];
    int64_t s2[2] = {dt_tensor_numel(ids), weight->shape[1]}, st2[2] = {weight->shape[1], 1};
    DT_CHECK(ids_flat(ids, &flat));
    DT_CHECK_GOTO(dt__kt_empty(ids->ndim + 1, shape, weight->device, &y), s, err);
    DT_CHECK_GOTO(dt__tensor_make_view(y, 2, s2, st2, y->offset, &y2), s, err);
    DT_CHECK_GOTO(k->embedding(weight, flat, vocab_start, y2), s, err);
    if (dt__ag_should_record(1, &weight)) {
        DT_CHECK_GOTO(dt__ag_node_create(name, embedding_backward, 1, &weight, &node), s, err);
        node->iv[0] = vocab_start;
        DT_CHECK_GOTO(dt__ag_save(node, flat), s, err_node);
        DT_CHECK_GOTO(dt__ag_attach(node, 1, &y), s, err);
    }
    dt_tensor_release(y2);
    dt_tensor_release(flat);
    *out = y;
    return DT_OK;
err_node:
    dt__ag_node_release(node);
err:
    dt_tensor_release(y2);
    dt_tensor_release(y);
    dt_tensor_release(flat);
    return s;
}

dt_status dt__ops_embedding_shard(dt_tensor *weight, dt_tensor *ids, int64_t vocab_start,
                                  dt_tensor **out)
{
    const char *name = "dt_embedding(vocab shard)";
    DT_CHECK(dt__kt_check_f32(name, "weight", weight));
    DT_CHECK(dt__ops_check_ids(name, "ids", ids));
    DT_CHECK(dt__kt_reject_distributed(name, 2, (dt_tensor *[]){weight, ids}));
    return embedding_local(name, weight, ids, vocab_start, true, out);
}

dt_status dt_embedding(dt_tensor *weight, dt_tensor *ids, dt_tensor **out)
{
    const char *name = "dt_embedding";
    dt_tensor *ins[2] = {weight, ids};
    DT_CHECK(dt__kt_check_f32(name, "weight", weight));
    DT_CHECK(dt__ops_check_ids(name, "ids", ids));
    if (out == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'out' is NULL", name);
    DT__DIST_DISPATCH(name, 2, ins, embedding, weight, ids, out);
    return embedding_local(name, weight, ids, 0, false, out);
}
