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

/* Rows per block of the element-wise passes: temporaries stay ~64 KiB each. */
static int64_t block_rows(int64_t cols)
{
    int64_t b = 16384 / (cols > 0 ? cols : 1);
    return b > 0 ? b : 1;
}

/*
 * out[r0 : r0+rb] = op2(exp(x[r0 : r0+rb] - c[r0 : r0+rb]), ...) block by block,
 * with the kernels of x's device: tb/eb are [block_rows, cols] scratch. With
 * @p rowsum, the row sums of the exponentials go to rowsum [rows, 1]; with
 * @p scale_rows, out = exp(..) * scale_rows [rows, 1].
 */
static dt_status exp_rows(const dt_kernel_ops *k, dt_tensor *x, dt_tensor *c, dt_tensor *rowsum,
                          dt_tensor *scale_rows, dt_tensor *out)
{
    int64_t rows = dt_tensor_shape(x)[0], cols = dt_tensor_shape(x)[1], blk = block_rows(cols);
    int64_t bs[2] = {blk < rows ? blk : rows, cols};
    dt_tensor *tb = NULL, *eb = NULL;
    dt_status s = DT_OK;
    if (rows == 0 || cols == 0)
        return DT_OK;
    DT_CHECK(dt__ops_empty(2, bs, x->device, &tb));
    DT_CHECK_GOTO(dt__ops_empty(2, bs, x->device, &eb), s, out);
    for (int64_t r0 = 0; r0 < rows && s == DT_OK; r0 += blk) {
        int64_t rb = rows - r0 < blk ? rows - r0 : blk, sh[2] = {rb, cols};
        dt_tensor *v[8] = {0}; /* xb, cb, cbe, tbv, ebv, sb, sbe, ob */
        s = dt_tensor_narrow(x, 0, r0, rb, &v[0]);
        if (s == DT_OK)
            s = dt_tensor_narrow(c, 0, r0, rb, &v[1]);
        if (s == DT_OK)
            s = dt_tensor_expand(v[1], 2, sh, &v[2]);
        if (s == DT_OK)
            s = dt_tensor_narrow(tb, 0, 0, rb, &v[3]);
        if (s == DT_OK)
            s = dt_tensor_narrow(eb, 0, 0, rb, &v[4]);
        if (s == DT_OK)
            s = k->binary(DT_BINARY_SUB, v[0], v[2], v[3]);
        if (s == DT_OK)
            s = k->unary(DT_UNARY_EXP, v[3], 0.0f, v[4]);
        if (s == DT_OK && rowsum != NULL) {
            s = dt_tensor_narrow(rowsum, 0, r0, rb, &v[5]);
            if (s == DT_OK)
                s = k->reduce(DT_REDUCE_KIND_SUM, v[4], 1, v[5], NULL);
        }
        if (s == DT_OK && out != NULL) {
            s = dt_tensor_narrow(scale_rows, 0, r0, rb, &v[5]);
            if (s == DT_OK)
                s = dt_tensor_expand(v[5], 2, sh, &v[6]);
            if (s == DT_OK)
                s = dt_tensor_narrow(out, 0, r0, rb, &v[7]);
            if (s == DT_OK)
                s = k->binary(DT_BINARY_MUL, v[4], v[6], v[7]);
        }
        dt__ops_release_all(8, v);
    }
out:
    dt_tensor_release(tb);
    dt_tensor_release(eb);
    return s;
}

/* saved[0]: logits [rows, cols] contiguous; saved[1]: targets; saved[2]: lse [rows, 1].
 * glogits = (softmax - onehot) * g / count, zero rows for ignored targets. */
static dt_status pce_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    dt_tensor *x = node->saved[0], *t = node->saved[1], *lse = node->saved[2];
    dt_tensor *g = NULL, *g2 = NULL, *sr = NULL;
    int64_t rows = node->iv[0], cols = node->iv[1], vstart = node->iv[2], ignore = node->iv[3];
    int64_t s2[2] = {rows, cols}, s1[2] = {rows, 1};
    const dt_ag_meta *m = &node->inputs[0].meta;
    const dt_kernel_ops *k = NULL;
    dt_status s;
    if (!dt__ag_input_needs_grad(node, 0))
        return DT_OK;
    DT_CHECK(dt__ops_kernels(node->name, m->device, DT_KOP_UNARY, &k));
    DT_CHECK(dt__ops_empty(m->ndim, m->shape, m->device, &g));
    DT_CHECK_GOTO(dt_tensor_view(g, 2, s2, &g2), s, err);
    DT_CHECK_GOTO(dt__ops_empty(2, s1, m->device, &sr), s, err);
    float scale = (float)((double)*(const float *)dt_tensor_data(gy[0]) / node->dv[0]);
    float *srp = dt_tensor_data(sr);
    for (int64_t i = 0; i < rows; i++)
        srp[i] = target_at(t, i) == ignore ? 0.0f : scale;
    DT_CHECK_GOTO(exp_rows(k, x, lse, NULL, sr, g2), s, err);
    float *gp = dt_tensor_data(g2);
    for (int64_t i = 0; i < rows; i++) { /* minus the one-hot, on the rank owning the class */
        int64_t tg = target_at(t, i);
        if (tg != ignore && tg >= vstart && tg < vstart + cols)
            gp[i * cols + (tg - vstart)] -= scale;
    }
    dt_tensor_release(sr);
    dt_tensor_release(g2);
    gx[0] = g;
    return DT_OK;
err:
    dt_tensor_release(sr);
    dt_tensor_release(g2);
    dt_tensor_release(g);
    return s;
}

/* Forward on this rank's shard x [rows, cols] of the classes [vstart, vstart + cols):
 * lse [rows, 1] and the sum of the counted rows' losses. */
static dt_status pce_forward(const pce_args *a, dt_comm *comm, dt_mesh *mesh, dt_tensor *x,
                             dt_tensor *t, dt_tensor *lse, double *sum)
{
    int64_t rows = a->rows, cols = a->cols, s1[2] = {rows, 1};
    const float *xp = dt_tensor_data(x);
    float *lp = dt_tensor_data(lse), *acc = NULL;
    const dt_kernel_ops *k = NULL;
    dt_tensor *mx = NULL, *se = NULL;
    dt_status s;
    DT_CHECK(dt__ops_kernels("dt_cross_entropy", x->device, DT_KOP_REDUCE, &k));
    DT_CHECK(dt__ops_empty(2, s1, x->device, &mx));
    DT_CHECK_GOTO(dt__ops_zeros(2, s1, x->device, &se), s, out);
    acc = malloc(sizeof(float) * (size_t)(2 * rows + 1)); /* [sum exp | target logit] */
    if (acc == NULL) {
        s = DT_ERR(DT_ERR_NO_MEMORY, "dt_cross_entropy: %lld rows", (long long)rows);
        goto out;
    }
    float *mp = dt_tensor_data(mx);
    if (cols > 0 && rows > 0)
        DT_CHECK_GOTO(k->reduce(DT_REDUCE_KIND_MAX, x, 1, mx, NULL), s, out);
    else
        for (int64_t i = 0; i < rows; i++)
            mp[i] = -INFINITY;
    if (comm != NULL && rows > 0) {
        DT_CHECK_GOTO(
            dt_comm_allreduce(comm, mp, mp, (size_t)rows, DT_DTYPE_F32, DT_REDUCE_OP_MAX, NULL), s,
            out);
        dt__mesh_count_coll(mesh, DT_COLL_ALLREDUCE, rows * 4);
    }
    DT_CHECK_GOTO(exp_rows(k, x, mx, se, NULL, NULL), s, out);
    const float *sp = dt_tensor_data(se);
    for (int64_t i = 0; i < rows; i++) {
        int64_t tg = target_at(t, i);
        acc[i] = sp[i];
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
        lp[i] = (float)((double)mp[i] + log((double)acc[i]));
        if (target_at(t, i) != a->ignore)
            total += (double)lp[i] - (double)acc[rows + i];
    }
    *sum = total;
    s = DT_OK;
out:
    free(acc);
    dt_tensor_release(mx);
    dt_tensor_release(se);
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
    int64_t s1[2] = {a->rows, 1};
    DT_CHECK_GOTO(dt__ops_empty(2, s1, ll->device, &lse), s, out);
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
        DT_CHECK_GOTO(pce_local(&a, kc >= 0 ? dt_mesh_dim_comm(mesh, kc) : NULL, mesh, ll, lt, &y),
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
