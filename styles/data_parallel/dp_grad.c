/*
 * Gradient reductions of a data-parallel model. dp_hooks.c hands each
 * parameter's gradient over as soon as autograd completed it (its
 * post-accumulate-grad hook); it is scaled by grad_scale (before the sum: the
 * scale may differ between ranks, so uneven local batches can weigh theirs)
 * and its reduction starts without waiting: DDP copies it into its bucket and
 * all-reduces each full bucket in bucket order, ZeRO-1 all-reduces it,
 * ZeRO-2/3 reduce-scatter it into a new gradient shard. A ZeRO reduction
 * found complete while backward goes on is installed then, so the full
 * gradient it sent does not wait for the end of backward; when the backward
 * pass ends the rest are completed and installed as the leaves' gradients.
 * With reduce_dtype bf16 what is sent and reduced is a bf16 copy (half the
 * bytes; the comm sums in f32 and rounds), turned back into the f32
 * gradient the optimizer's master weights take.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "kernels/kernel_ops.h"
#include "styles/data_parallel/dp_impl.h"

static dt_status new_tensor(int ndim, const int64_t *shape, dt_dtype dtype, dt_device device,
                            dt_mem_category cat, dt_tensor **out)
{
    dt_mem_category prev = dt_memory_set_default_category(cat);
    dt_status st = dt_tensor_empty(ndim, shape, dtype, device, out);
    dt_memory_set_default_category(prev);
    return st;
}

static dt_status new_grad(int ndim, const int64_t *shape, dt_device device, dt_tensor **out)
{
    return new_tensor(ndim, shape, DT_DTYPE_F32, device, DT_MEM_GRADIENT, out);
}

/* A buffer that is reduced: in the reduce dtype. */
static dt_status new_reduced(const dp_state *s, int ndim, const int64_t *shape, dt_device device,
                             dt_tensor **out)
{
    return new_tensor(ndim, shape, s->reduce_dtype, device, DT_MEM_GRADIENT, out);
}

/* The f32 gradient of a reduced buffer: @p r itself (a new reference), or an
 * f32 copy of it shaped @p ndim / @p shape when it was reduced in bf16. */
static dt_status as_f32(dt_tensor *r, dt_tensor **out)
{
    if (r->dtype == DT_DTYPE_F32) {
        *out = dt_tensor_retain(r);
        return DT_OK;
    }
    DT_CHECK(new_grad(r->ndim, r->shape, r->device, out));
    dt_status st = dt_tensor_copy_(*out, r);
    if (st != DT_OK) {
        dt_tensor_release(*out);
        *out = NULL;
    }
    return st;
}

/* The kernels of @p t's device, for the element-wise steps below. */
static dt_status kernels(const dt_tensor *t, const dt_kernel_ops **out)
{
    *out = dt__kernels_for(t->device);
    if (*out == NULL)
        return DT_ERR(DT_ERR_UNSUPPORTED, "data parallel: no kernels for device %s:%d",
                      dt_device_type_name(t->device.type), t->device.index);
    return DT_OK;
}

/* t *= f in place (t contiguous); nothing to do for 1. */
static dt_status scale(dt_tensor *t, double f)
{
    const dt_kernel_ops *k = NULL;
    if (f == 1.0)
        return DT_OK;
    DT_CHECK(kernels(t, &k));
    return k->unary(DT_UNARY_SCALE, t, (float)f, t);
}

/* A 1-d view of @p n elements of @p buf (contiguous) from element @p at. */
static dt_status span_of(dt_tensor *buf, int64_t at, int64_t n, dt_tensor **out)
{
    int64_t one = 1;
    return dt__tensor_make_view(buf, 1, &n, &one, buf->offset + at, out);
}

/* buf[at : at + numel(g)] = g, or 0 when g is NULL. */
static dt_status put(dt_tensor *buf, int64_t at, int64_t n, const dt_tensor *g)
{
    dt_tensor *dst = NULL, *src = NULL;
    DT_CHECK(span_of(buf, at, n, &dst));
    dt_status st = DT_OK;
    if (g == NULL) {
        st = dt_tensor_fill(dst, 0.0);
    } else {
        st = dt__tensor_make_view((dt_tensor *)g, 1, &n, (int64_t[]){1}, g->offset, &src);
        if (st == DT_OK && !dt_tensor_is_contiguous(g))
            st = DT_ERR(DT_ERR_INTERNAL, "data parallel: a gradient is not contiguous");
        if (st == DT_OK)
            st = dt_tensor_copy_(dst, src);
    }
    dt_tensor_release(dst);
    dt_tensor_release(src);
    return st;
}

/* ---------------------------------------------------------------- posting */

static dt_status ddp_post_ready(dp_state *s)
{
    while (s->next_post < s->n_buckets &&
           s->b[s->next_post].n_ready == s->b[s->next_post].n_params) {
        dp_bucket *b = &s->b[s->next_post];
        void *d = dt_tensor_data(b->buf);
        DT_CHECK(dt_comm_allreduce(s->dp, d, d, (size_t)b->numel, s->reduce_dtype, DT_REDUCE_OP_SUM,
                                   &b->work));
        DT_LOG_DEBUG("dp", "bucket %d (%lld floats) all-reduce posted", s->next_post,
                     (long long)b->numel);
        s->next_post++;
    }
    return DT_OK;
}

static dt_status ddp_ready(dp_state *s, dp_param *p, dt_tensor *g)
{
    dp_bucket *b = &s->b[p->bucket];
    if (b->buf == NULL)
        DT_CHECK(new_reduced(s, 1, &b->numel, g->device, &b->buf));
    DT_CHECK(put(b->buf, p->boff, dt_tensor_numel(g), g));
    b->n_ready++;
    return ddp_post_ready(s);
}

/* What zero_ready sends: @p g itself (the engine is done with it: reduced in
 * place), or its copy in the reduce dtype. */
static dt_status send_buffer(const dp_state *s, dt_tensor *g, dt_tensor **out)
{
    if (s->reduce_dtype == DT_DTYPE_F32) {
        *out = dt_tensor_retain(g);
        return DT_OK;
    }
    DT_CHECK(new_tensor(g->ndim, g->shape, s->reduce_dtype, g->device, DT_MEM_COMM, out));
    dt_status st = dt_tensor_copy_(*out, g);
    if (st != DT_OK) {
        dt_tensor_release(*out);
        *out = NULL;
    }
    return st;
}

/* @p g's dp pieces of a later dim packed in rank order, in the reduce dtype. */
static dt_status pack_send(const dp_state *s, const dp_param *p, dt_tensor *g, dt_tensor **out)
{
    int64_t n = dt_tensor_numel(g);
    DT_CHECK(new_tensor(1, &n, s->reduce_dtype, g->device, DT_MEM_COMM, out));
    dt_status st = dt__dp_pack(p, g, *out);
    if (st != DT_OK) {
        dt_tensor_release(*out);
        *out = NULL;
    }
    return st;
}

static dt_status zero_ready(dp_state *s, dp_param *p, dt_tensor *g)
{
    bool scatter = p->k >= 0 && s->stage != DT_DP_ZERO1;
    if (scatter && p->k > 0)
        DT_CHECK(pack_send(s, p, g, &p->rsrc));
    else
        DT_CHECK(send_buffer(s, g, &p->rsrc));
    p->rpending = true;
    void *d = dt_tensor_data(p->rsrc);
    if (!scatter)
        return dt_comm_allreduce(s->dp, d, d, (size_t)dt_tensor_numel(g), s->reduce_dtype,
                                 DT_REDUCE_OP_SUM, &p->rwork);
    dt_tensor *local = dt_to_local(p->slot);
    DT_CHECK(new_reduced(s, local->ndim, local->shape, g->device, &p->rdst));
    return dt_comm_reduce_scatterv(s->dp, d, dt_tensor_data(p->rdst), p->counts, s->reduce_dtype,
                                   DT_REDUCE_OP_SUM, &p->rwork);
}

/* ---------------------------------------------------------------- finishing */

/* leaf.grad = g, or += g when it has one (gradient accumulation). */
static dt_status install(dt_tensor *leaf, dt_tensor *g)
{
    if (g->device.type != leaf->device.type || g->device.index != leaf->device.index) {
        /* offload: reduced on the device, the master and its optimizer on the host */
        dt_tensor *h = NULL;
        dt_mem_category prev = dt_memory_set_default_category(DT_MEM_GRADIENT);
        dt_status st = dt_tensor_to_device(g, leaf->device, &h);
        dt_memory_set_default_category(prev);
        DT_CHECK(st);
        st = install(leaf, h);
        dt_tensor_release(h);
        return st;
    }
    dt__storage_set_category(g->storage, DT_MEM_GRADIENT);
    if (leaf->grad == NULL)
        return dt_tensor_set_grad(leaf, g);
    if (!dt_tensor_is_contiguous(leaf->grad) || dt_tensor_numel(leaf->grad) != dt_tensor_numel(g))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "data parallel: cannot accumulate into the existing gradient (%lld "
                      "elements, %scontiguous) a gradient of %lld elements",
                      (long long)dt_tensor_numel(leaf->grad),
                      dt_tensor_is_contiguous(leaf->grad) ? "" : "not ",
                      (long long)dt_tensor_numel(g));
    const dt_kernel_ops *k = NULL;
    DT_CHECK(kernels(g, &k));
    dt_tensor *a = NULL, *b = NULL; /* flat views: the shapes may differ, the counts do not */
    int64_t n = dt_tensor_numel(g);
    dt_status st = span_of(leaf->grad, 0, n, &a);
    if (st == DT_OK)
        st = span_of(g, 0, n, &b);
    if (st == DT_OK)
        st = k->binary(DT_BINARY_ADD, a, b, a);
    dt_tensor_release(a);
    dt_tensor_release(b);
    return st;
}

static dt_status finish_ddp(dp_state *s)
{
    for (int i = 0; i < s->n_buckets; i++) {
        dp_bucket *b = &s->b[i];
        if (b->work == NULL)
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "data parallel: bucket %d got %d of its %d gradients in backward "
                          "(every parameter used in forward must get a gradient)",
                          i, b->n_ready, b->n_params);
        dt_status st = dt_work_wait(b->work, -1.0);
        dt_work_release(b->work);
        b->work = NULL;
        DT_CHECK(st);
    }
    for (int i = 0; i < s->n_params; i++) {
        dp_param *p = &s->p[i];
        dt_tensor *leaf = dt__dp_local(p->slot), *v = NULL, *g = NULL;
        dp_bucket *b = &s->b[p->bucket];
        int64_t strides[DT_MAX_DIMS];
        dt__contiguous_strides(leaf->ndim, leaf->shape, strides);
        DT_CHECK(dt__tensor_make_view(b->buf, leaf->ndim, leaf->shape, strides, p->boff, &v));
        dt_status st = as_f32(v, &g);
        if (st == DT_OK)
            st = install(leaf, g);
        dt_tensor_release(g);
        dt_tensor_release(v);
        DT_CHECK(st);
    }
    for (int i = 0; i < s->n_buckets; i++) { /* the gradients keep the storage alive */
        dt_tensor_release(s->b[i].buf);
        s->b[i].buf = NULL;
        s->b[i].n_ready = 0;
    }
    s->next_post = 0;
    return DT_OK;
}

static dt_status finish_param(dp_state *s, dp_param *p)
{
    dt_status st = dt_work_wait(p->rwork, -1.0);
    dt_work_release(p->rwork);
    p->rwork = NULL;
    p->rpending = false;
    dt_tensor *leaf = dt_to_local(p->slot), *g = NULL;
    if (st == DT_OK) {
        if (p->k < 0) {
            st = as_f32(p->rsrc, &g);
        } else if (s->stage == DT_DP_ZERO1) { /* the slice converts to f32 too */
            st = new_grad(leaf->ndim, leaf->shape, p->rsrc->device, &g);
            if (st == DT_OK)
                st = dt__dp_slice(p, s->dp_rank, p->rsrc, g);
        } else {
            st = as_f32(p->rdst, &g);
        }
    }
    dt_tensor_release(p->rsrc);
    dt_tensor_release(p->rdst);
    p->rsrc = p->rdst = NULL;
    DT_CHECK(st);
    st = install(leaf, g);
    dt_tensor_release(g);
    return st;
}

static dt_status finish(dp_state *s)
{
    if (s->stage == DT_DP_DDP)
        return finish_ddp(s);
    dt_status first = DT_OK;
    dt_work **all = malloc((size_t)s->n_params * sizeof(*all));
    if (all != NULL) { /* one deadline for the batch; after a failure the rest fail at once */
        for (int i = 0; i < s->n_params; i++)
            all[i] = s->p[i].rpending ? s->p[i].rwork : NULL;
        (void)dt_work_wait_all(all, (size_t)s->n_params, -1.0); /* each status: below */
        free(all);
    }
    for (int i = 0; i < s->n_params; i++) /* collect all, even after an error */
        if (s->p[i].rpending) {
            dt_status st = finish_param(s, &s->p[i]);
            if (first == DT_OK)
                first = st;
        }
    return first;
}

void dt__dp_grads_reset(dp_state *s)
{
    for (int i = 0; i < s->n_params; i++) {
        dp_param *p = &s->p[i];
        dt_work_release(p->rwork); /* waits for one in flight */
        dt_tensor_release(p->rsrc);
        dt_tensor_release(p->rdst);
        p->rwork = NULL, p->rsrc = p->rdst = NULL, p->rpending = false;
    }
    for (int i = 0; i < s->n_buckets; i++) {
        dt_work_release(s->b[i].work);
        dt_tensor_release(s->b[i].buf);
        s->b[i].work = NULL, s->b[i].buf = NULL, s->b[i].n_ready = 0;
    }
    s->next_post = 0;
}

/* ---------------------------------------------------------------- gradients ready */

/*
 * Give the reductions in flight a chance to move: a non-blocking collective
 * advances only inside calls on its comm family, and with no tensor
 * parallelism backward makes none of its own.
 */
dt_status dt__dp_progress(dp_state *s)
{
    bool done = false;
    for (int i = 0; i < s->next_post; i++)
        if (s->b[i].work != NULL)
            DT_CHECK(dt_work_test(s->b[i].work, &done));
    for (int i = 0; i < s->n_params; i++) {
        dp_param *p = &s->p[i];
        if (p->rwork != NULL) {
            done = false;
            DT_CHECK(dt_work_test(p->rwork, &done));
            /* install it now: the full-size gradient sent (and its packed
             * copy) would otherwise live until the end of backward */
            if (done && p->rpending)
                DT_CHECK(finish_param(s, p));
        }
        if (p->gwork != NULL)
            DT_CHECK(dt_work_test(p->gwork, &done));
    }
    return DT_OK;
}

/*
 * Without sync (dt_dp_set_gradient_sync): keep @p g, this rank's gradient,
 * summed into p->acc for the next synced backward; nothing is sent.
 */
static dt_status accumulate(dp_param *p, dt_tensor *g)
{
    const dt_kernel_ops *k = NULL;
    if (p->acc != NULL) {
        DT_CHECK(kernels(g, &k));
        return k->binary(DT_BINARY_ADD, p->acc, g, p->acc);
    }
    DT_CHECK(new_grad(g->ndim, g->shape, g->device, &p->acc));
    dt_status st = dt_tensor_copy_(p->acc, g);
    if (st != DT_OK) {
        dt_tensor_release(p->acc);
        p->acc = NULL;
    }
    return st;
}

/* A synced backward: @p g += what the passes without sync kept, then it is reduced. */
static dt_status add_accumulated(dp_param *p, dt_tensor *g)
{
    const dt_kernel_ops *k = NULL;
    if (p->acc == NULL)
        return DT_OK;
    DT_CHECK(kernels(g, &k));
    dt_status st = k->binary(DT_BINARY_ADD, g, p->acc, g);
    dt_tensor_release(p->acc);
    p->acc = NULL;
    return st;
}

static dt_status param_ready(dp_state *s, dp_param *p, dt_tensor *g)
{
    if (!s->sync)
        return accumulate(p, g);
    DT_CHECK(add_accumulated(p, g));
    return s->stage == DT_DP_DDP ? ddp_ready(s, p, g) : zero_ready(s, p, g);
}

dt_status dt__dp_grad_ready(dp_state *s, dp_param *p, dt_tensor *g)
{
    DT_CHECK(scale(g, s->scale)); /* before the sum: the scale may differ between ranks */
    DT_CHECK(param_ready(s, p, g));
    if (s->stage == DT_DP_ZERO3 && dt__dp_has_copy(s, p) && p->gwork == NULL) {
        p->resident = false; /* every user of the gathered tensor has run */
        DT_CHECK(dt__dp_storage_drop(p->gathered));
    }
    return dt__dp_progress(s);
}

/*
 * A parameter that got no gradient in a synced pass: what passes
 * without sync kept for it is reduced now; else a DDP bucket still needs its
 * entry (zeros).
 */
static dt_status unused_synced(dp_state *s, dp_param *p)
{
    if (p->acc != NULL) {
        dt_tensor *g = p->acc;
        p->acc = NULL;
        dt_status st = s->stage == DT_DP_DDP ? ddp_ready(s, p, g) : zero_ready(s, p, g);
        dt_tensor_release(g);
        return st;
    }
    if (s->stage != DT_DP_DDP)
        return DT_OK;
    dp_bucket *b = &s->b[p->bucket];
    dt_tensor *leaf = dt__dp_local(p->slot);
    if (b->buf == NULL)
        DT_CHECK(new_reduced(s, 1, &b->numel, leaf->device, &b->buf));
    DT_CHECK(put(b->buf, p->boff, dt_tensor_numel(leaf), NULL));
    b->n_ready++;
    return ddp_post_ready(s);
}

dt_status dt__dp_grads_finish(dp_state *s)
{
    for (int i = 0; i < s->n_params; i++)
        if (!s->p[i].ready)
            DT_CHECK(unused_synced(s, &s->p[i]));
    return finish(s);
}
