/*
 * Accumulating a gradient into a leaf's .grad (the engine's AccumulateGrad):
 * the first one takes the gradient's storage when nobody else can see it,
 * later ones are added in place.
 */
#include <string.h>

#include "autograd/leaf_grad.h"
#include "kernels/kernel_tensor.h"

/*
 * Whether a leaf's first gradient may take g's storage instead of a copy
 * (PyTorch's AccumulateGrad steals too): g is a plain local tensor of the
 * leaf's dtype, device and shape filling its whole storage, the engine holds
 * every one of the handle's references (@p held; 0 for a tensor the user
 * passed in) and that handle is the storage's only one (no views of it).
 */
static bool can_steal(const dt_tensor *leaf, const dt_tensor *g, int held)
{
    if (held <= 0 || g->dist != NULL || g->grad_fn != NULL || g->storage == NULL ||
        g->dtype != leaf->dtype || g->device.type != leaf->device.type ||
        g->device.index != leaf->device.index || g->ndim != leaf->ndim || g->offset != 0)
        return false;
    if (g->ndim > 0 && memcmp(g->shape, leaf->shape, sizeof(g->shape[0]) * (size_t)g->ndim) != 0)
        return false;
    if (!dt_tensor_is_contiguous(g) ||
        g->storage->nbytes != (size_t)dt_tensor_numel(g) * dt_dtype_size(g->dtype))
        return false;
    return atomic_load(&g->refcount) == held && atomic_load(&g->storage->refcount) == 1;
}

dt_status dt__ag_accumulate_leaf(dt_tensor *leaf, dt_tensor *g, int held)
{
    const dt_kernel_ops *k = NULL;
    dt_tensor *ng = NULL;
    dt_status s;
    if (leaf->grad == NULL && can_steal(leaf, g, held)) {
        DT_CHECK(dt__tensor_make_view(g, leaf->ndim, leaf->shape, g->strides, 0, &ng));
        dt__storage_set_category(ng->storage, DT_MEM_GRADIENT);
        leaf->grad = ng;
        return DT_OK;
    }
    DT_CHECK(dt__kt_kernels("dt_backward", g->device, DT_KOP_BINARY, &k));
    if (leaf->grad != NULL && dt_tensor_is_contiguous(leaf->grad) &&
        leaf->grad->dtype == DT_DTYPE_F32) {
        /* in place (others may hold views of .grad), but never with aliased
         * kernel operands: sum into a temporary, copy back */
        DT_CHECK(dt__kt_binary_raw(DT_BINARY_ADD, leaf->grad, g, &ng));
        s = k->copy(leaf->grad, ng);
        dt_tensor_release(ng);
        return s;
    }
    DT_CHECK(
        dt__kt_empty_as(leaf->ndim, leaf->shape, leaf->dtype, leaf->device, DT_MEM_GRADIENT, &ng));
    if (leaf->grad == NULL)
        DT_CHECK_GOTO(k->copy(ng, g), s, err_release);
    else
        DT_CHECK_GOTO(k->binary(DT_BINARY_ADD, leaf->grad, g, ng), s, err_release);
    dt_tensor_release(leaf->grad);
    leaf->grad = ng;
    return DT_OK;
err_release:
    dt_tensor_release(ng);
    return s;
}
