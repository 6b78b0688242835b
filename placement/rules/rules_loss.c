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
 * Partial logits and a second class shard are replicated first. Any device:
 * the [rows, cols] work runs on the logits' device (the target logits are
 * gathered and the one-hot scattered by the embedding kernels); only per-row
 * values (targets, maxima, sums) are read on the host.
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
    DT_CHECK(dt__kt_empty(2, bs, x->device, &tb));
    DT_CHECK_GOTO(dt__kt_empty(2, bs, x->device, &eb), s, out);
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
        dt__kt_release_all(8, v);
    }
out:
    dt_tensor_release(tb);
    dt_tensor_release(eb);
    return s;
}

/*
 * Flat indices into x [rows, cols] (viewed as [rows * cols, 1]) of each row's
 * target class when this rank holds it, else -1, on @p device: the embedding
 * kernels then gather the target logits and scatter the one-hot, so neither
 * needs the logits on the host. @p th holds the targets on the host.
 */
static dt_status target_slots(const dt_tensor *th, int64_t rows, int64_t cols, int64_t vstart,
                              int64_t ignore, dt_device device, dt_tensor **out)
{
    dt_tensor *h = NULL;
    DT_CHECK(dt__kt_empty_as(1, &rows, DT_DTYPE_I64, dt_device_cpu(), DT_MEM_ACTIVATION, &h));
    int64_t *p = dt_tensor_data(h);
    for (int64_t i = 0; i < rows; i++) {
        int64_t tg = target_at(th, i);
        p[i] = tg != ignore && tg >= vstart && tg < vstart + cols ? i * cols + (tg - vstart) : -1;
    }
    dt_status s = dt_tensor_to_device(h, device, out);
    dt_tensor_release(h);
    return s;
}

/* @p t [rows, cols] as the one-column table [rows * cols, 1] the embedding kernels index. */
static dt_status as_column(dt_tensor *t, int64_t rows, int64_t cols, dt_tensor **out)
{
    int64_t sh[2] = {rows * cols, 1};
    return dt_tensor_view(t, 2, sh, out);
}

/* saved[0]: logits [rows, cols] contiguous; saved[1]: targets (host); saved[2]: lse [rows, 1].
 * glogits = (softmax - onehot) * g / count, zero rows for ignored targets. */
static dt_status pce_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    dt_tensor *x = node->saved[0], *th = node->saved[1], *lse = node->saved[2];
    dt_tensor *g = NULL, *g2 = NULL, *gcol = NULL, *sr = NULL, *srh = NULL, *slots = NULL;
    dt_tensor *neg = NULL;
    int64_t rows = node->iv[0], cols = node->iv[1], vstart = node->iv[2], ignore = node->iv[3];
    int64_t s2[2] = {rows, cols}, s1[2] = {rows, 1};
    const dt_ag_meta *m = &node->inputs[0].meta;
    const dt_kernel_ops *k = NULL;
    double gv = 0.0;
    dt_status s;
    if (!dt__ag_input_needs_grad(node, 0))
        return DT_OK;
    DT_CHECK(dt__kt_kernels(node->name, m->device, DT_KOP_UNARY, &k));
    DT_CHECK(dt_tensor_item(gy[0], &gv));
    float scale = (float)(gv / node->dv[0]);
    DT_CHECK(dt__kt_empty(m->ndim, m->shape, m->device, &g));
    DT_CHECK_GOTO(dt_tensor_view(g, 2, s2, &g2), s, err);
    /* per-row scale (0 for ignored targets), made on the host */
    DT_CHECK_GOTO(dt__kt_empty(2, s1, dt_device_cpu(), &srh), s, err);
    float *srp = dt_tensor_data(srh);
    for (int64_t i = 0; i < rows; i++)
        srp[i] = target_at(th, i) == ignore ? 0.0f : scale;
    DT_CHECK_GOTO(dt_tensor_to_device(srh, m->device, &sr), s, err);
    DT_CHECK_GOTO(exp_rows(k, x, lse, NULL, sr, g2), s, err);
    /* minus the one-hot, on the rank owning the class: += -scale at the target slots */
    DT_CHECK_GOTO(target_slots(th, rows, cols, vstart, ignore, m->device, &slots), s, err);
    DT_CHECK_GOTO(dt__kt_empty(2, s1, m->device, &neg), s, err);
    DT_CHECK_GOTO(dt_tensor_fill(neg, -(double)scale), s, err);
    DT_CHECK_GOTO(as_column(g2, rows, cols, &gcol), s, err);
    DT_CHECK_GOTO(k->embedding_backward(slots, neg, 0, gcol), s, err);
    gx[0] = g;
    g = NULL;
    s = DT_OK;
err:;
    dt_tensor *tmp[] = {g, g2, gcol, sr, srh, slots, neg};
    dt__kt_release_all(7, tmp);
    return s;
}

/* Forward on this rank's shard x [rows, cols] of the classes [vstart, vstart + cols):
 * lse [rows, 1] and the sum of the counted rows' losses. @p th: the targets, on the host. */
static dt_status pce_forward(const pce_args *a, dt_comm *comm, dt_mesh *mesh, dt_tensor *x,
                             dt_tensor *th, dt_tensor *lse, double *sum)
{
    int64_t rows = a->rows, cols = a->cols, s1[2] = {rows, 1}, s2[1] = {2 * rows + 1};
    const dt_kernel_ops *k = NULL;
    dt_tensor *mx = NULL, *acc = NULL, *sums = NULL, *se = NULL, *tl = NULL, *slots = NULL;
    dt_tensor *xcol = NULL;
    dt_tensor *mxh = NULL, *acch = NULL, *lseh = NULL;
    dt_status s;
    DT_CHECK(dt__kt_kernels("dt_cross_entropy", x->device, DT_KOP_REDUCE, &k));
    DT_CHECK(dt__kt_empty(2, s1, x->device, &mx));
    /* [sum exp | target logit], all-reduced together */
    DT_CHECK_GOTO(dt__kt_zeros(1, s2, x->device, &acc), s, out);
    DT_CHECK_GOTO(dt_tensor_narrow(acc, 0, 0, rows, &sums), s, out);
    DT_CHECK_GOTO(dt_tensor_view(sums, 2, s1, &se), s, out);
    if (cols > 0 && rows > 0)
        DT_CHECK_GOTO(k->reduce(DT_REDUCE_KIND_MAX, x, 1, mx, NULL), s, out);
    else
        DT_CHECK_GOTO(dt_tensor_fill(mx, -INFINITY), s, out);
    if (comm != NULL && rows > 0) {
        DT_CHECK_GOTO(dt_comm_allreduce(comm, dt_tensor_data(mx), dt_tensor_data(mx), (size_t)rows,
                                        DT_DTYPE_F32, DT_REDUCE_OP_MAX, NULL),
                      s, out);
        dt__mesh_count_coll(mesh, DT_COLL_ALLREDUCE, rows * 4);
    }
    DT_CHECK_GOTO(exp_rows(k, x, mx, se, NULL, NULL), s, out);
    if (rows > 0 && cols > 0) { /* the target logits, gathered where they live */
        DT_CHECK_GOTO(target_slots(th, rows, cols, a->vstart, a->ignore, x->device, &slots), s,
                      out);
        DT_CHECK_GOTO(as_column(x, rows, cols, &xcol), s, out);
        DT_CHECK_GOTO(dt_tensor_narrow(acc, 0, rows, rows, &tl), s, out);
        DT_CHECK_GOTO(k->embedding(xcol, slots, 0, tl), s, out);
    }
    if (comm != NULL && rows > 0) {
        DT_CHECK_GOTO(dt_comm_allreduce(comm, dt_tensor_data(acc), dt_tensor_data(acc),
                                        (size_t)(2 * rows), DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL),
                      s, out);
        dt__mesh_count_coll(mesh, DT_COLL_ALLREDUCE, rows * 8);
    }
    /* rows values each: finished on the host, in double as the reference does */
    DT_CHECK_GOTO(dt_tensor_to_device(mx, dt_device_cpu(), &mxh), s, out);
    DT_CHECK_GOTO(dt_tensor_to_device(acc, dt_device_cpu(), &acch), s, out);
    DT_CHECK_GOTO(dt__kt_empty(2, s1, dt_device_cpu(), &lseh), s, out);
    const float *mp = dt_tensor_data(mxh), *ap = dt_tensor_data(acch);
    float *lp = dt_tensor_data(lseh);
    double total = 0.0;
    for (int64_t i = 0; i < rows; i++) {
        lp[i] = (float)((double)mp[i] + log((double)ap[i]));
        if (target_at(th, i) != a->ignore)
            total += (double)lp[i] - (double)ap[rows + i];
    }
    DT_CHECK_GOTO(dt_tensor_copy_(lse, lseh), s, out);
    *sum = total;
    s = DT_OK;
out:;
    dt_tensor *tmp[] = {mx, acc, sums, se, tl, slots, xcol, mxh, acch, lseh};
    dt__kt_release_all(10, tmp);
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
    /* the targets are read on the host (rows ids): a host copy of device ones */
    DT_CHECK(dt_tensor_to_device(lt, dt_device_cpu(), &tc));
    DT_CHECK_GOTO(pce_count(name, a, mesh, tc, &divisor), s, out);
    DT_CHECK_GOTO(dt__kt_contiguous(ll, &xc), s, out);
    DT_CHECK_GOTO(dt_tensor_view(xc, 2, s2, &x2), s, out);
    int64_t s1[2] = {a->rows, 1};
    DT_CHECK_GOTO(dt__kt_empty(2, s1, ll->device, &lse), s, out);
    DT_CHECK_GOTO(pce_forward(a, comm, mesh, x2, tc, lse, &sum), s, out);
    DT_CHECK_GOTO(dt__kt_empty(0, s2, ll->device, &y), s, out);
    /* NaN when no target counts anywhere, as PyTorch */
    DT_CHECK_GOTO(dt_tensor_fill(y, divisor > 0.0 ? (double)(float)(sum / divisor) : NAN), s, out);
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
