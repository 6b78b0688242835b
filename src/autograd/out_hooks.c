/*
 * Gradient hooks on op outputs (PyTorch's Tensor.register_hook on a
 * non-leaf): the hook lives on the node that produced the tensor, so it runs
 * even when the tensor's handle was released after the forward, and goes with
 * the graph.
 */
#include <stdlib.h>

#include "autograd/out_hooks.h"
#include "core/error.h"
#include "dtensor/autograd.h"

dt_status dt_tensor_register_hook(dt_tensor *t, dt_tensor_hook_fn fn, void *user,
                                  void (*free_user)(void *user))
{
    const char *fn_name = "dt_tensor_register_hook";
    DT_ARG_NOT_NULL(t);
    DT_ARG_NOT_NULL(fn);
    if (t->dist != NULL) /* autograd runs on the shard */
        t = t->local;
    if (t->grad_fn == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: the tensor is %s (use dt_tensor_register_post_accumulate_grad_hook "
                      "on a leaf)",
                      fn_name, t->requires_grad ? "a leaf" : "not part of a graph");
    dt_ag_node *node = t->grad_fn;
    if (node->consumed)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: the graph through '%s' was already consumed by a backward pass", fn_name,
                      node->name);
    dt__ag_out_hook *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory", fn_name);
    *h = (dt__ag_out_hook){
        .output = t->grad_fn_output, .fn = fn, .user = user, .free_user = free_user};
    dt__ag_out_hook **end = &node->out_hooks;
    while (*end != NULL)
        end = &(*end)->next;
    *end = h;
    return DT_OK;
}

dt_status dt__ag_run_out_hooks(dt_ag_node *node, uint64_t had)
{
    for (dt__ag_out_hook *h = node->out_hooks; h != NULL; h = h->next) {
        if (h->output < 64 && !(had >> h->output & 1u))
            continue;
        DT_CHECK(h->fn(node->grads[h->output], h->user));
    }
    return DT_OK;
}

void dt__ag_free_out_hooks(dt_ag_node *node)
{
    dt__ag_out_hook *h = node->out_hooks;
    node->out_hooks = NULL;
    while (h != NULL) {
        dt__ag_out_hook *next = h->next;
        if (h->free_user != NULL)
            h->free_user(h->user);
        free(h);
        h = next;
    }
}
