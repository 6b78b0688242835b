/* Sequential: runs its children in registration order, each on the previous output. */
#include <stdio.h>

#include "core/error.h"
#include "nn/module_impl.h"
#include "nn/nn_internal.h"

static dt_status sequential_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    DT_CHECK(dt__module_check_inputs(m, n_in, in, 1));
    dt_tensor *x = dt_tensor_retain(in[0]);
    for (int i = 0; i < m->n_children; i++) {
        dt_tensor *y = NULL;
        dt_status status = dt_module_forward(m->children[i], 1, &x, &y);
        dt_tensor_release(x);
        DT_CHECK(status);
        x = y;
    }
    *out = x;
    return DT_OK;
}

const dt_module_ops dt__sequential_ops = {.type_name = "Sequential", .forward = sequential_forward};

dt_status dt_sequential_create(dt_module **out)
{
    DT_ARG_NOT_NULL(out);
    return dt_module_create(&dt__sequential_ops, NULL, out);
}

dt_status dt_sequential_append(dt_module *seq, dt_module *child)
{
    DT_ARG_NOT_NULL(seq);
    DT_ARG_NOT_NULL(child);
    if (seq->ops != &dt__sequential_ops)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_sequential_append: '%s' is a %s, not a Sequential",
                      seq->name, seq->ops->type_name);
    char name[24];
    snprintf(name, sizeof(name), "%d", seq->n_children);
    return dt_module_add_child(seq, name, child);
}
