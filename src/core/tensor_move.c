/* Moving a tensor's data to another device in place (module.to(device)). */
#include "dtensor/memory.h"

#include "core/error.h"
#include "core/tensor_impl.h"

/* The tensor that holds @p t's data: itself, or a distributed tensor's shard. */
static dt_tensor *data_of(const dt_tensor *t)
{
    return t->dist != NULL ? t->local : (dt_tensor *)t;
}

dt_status dt__tensor_move_prepare(const dt_tensor *t, dt_device device, dt_tensor **moved)
{
    DT_ARG_NOT_NULL(t);
    dt_tensor *d = data_of(t);
    if (d == NULL || d->storage == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt__tensor_move_prepare: tensor has no data to move");
    dt_tensor *m = NULL;
    dt_mem_category prev = dt_memory_set_default_category(d->storage->category);
    dt_status st = dt_tensor_empty(d->ndim, d->shape, d->dtype, device, &m);
    dt_memory_set_default_category(prev);
    DT_CHECK(st);
    st = dt_tensor_copy_(m, d);
    if (st != DT_OK) {
        dt_tensor_release(m);
        return st;
    }
    *moved = m;
    return DT_OK;
}

void dt__tensor_move_commit(dt_tensor *t, dt_tensor *moved)
{
    dt_tensor *d = data_of(t);
    dt_storage *old = d->storage;
    d->storage = moved->storage;
    moved->storage = old; /* released with the temporary handle */
    d->device = moved->device;
    d->offset = 0;
    dt__contiguous_strides(d->ndim, d->shape, d->strides);
    t->device = moved->device;
    dt_tensor_release(moved);
}
