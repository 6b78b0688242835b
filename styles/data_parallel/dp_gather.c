/*
 * ZeRO all-gathers over the dp comm: each rank's shard of a tp-local tensor is
 * gathered into the tensor the module computes on. Along dim 0 the pieces
 * land in place (allgatherv with displacements); along another dim they go
 * through a packed buffer, unpacked when the gather completes. With
 * param_dtype bf16 each rank sends its shard rounded to bf16 (half the bytes)
 * and every rank computes on the f32 values of those bf16 ones. In ZeRO-3 the
 * gathered tensor's storage is dropped between uses (its handle, and the
 * handles autograd saved on it, stay valid) and refilled before the next.
 */
#include <string.h>

#include "core/error.h"
#include "styles/data_parallel/dp_impl.h"

/* Swap the data of @p t's storage with that of a fresh one of @p nbytes:
 * accounting moves with the blocks (the category travels with them). */
static dt_status storage_swap(dt_tensor *t, size_t nbytes, dt_mem_category cat)
{
    dt_storage *fresh = NULL, *s = t->storage;
    dt_mem_category prev = dt_memory_set_default_category(cat);
    dt_status st = dt__storage_create(nbytes, t->device, &fresh);
    dt_memory_set_default_category(prev);
    DT_CHECK(st);
    void *data = s->data;
    size_t nb = s->nbytes, bb = s->block_bytes;
    dt_mem_category c = s->category;
    s->data = fresh->data, s->nbytes = fresh->nbytes, s->block_bytes = fresh->block_bytes;
    s->category = fresh->category;
    fresh->data = data, fresh->nbytes = nb, fresh->block_bytes = bb, fresh->category = c;
    dt__storage_release(fresh);
    return DT_OK;
}

dt_status dt__dp_storage_drop(dt_tensor *t)
{
    if (t->storage->nbytes == 0)
        return DT_OK;
    return storage_swap(t, 0, t->storage->category);
}

dt_status dt__dp_storage_fill(dt_tensor *t, dt_mem_category cat)
{
    size_t want = (size_t)dt_tensor_numel(t) * dt_dtype_size(t->dtype);
    if (t->storage->nbytes >= want)
        return DT_OK;
    return storage_swap(t, want, cat);
}

/* A communication buffer like @p like (shape), in @p dtype. */
static dt_status comm_buffer(const dt_tensor *like, int ndim, const int64_t *shape, dt_dtype dtype,
                             dt_tensor **out)
{
    dt_mem_category prev = dt_memory_set_default_category(DT_MEM_COMM);
    dt_status st = dt_tensor_empty(ndim, shape, dtype, like->device, out);
    dt_memory_set_default_category(prev);
    return st;
}

/* With param_dtype bf16: the shard rounded to bf16, what the gather sends. */
static dt_status send_copy(const dp_state *s, dp_param *p, const void **send)
{
    dt_tensor *shard = dt_to_local(p->slot);
    if (s->param_dtype == DT_DTYPE_F32) {
        *send = dt_tensor_data(shard);
        return DT_OK;
    }
    DT_CHECK(comm_buffer(shard, shard->ndim, shard->shape, s->param_dtype, &p->send));
    DT_CHECK(dt_tensor_copy_(p->send, shard));
    *send = dt_tensor_data(p->send);
    return DT_OK;
}

dt_status dt__dp_gather_post(dp_state *s, int i)
{
    dp_param *p = &s->p[i];
    if (!dt__dp_has_copy(s, p) || p->resident || p->gwork != NULL)
        return DT_OK;
    DT_CHECK(dt__dp_storage_fill(p->gathered, DT_MEM_PARAMETER));
    if (p->k < 0) { /* offloaded, replicated over dp: the master to the device */
        DT_CHECK(dt_tensor_copy_(p->gathered, dt_to_local(p->slot)));
        p->resident = true;
        return DT_OK;
    }
    const void *send = NULL;
    dt_status st = send_copy(s, p, &send);
    /* f32 along dim 0: the pieces land in place; else through a buffer */
    if (st == DT_OK && p->k == 0 && s->param_dtype == DT_DTYPE_F32)
        return dt_comm_allgatherv(s->dp, send, dt_tensor_data(p->gathered), p->counts, p->displs,
                                  DT_DTYPE_F32, &p->gwork);
    int64_t n = dt_tensor_numel(p->gathered);
    if (st == DT_OK)
        st = comm_buffer(p->gathered, 1, &n, s->param_dtype, &p->recv);
    if (st == DT_OK)
        st = dt_comm_allgatherv(s->dp, send, dt_tensor_data(p->recv), p->counts,
                                p->k == 0 ? p->displs : NULL, s->param_dtype, &p->gwork);
    if (st != DT_OK) {
        dt_tensor_release(p->recv);
        dt_tensor_release(p->send);
        p->recv = p->send = NULL;
    }
    return st;
}

/* The gathered buffer @p recv into the tensor the module computes on (f32). */
static dt_status receive(dp_param *p)
{
    if (p->k > 0) /* pieces of a later dim, packed in rank order */
        return dt__dp_unpack(p, p->recv, p->gathered);
    int64_t n = dt_tensor_numel(p->gathered), one = 1;
    dt_tensor *flat = NULL;
    DT_CHECK(dt__tensor_make_view(p->gathered, 1, &n, &one, p->gathered->offset, &flat));
    dt_status st = dt_tensor_copy_(flat, p->recv);
    dt_tensor_release(flat);
    return st;
}

dt_status dt__dp_gather_wait(dp_state *s, int i)
{
    dp_param *p = &s->p[i];
    if (!dt__dp_has_copy(s, p) || p->resident)
        return DT_OK;
    if (p->gwork == NULL)
        DT_CHECK(dt__dp_gather_post(s, i));
    if (p->resident) /* copied at once */
        return DT_OK;
    dt_status st = dt_work_wait(p->gwork, -1.0);
    dt_work_release(p->gwork);
    p->gwork = NULL;
    if (st == DT_OK && p->recv != NULL)
        st = receive(p);
    dt_tensor_release(p->recv);
    dt_tensor_release(p->send);
    p->recv = p->send = NULL;
    DT_CHECK(st);
    p->resident = true;
    return DT_OK;
}

dt_status dt__dp_unit_gather_post(dp_state *s, int u)
{
    for (int j = 0; j < s->u[u].n; j++)
        DT_CHECK(dt__dp_gather_post(s, s->u[u].idx[j]));
    return DT_OK;
}

dt_status dt__dp_unit_gather_wait(dp_state *s, int u)
{
    /* post them all first, so the gathers of one unit overlap each other */
    DT_CHECK(dt__dp_unit_gather_post(s, u));
    for (int j = 0; j < s->u[u].n; j++)
        DT_CHECK(dt__dp_gather_wait(s, s->u[u].idx[j]));
    return DT_OK;
}

void dt__dp_unit_drop(dp_state *s, int u)
{
    for (int j = 0; j < s->u[u].n; j++) {
        dp_param *p = &s->p[s->u[u].idx[j]];
        if (!dt__dp_has_copy(s, p) || p->gwork != NULL)
            continue;
        p->resident = false;
        (void)dt__dp_storage_drop(p->gathered); /* a 0-byte block: cannot fail in practice */
    }
}
