/* Autograd nodes: creation, saved tensors, attachment to outputs, refcounts. */
#include <stdlib.h>
#include <string.h>

#include "autograd/node.h"
#include "autograd/out_hooks.h"
#include "core/error.h"
#include "dtensor/autograd.h"
#include "kernels/kernel_tensor.h"

static void node_release_hook(void *self)
{
    dt__ag_node_release((dt_ag_node *)self);
}

/* The shape/dtype/device record of @p t that a gradient must match. */
static void meta_of(const dt_tensor *t, dt_ag_meta *m)
{
    m->ndim = t->ndim;
    memcpy(m->shape, t->shape, sizeof(m->shape[0]) * (size_t)t->ndim);
    m->dtype = t->dtype;
    m->device = t->device;
}

bool dt__ag_should_record(int n, dt_tensor *const *inputs)
{
    if (!dt_grad_is_enabled())
        return false;
    for (int i = 0; i < n; i++) {
        if (inputs[i] != NULL && dt_tensor_requires_grad(inputs[i]))
            return true;
    }
    return false;
}

dt_status dt__ag_node_create(const char *name, dt_ag_backward_fn backward, int n_inputs,
                             dt_tensor *const *inputs, dt_ag_node **out)
{
    dt_ag_node *node = calloc(1, sizeof(*node));
    if (node == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: cannot allocate an autograd node", name);
    node->inputs = calloc((size_t)(n_inputs > 0 ? n_inputs : 1), sizeof(*node->inputs));
    if (node->inputs == NULL) {
        free(node);
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: cannot allocate %d autograd edges", name, n_inputs);
    }
    node->base.release = node_release_hook;
    atomic_init(&node->refcount, 1);
    node->name = name;
    node->backward = backward;
    node->n_inputs = n_inputs;
    for (int i = 0; i < n_inputs; i++) {
        dt_tensor *t = inputs[i];
        dt_ag_edge *e = &node->inputs[i];
        if (t == NULL)
            continue;
        meta_of(t, &e->meta);
        if (t->grad_fn != NULL) {
            e->node = dt__ag_node_retain(t->grad_fn);
            e->output = t->grad_fn_output;
        } else if (t->requires_grad) {
            e->leaf = dt_tensor_retain(t);
        }
    }
    *out = node;
    return DT_OK;
}

dt_status dt__ag_save(dt_ag_node *node, dt_tensor *t)
{
    dt_tensor *alias = NULL;
    if (node->n_saved >= DT_AG_MAX_SAVED)
        return DT_ERR(DT_ERR_INTERNAL, "%s: more than %d saved tensors", node->name,
                      DT_AG_MAX_SAVED);
    if (t != NULL)
        DT_CHECK(dt__kt_alias(t, &alias));
    node->saved[node->n_saved++] = alias;
    return DT_OK;
}

dt_status dt__ag_attach(dt_ag_node *node, int n_outputs, dt_tensor *const *outputs)
{
    node->outputs = calloc((size_t)(n_outputs > 0 ? n_outputs : 1), sizeof(*node->outputs));
    if (node->outputs == NULL) {
        dt__ag_node_release(node);
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: cannot allocate output metadata", node->name);
    }
    node->n_outputs = n_outputs;
    for (int i = 0; i < n_outputs; i++) {
        dt_tensor *y = outputs[i];
        meta_of(y, &node->outputs[i]);
        if (y->grad_fn != NULL)
            dt__ag_node_release(y->grad_fn);
        y->grad_fn = dt__ag_node_retain(node);
        y->grad_fn_output = i;
        y->requires_grad = true;
    }
    dt__ag_node_release(node); /* the outputs own it now */
    return DT_OK;
}

bool dt__ag_input_needs_grad(const dt_ag_node *node, int i)
{
    return i >= 0 && i < node->n_inputs &&
           (node->inputs[i].node != NULL || node->inputs[i].leaf != NULL);
}

dt_ag_node *dt__ag_node_retain(dt_ag_node *node)
{
    if (node != NULL)
        atomic_fetch_add(&node->refcount, 1);
    return node;
}

/* Drop saved tensors and leaf edges; producer nodes go to @p todo when their
 * last reference drops (NULL todo: release them normally). */
static void drop_graph(dt_ag_node *node, dt_ag_node **todo)
{
    if (node->drop_extra != NULL && node->extra != NULL)
        node->drop_extra(node->extra);
    node->drop_extra = NULL;
    dt__ag_free_out_hooks(node);
    for (int i = 0; i < node->n_saved; i++) {
        dt_tensor_release(node->saved[i]);
        node->saved[i] = NULL;
    }
    for (int i = 0; i < node->n_inputs; i++) {
        dt_ag_edge *e = &node->inputs[i];
        dt_ag_node *child = e->node;
        dt_tensor *leaf = e->leaf;
        e->node = NULL;
        e->leaf = NULL;
        dt_tensor_release(leaf);
        if (child == NULL)
            continue;
        if (todo == NULL) {
            dt__ag_node_release(child);
        } else if (atomic_fetch_sub(&child->refcount, 1) == 1) {
            child->next_free = *todo;
            *todo = child;
        }
    }
    node->consumed = true;
}

void dt__ag_node_free_graph(dt_ag_node *node)
{
    drop_graph(node, NULL);
}

/* Iterative, so dropping a long chain of nodes cannot overflow the stack. */
void dt__ag_node_release(dt_ag_node *node)
{
    if (node == NULL || atomic_fetch_sub(&node->refcount, 1) != 1)
        return;
    node->next_free = NULL;
    dt_ag_node *todo = node;
    while (todo != NULL) {
        dt_ag_node *n = todo;
        todo = n->next_free;
        drop_graph(n, &todo);
        free(n->inputs);
        free(n->outputs);
        free(n->extra);
        free(n);
    }
}
