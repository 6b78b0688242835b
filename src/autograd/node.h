/*
 * The autograd tape: nodes recorded by differentiable ops (src/ops/, and the
 * placement layer's redistribute) and walked by dt_backward (engine.c).
 *
 * A node is refcounted and starts with a dt_refobj, so core can drop a
 * tensor's grad_fn without knowing this type. It holds one edge per input
 * (to the node that produced it, or to the leaf tensor that accumulates its
 * gradient), the metadata of its outputs, the tensors its backward needs
 * (saved as detached handles: an output saved by its own node would otherwise
 * form a reference cycle) and a few op-specific scalars.
 *
 * Recording an op:
 *     if (dt__ag_should_record(n_in, inputs)) {
 *         DT_CHECK(dt__ag_node_create("mul", mul_backward, n_in, inputs, &node));
 *         DT_CHECK_GOTO(dt__ag_save(node, a), s, err);   // saved[0]
 *         dt__ag_attach(node, n_out, outputs);             // consumes the creation ref
 *     }
 * The backward function receives contiguous output gradients gy[n_outputs]
 * (zeros for outputs that received none) and writes new references into
 * gx[i] for the inputs with dt__ag_input_needs_grad(node, i); gx[i] may have
 * the broadcast shape of the forward computation: the engine sums it down to
 * the input's shape.
 */
#ifndef DT_AUTOGRAD_NODE_H
#define DT_AUTOGRAD_NODE_H

#include <stdatomic.h>

#include "core/tensor_impl.h"

#define DT_AG_MAX_SAVED 6

typedef struct dt_autograd_node dt_ag_node;

typedef dt_status (*dt_ag_backward_fn)(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx);

/* Shape, dtype and device of a tensor, kept without holding its data. */
typedef struct dt_ag_meta {
    int ndim;
    int64_t shape[DT_MAX_DIMS];
    dt_dtype dtype;
    dt_device device;
} dt_ag_meta;

typedef struct dt_ag_edge {
    dt_ag_node *node; /* producer of this input (owned ref), or NULL */
    int output;       /* which output of `node` */
    dt_tensor *leaf;  /* leaf requiring grad that accumulates (owned ref), or NULL */
    dt_ag_meta meta;  /* the input's geometry */
} dt_ag_edge;

struct dt_autograd_node {
    dt_refobj base; /* must stay first: core releases grad_fn through it */
    atomic_int refcount;
    const char *name; /* op name, for messages */
    dt_ag_backward_fn backward;
    int n_inputs;
    dt_ag_edge *inputs;
    int n_outputs;
    dt_ag_meta *outputs;
    int n_saved;
    dt_tensor *saved[DT_AG_MAX_SAVED];
    /* op-specific scalars (dims, flags, factors) and an optional heap block */
    int64_t iv[2 * DT_MAX_DIMS];
    double dv[2];
    void *extra; /* free()d with the node */
    /* Optional: releases what @p extra holds (tensors), once the node ran or
     * when it is freed, before extra itself is free()d. */
    void (*drop_extra)(void *extra);
    bool consumed; /* its backward ran (or the graph was torn down) */
    /* Its backward takes a distributed (pending Partial) output gradient as
     * it is, instead of the engine reducing it first: a redistribute can turn
     * a pending Partial into a Shard with one reduce-scatter (see
     * autograd/dist_hooks.h). Off by default. */
    bool accepts_dist_grad;
    /* gradient hooks on its outputs (dt_tensor_register_hook, out_hooks.h),
     * run just before its backward; freed once it ran */
    struct dt__ag_out_hook *out_hooks;
    /* engine scratch, valid during one dt_backward */
    int deps;
    bool visited;
    dt_tensor **grads;     /* [n_outputs] accumulated output gradients */
    dt_ag_node *next_free; /* release worklist link */
};

/* True when grad mode is on and any non-NULL input requires grad. */
bool dt__ag_should_record(int n, dt_tensor *const *inputs);

/* A node with one edge per input (NULL inputs allowed: no edge). Refcount 1. */
dt_status dt__ag_node_create(const char *name, dt_ag_backward_fn backward, int n_inputs,
                             dt_tensor *const *inputs, dt_ag_node **out);
/* Keep a detached handle on @p t's data for backward (saved[n_saved++]); NULL saves NULL. */
dt_status dt__ag_save(dt_ag_node *node, dt_tensor *t);
/* Make @p node the grad_fn of each output (marks them requires_grad) and drop
 * the creation reference. On failure the node is released. */
dt_status dt__ag_attach(dt_ag_node *node, int n_outputs, dt_tensor *const *outputs);
/* Whether input @p i leads to something that needs a gradient. */
bool dt__ag_input_needs_grad(const dt_ag_node *node, int i);

/* Reference counting; release frees the node (and, iteratively, producers
 * whose last reference it held) and accepts NULL. */
dt_ag_node *dt__ag_node_retain(dt_ag_node *node);
void dt__ag_node_release(dt_ag_node *node);
/* Drop saved tensors and edges (after backward ran): frees activations early. */
void dt__ag_node_free_graph(dt_ag_node *node);

/*
 * A backward pass inside a node's backward (activation checkpointing): run
 * the graph under @p root (a non-leaf) seeded with @p grad (its shape; may be
 * a pending distributed gradient) and return in @p grads[i] (new references,
 * NULL when none arrived) the gradients of @p leaves[i], summed as they
 * arrived - a distributed one still pending, as an edge would carry it -
 * instead of adding them into their .grad. Other leaves accumulate as in
 * dt_backward. The graph must not reach nodes of the pass in progress. A
 * root that is itself one of @p leaves gets @p grad.
 */
dt_status dt__ag_grad(dt_tensor *root, dt_tensor *grad, int n, dt_tensor *const *leaves,
                      dt_tensor **grads);

#endif
