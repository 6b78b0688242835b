/*
 * Cross entropy rule. On logits sharded along the class dim (Shard(-1) on one
 * mesh dim: a ColwiseParallel output layer) the loss is computed WITHOUT
 * gathering the logits (Megatron/TorchShard parallel_cross_entropy, PyTorch
 * loss_parallel): per row, the max is all-reduced (MAX), then the sum of
 * exp(x - max) and the target's logit (taken by the rank whose class range
 * holds it, 0 elsewhere) are all-reduced (SUM) together. Every rank gets the
 * same mean loss: a Replicate scalar. The gradient of each rank's logits
 * shard is softmax - onehot on its own classes: Shard(-1), no communication.
 * Other placements of the logits (batch shards, Partial, a second class
 * shard) are replicated first; targets are replicated. CPU tensors only.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "placement/rules/rules.h"

typedef struct pce_args {
    int64_t rows, cols, vstart, classes, ignore;
} pce_args;

static int64_t target_at(const dt_tensor *t, int64_t i)
{
    return dt__load_elem_int((const char *)dt_tensor_data(t) +
                                 dt__elem_offset(t, i) * (int64_t)dt_dtype_size(t->dtype),
                             t->dtype);
}

/* saved[0]: logits [rows, cols] contiguous; saved[1]: targets; saved[2]: lse [rows]. */
static dt_status pce_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    dt_tensor *x = node->saved[0], *t = node->saved[1], *lse = node->saved[2], *g = NULL;
    int64_t rows = node->iv[0], cols = node->iv[1], vstart = node->iv[2], ignore = node->iv[3];
    const dt_ag_meta *m = &node->inputs[0].meta;
    if (!dt__ag_input_needs_grad(node, 0))
        return DT_OK;
    DT_CHECK(dt__ops_empty(m->ndim, m->shape, m->device, &g));
    const float *xp = dt_tensor_data(x), *lp = dt_tensor_data(lse);
    float *gp = dt_tensor_data(g);
    double scale = (double)*(const float *)dt_tensor_data(gy[0]) / node->dv[0];
    for (int64_t i = 0; i < rows; i++) {
        int64_t tg = target_at(t, i);
        bool skip = tg == ignore;
        for (int64_t j = 0; j < cols; j++) {
            double p = skip ? 0.0 : exp((double)xp[i * cols + j] - (double)lp[i]);
            if (!skip && tg == vstart + j)
                p -= 1.0;
            gp[i * cols + j] = (float)(p * scale);
        }
    }
    gx[0] = g;
    return DT_OK;
}

/* Forward on this rank's shard x [rows, cols] of the classes [vstart, vstart + cols). */
static dt_status pce_forward(const pce_args *a, dt_comm *comm, dt_mesh *mesh, dt_tensor *x,
                             dt_tensor *t, dt_tensor *lse, float *loss, int64_t *n_valid)
{
    int64_t rows = a->rows, cols = a->cols, nv = 0;
    const float *xp = dt_tensor_data(x);
    float *lp = dt_tensor_data(lse);
    float *buf = malloc(sizeof(float) * (size_t)(3 * rows + 1));
    dt_status s = DT_OK;
    if (buf == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_cross_entropy: %lld rows", (long long)rows);
    float *mx = buf, *acc = buf + rows; /* acc: [sum exp | target logit] */
    for (int64_t i = 0; i < rows; i++) {
        float v = -INFINITY;
        for (int64_t j = 0; j < cols; j++)
            v = xp[i * cols + j] > v ? xp[i * cols + j] : v;
        mx[i] = v;
    }
    if (comm != NULL && rows > 0) {
        DT_CHECK_GOTO(dt_comm_allreduce(comm, mx, mx, (size_t)rows, DT_DTYPE_F32,
                                        DT_REDUCE_OP_MAX, NULL),
                      s, out);
        dt__mesh_count_coll(mesh, DT_COLL_ALLREDUCE, rows * 4);
    }
    for (int64_t i = 0; i < rows; i++) {
        double se = 0.0;
        int64_t tg = target_at(t, i);
        for (int64_t j = 0; j < cols; j++)
            se += exp((double)xp[i * cols + j] - (double)mx[i]);
        acc[i] = (float)se;
        acc[rows + i] = tg >= a->vstart && tg < a->vstart + cols && tg != a->ignore
                            ? xp[i * cols + (tg - a->vstart)]
                            : 0.0f;
    }
    if (comm != NULL && rows > 0) {
        DT_CHECK_GOTO(dt_comm_allreduce(comm, acc, acc, (size_t)(2 * rows), DT_DTYPE_F32,
                                        DT_REDUCE_OP_SUM, NULL),
                      s, out);
        dt__mesh_count_coll(mesh, DT_COLL_ALLREDUCE, rows * 8);
    }
    double total = 0.0;
    for (int64_t i = 0; i < rows; i++) {
        lp[i] = (float)((double)mx[i] + log((double)acc[i]));
        if (target_at(t, i) == a->ignore)
            continue;
        total += (double)lp[i] - (double)acc[rows + i];
        nv++;
    }
    *loss = nv > 0 ? (float)(total / (double)nv) : NAN;
    *n_valid = nv;
out:
    free(buf);
    return s;
}

/* Parallel CE on local shards; *out a new local 0-d tensor with its node. */
static dt_status pce_local(const pce_args *a, dt_comm *comm, dt_mesh *mesh, dt_tensor *ll,
                           dt_tensor *lt, dt_tensor **out)
{
    const char *name = "dt_cross_entropy(parallel)";
    int64_t s2[2] = {a->rows, a->cols}, n_valid = 0;
    dt_tensor *xc = NULL, *x2 = NULL, *tc = NULL, *lse = NULL, *y = NULL;
    dt_ag_node *node = NULL;
    float loss = 0.0f;
    dt_status s;
    if (ll->device.type != DT_DEVICE_CPU || lt->device.type != DT_DEVICE_CPU)
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: CPU tensors only", name);
    for (int64_t i = 0; i < a->rows; i++) { /* same targets everywhere: fails on every rank */
        int64_t tg = target_at(lt, i);
        if (tg != a->ignore && (tg < 0 || tg >= a->classes))
            return DT_ERR(DT_ERR_INVALID_ARG, "%s: target %lld at %lld outside [0, %lld)", name,
                          (long long)tg, (long long)i, (long long)a->classes);
    }
    DT_CHECK(dt__ops_contiguous(ll, &xc));
    DT_CHECK_GOTO(dt_tensor_view(xc, 2, s2, &x2), s, out);
    DT_CHECK_GOTO(dt__ops_contiguous(lt, &tc), s, out);
    DT_CHECK_GOTO(dt__ops_empty(1, &a->rows, ll->device, &lse), s, out);
    DT_CHECK_GOTO(pce_forward(a, comm, mesh, x2, tc, lse, &loss, &n_valid), s, out);
    DT_CHECK_GOTO(dt__ops_empty(0, s2, ll->device, &y), s, out);
    *(float *)dt_tensor_data(y) = loss;
    if (dt__ag_should_record(1, &ll)) {
        DT_CHECK_GOTO(dt__ag_node_create(name, pce_backward, 1, &ll, &node), s, out);
        node->iv[0] = a->rows, node->iv[1] = a->cols, node->iv[2] = a->vstart;
        node->iv[3] = a->ignore;
        node->dv[0] = (double)n_valid;
        dt_tensor *keep[3] = {x2, tc, lse};
        for (int i = 0; i < 3 && s == DT_OK; i++)
            s = dt__ag_save(node, keep[i]);
        if (s != DT_OK) {
            dt__ag_node_release(node);
            goto out;
        }
        DT_CHECK_GOTO(dt__ag_attach(node, 1, &y), s, out);
    }
    *out = y;
    y = NULL;
out:
    dt_tensor_release(y);
    dt_tensor_release(lse);
    dt_tensor_release(tc);
    dt_tensor_release(x2);
    dt_tensor_release(xc);
    return s;
}

dt_status dt__rl_cross_entropy(dt_tensor *logits, dt_tensor *targets, int64_t ignore_index,
                               dt_tensor **out)
{
    const char *name = "dt_cross_entropy";
    dt_tensor *ins[2] = {logits, targets}, *ll = NULL, *lt = NULL, *y = NULL;
    dt_placement pl[DT__RL_MAX_MESH], wl[DT__RL_MAX_MESH], r[DT__RL_MAX_MESH];
    int64_t off[DT_MAX_DIMS];
    int last = logits->ndim - 1, kc = -1;
    dt_spec *lspec = NULL;
    dt_mesh *mesh = NULL;
    dt_status s;
    DT_CHECK(dt__rl_mesh(name, 2, ins, &mesh));
    dt__rl_placements(logits, mesh, pl);
    for (int k = 0; k < mesh->ndim; k++) {
        r[k] = dt_replicate();
        wl[k] = dt_replicate();
        if (kc < 0 && dt_placement_is_shard(pl[k], last) && mesh->shape[k] > 1) {
            kc = k;
            wl[k] = pl[k];
        }
    }
    DT_CHECK_GOTO(dt__rl_prepare(name, logits, mesh, wl, r, &ll), s, out);
    DT_CHECK_GOTO(dt__rl_prepare(name, targets, mesh, r, r, &lt), s, out);
    if (kc < 0) { /* the classes are whole on every rank: the local loss */
        DT_CHECK_GOTO(dt_cross_entropy(ll, lt, ignore_index, &y), s, out);
    } else {
        DT_CHECK_GOTO(dt_spec_create(mesh, mesh->ndim, wl, logits->ndim, logits->shape,
                                     logits->dtype, &lspec),
                      s, out);
        DT_CHECK_GOTO(dt_spec_local_shape(lspec, NULL, NULL, off), s, out);
        pce_args a = {.rows = dt_tensor_numel(lt), .cols = ll->shape[last], .vstart = off[last],
                      .classes = logits->shape[last], .ignore = ignore_index};
        DT_CHECK_GOTO(pce_local(&a, dt_mesh_dim_comm(mesh, kc), mesh, ll, lt, &y), s, out);
    }
    s = dt__rl_wrap(name, mesh, r, 0, logits->shape, DT_DTYPE_F32, y, out);
out:
    dt_spec_release(lspec);
    dt_tensor_release(y);
    dt_tensor_release(ll);
    dt_tensor_release(lt);
    return s;
}
