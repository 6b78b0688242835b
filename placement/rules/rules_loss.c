/*
 * Cross entropy rule. On logits sharded along the class dim (Shard(-1) on one
 * mesh dim: a ColwiseParallel output layer) the loss is computed WITHOUT
 * gathering the logits (Megatron/TorchShard parallel_cross_entropy, PyTorch
 * loss_parallel): per row, the max is all-reduced (MAX), then the sum of
 * exp(x - max) and the target's logit (taken by the rank whose class range
 * holds it, 0 elsewhere) are all-reduced (SUM) together. Every rank gets the
 * same mean loss: a Replicate scalar. The gradient of each rank's logits
 * shard is softmax - onehot on its own classes: Shard(-1), no communication.
 * Rows sharded (Shard on a dim before the classes, e.g. data parallel):
 * each rank sums the losses of its rows and divides by the GLOBAL number of
 * counted targets (one tiny all-reduce), so the result is Partial(sum) over
 * those mesh dims and no logits move; the targets are sharded like the rows.
 * Partial logits and a second class shard are replicated first. CPU tensors
 * only (for the sharded paths).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "placement/rules/rules.h"

typedef struct pce_args {
    int64_t rows, cols, vstart, classes, ignore;
    bool batch[DT__RL_MAX_MESH]; /* mesh dims sharding the rows: the mean is global */
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
                             dt_tensor *t, dt_tensor *lse, double *sum)
{
    int64_t rows = a->rows, cols = a->cols;
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
        if (target_at(t, i) != a->ignore)
            total += (double)lp[i] - (double)acc[rows + i];
    }
    *sum = total;
out:
    free(buf);
    return s;
}

/*
 * Check the targets and count the valid ones over the row shards: every rank
 * learns the global count and whether any rank saw a bad target (so all fail
 * together, before any other collective).
 */
static dt_status pce_count(const char *name, const pce_args *a, dt_mesh *mesh, dt_tensor *lt,
                           double *divisor)
{
    double v[2] = {0.0, 0.0};
    int64_t bad = 0, at = -1;
    for (int64_t i = 0; i < a->rows; i++) {
        int64_t tg = target_at(lt, i);
        if (tg == a->ignore)
            continue;
        if ((tg < 0 || tg >= a->classes) && at < 0)
            bad = tg, at = i;
        v[0] += 1.0;
    }
    v[1] = at >= 0 ? 1.0 : 0.0;
    for (int k = 0; k < mesh->ndim; k++) {
        if (!a->batch[k] || mesh->shape[k] == 1)
            continue;
        dt_comm *comm = dt_mesh_dim_comm(mesh, k);
        if (comm == NULL)
            return DT_ERR(DT_ERR_INVALID_ARG, "%s: mesh dim %d has no comm", name, k);
        DT_CHECK(dt_comm_allreduce(comm, v, v, 2, DT_DTYPE_F64, DT_REDUCE_OP_SUM, NULL));
        dt__mesh_count_coll(mesh, DT_COLL_ALLREDUCE, 16);
    }
    if (at >= 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: target %lld at %lld outside [0, %lld)", name,
                      (long long)bad, (long long)at, (long long)a->classes);
    if (v[1] > 0.0)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: a target outside [0, %lld) on another rank", name,
                      (long long)a->classes);
    *divisor = v[0];
    return DT_OK;
}

/* Parallel CE on local shards; *out a new local 0-d tensor with its node. */
static dt_status pce_local(const pce_args *a, dt_comm *comm, dt_mesh *mesh, dt_tensor *ll,
                           dt_tensor *lt, dt_tensor **out)
{
    const char *name = "dt_cross_entropy(parallel)";
    int64_t s2[2] = {a->rows, a->cols};
    dt_tensor *xc = NULL, *x2 = NULL, *tc = NULL, *lse = NULL, *y = NULL;
    dt_ag_node *node = NULL;
    double sum = 0.0, divisor = 0.0;
    dt_status s;
    if (ll->device.type != DT_DEVICE_CPU || lt->device.type != DT_DEVICE_CPU)
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: CPU tensors only", name);
    DT_CHECK(pce_count(name, a, mesh, lt, &divisor));
    DT_CHECK(dt__ops_contiguous(ll, &xc));
    DT_CHECK_GOTO(dt_tensor_view(xc, 2, s2, &x2), s, out);
    DT_CHECK_GOTO(dt__ops_contiguous(lt, &tc), s, out);
    DT_CHECK_GOTO(dt__ops_empty(1, &a->rows, ll->device, &lse), s, out);
    DT_CHECK_GOTO(pce_forward(a, comm, mesh, x2, tc, lse, &sum), s, out);
    DT_CHECK_GOTO(dt__ops_empty(0, s2, ll->device, &y), s, out);
    /* NaN when no target counts anywhere, as PyTorch */
    *(float *)dt_tensor_data(y) = divisor > 0.0 ? (float)(sum / divisor) : NAN;
    if (dt__ag_should_record(1, &ll)) {
        DT_CHECK_GOTO(dt__ag_node_create(name, pce_backward, 1, &ll, &node), s, out);
        node->iv[0] = a->rows, node->iv[1] = a->cols, node->iv[2] = a->vstart;
        node->iv[3] = a->ignore;
        node->dv[0] = divisor;
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
    dt_placement pl[DT__RL_MAX_MESH], wl[DT__RL_MAX_MESH], wt[DT__RL_MAX_MESH];
    dt_placement wo[DT__RL_MAX_MESH];
    int64_t off[DT_MAX_DIMS];
    int last = logits->ndim - 1, kc = -1;
    bool any_batch = false;
    pce_args a = {.classes = logits->shape[last], .ignore = ignore_index};
    dt_spec *lspec = NULL;
    dt_mesh *mesh = NULL;
    dt_status s;
    DT_CHECK(dt__rl_mesh(name, 2, ins, &mesh));
    dt__rl_placements(logits, mesh, pl);
    for (int k = 0; k < mesh->ndim; k++) {
        wl[k] = wt[k] = wo[k] = dt_replicate();
        if (kc < 0 && dt_placement_is_shard(pl[k], last) && mesh->shape[k] > 1) {
            kc = k; /* the classes: never gathered */
            wl[k] = pl[k];
        } else if (pl[k].kind == DT_PLACEMENT_SHARD && pl[k].dim < last) {
            /* rows: each rank sums its own, divided by the global count */
            wl[k] = wt[k] = pl[k];
            wo[k] = dt__rl_psum();
            a.batch[k] = any_batch = true;
        }
    }
    DT_CHECK_GOTO(dt__rl_prepare(name, logits, mesh, wl, wo, &ll), s, out);
    DT_CHECK_GOTO(dt__rl_prepare(name, targets, mesh, wt, wo, &lt), s, out);
    if (kc < 0 && !any_batch) { /* whole classes, whole rows: the local loss */
        DT_CHECK_GOTO(dt_cross_entropy(ll, lt, ignore_index, &y), s, out);
    } else {
        DT_CHECK_GOTO(dt_spec_create(mesh, mesh->ndim, wl, logits->ndim, logits->shape,
                                     logits->dtype, &lspec),
                      s, out);
        DT_CHECK_GOTO(dt_spec_local_shape(lspec, NULL, NULL, off), s, out);
        a.rows = dt_tensor_numel(lt), a.cols = ll->shape[last], a.vstart = off[last];
        DT_CHECK_GOTO(pce_local(&a, kc >= 0 ? dt_mesh_dim_comm(mesh, kc) : NULL, mesh, ll, lt,
                                &y),
                      s, out);
    }
    s = dt__rl_wrap(name, mesh, wo, 0, logits->shape, DT_DTYPE_F32, y, out);
out:
    dt_spec_release(lspec);
    dt_tensor_release(y);
    dt_tensor_release(ll);
    dt_tensor_release(lt);
    return s;
}
