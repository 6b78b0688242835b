/* dt_module_to: every parameter and gradient of a subtree onto one device, all or nothing. */
#include <stdio.h>
#include <stdlib.h>

#include "dtensor/autograd.h"

#include "core/error.h"
#include "core/tensor_impl.h"
#include "kernels/kernel_ops.h"
#include "nn/module_impl.h"

typedef struct move_list {
    dt_device device;
    dt_tensor **targets; /* parameters and gradients to move */
    dt_tensor **moved;   /* their copies on the device */
    int n, cap;
} move_list;

static dt_status add_move(move_list *l, dt_tensor *t, const char *fqn)
{
    dt_device now = dt_tensor_device(t);
    if (now.type == l->device.type && now.index == l->device.index)
        return DT_OK;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        dt_tensor **a = realloc(l->targets, (size_t)cap * sizeof(*a));
        if (a != NULL)
            l->targets = a;
        dt_tensor **b = a != NULL ? realloc(l->moved, (size_t)cap * sizeof(*b)) : NULL;
        if (b == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "dt_module_to: no memory to list %d tensors", cap);
        l->moved = b;
        l->cap = cap;
    }
    dt_status st = dt__tensor_move_prepare(t, l->device, &l->moved[l->n]);
    if (st != DT_OK) {
        char why[256];
        snprintf(why, sizeof(why), "%s", dt_last_error());
        return DT_ERR(st, "dt_module_to: moving '%s' to %s:%d: %s", fqn,
                      dt_device_type_name(l->device.type), l->device.index, why);
    }
    l->targets[l->n++] = t;
    return DT_OK;
}

static dt_status collect(const char *fqn, dt_module *owner, const char *name, dt_tensor *param,
                         void *user)
{
    (void)owner;
    (void)name;
    move_list *l = user;
    if (dt__tensor_is_deferred(param))
        return DT_OK; /* no data: set_deferred_device changes its device afterwards */
    DT_CHECK(add_move(l, param, fqn));
    dt_tensor *g = dt_tensor_grad(param);
    return g != NULL ? add_move(l, g, fqn) : DT_OK;
}

static dt_status set_deferred_device(const char *fqn, dt_module *owner, const char *name,
                                     dt_tensor *param, void *user)
{
    (void)fqn, (void)owner, (void)name;
    if (dt__tensor_is_deferred(param)) {
        param->device = *(const dt_device *)user;
        if (param->dist != NULL)
            param->local->device = param->device;
    }
    return DT_OK;
}

dt_status dt_module_to(dt_module *root, dt_device device)
{
    DT_ARG_NOT_NULL(root);
    if (dt__kernels_for(device) == NULL)
        return DT_ERR(DT_ERR_UNSUPPORTED, "dt_module_to: device %s:%d is not built in",
                      dt_device_type_name(device.type), device.index);
    move_list l = {.device = device};
    dt_status st = dt_module_foreach_param(root, collect, &l);
    for (int i = 0; i < l.n; i++) {
        if (st == DT_OK)
            dt__tensor_move_commit(l.targets[i], l.moved[i]);
        else
            dt_tensor_release(l.moved[i]); /* nothing changes */
    }
    free(l.targets);
    free(l.moved);
    if (st == DT_OK)
        st = dt_module_foreach_param(root, set_deferred_device, &device);
    return st;
}
