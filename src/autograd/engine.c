/*
 * dt_backward: reverse-mode traversal of the tape. Nodes run in a topological
 * order (Kahn's algorithm over dependency counts), so a node runs once all
 * the gradients of its outputs were summed. Each node's saved tensors and
 * edges are dropped right after its backward, which frees activations as early
 * as possible and marks the graph consumed.
 */
#include <stdlib.h>
#include <string.h>

#include "autograd/callbacks.h"
#include "autograd/dist_hooks.h"
#include "autograd/grad_hooks.h"
#include "autograd/leaf_grad.h"
#include "autograd/node.h"
#include "autograd/out_hooks.h"
#include "core/log.h"
#include "dtensor/autograd.h"
#include "kernels/kernel_tensor.h"

typedef struct node_list {
    dt_ag_node **v;
    int n, cap;
} node_list;

static dt_status list_push(node_list *l, dt_ag_node *node)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        dt_ag_node **v = realloc(l->v, sizeof(*v) * (size_t)cap);
        if (v == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "dt_backward: cannot grow a list to %d nodes", cap);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = node;
    return DT_OK;
}

/* Every node reachable from root (each retained once in `all`), with deps =
 * the number of edges into it from reachable nodes; and the edges into each
 * leaf with post-accumulate-grad hooks (@p hooked). */
static dt_status collect(dt_ag_node *root, node_list *all, dt__ag_hooked *hooked)
{
    node_list stack = {0};
    dt_status s = DT_OK;
    root->visited = true;
    DT_CHECK_GOTO(list_push(all, dt__ag_node_retain(root)), s, out);
    DT_CHECK_GOTO(list_push(&stack, root), s, out);
    while (stack.n > 0) {
        dt_ag_node *node = stack.v[--stack.n];
        if (node->consumed) {
            s = DT_ERR(DT_ERR_INVALID_ARG,
                       "dt_backward: the graph through '%s' was already consumed by an earlier "
                       "backward (each graph can be backpropagated once)",
                       node->name);
            goto out;
        }
        for (int i = 0; i < node->n_inputs; i++) {
            dt_ag_node *child = node->inputs[i].node;
            if (child == NULL) {
                DT_CHECK_GOTO(dt__ag_hooked_count(hooked, node->inputs[i].leaf), s, out);
                continue;
            }
            if (child->grads != NULL) { /* scratch of a pass in progress */
                s = DT_ERR(DT_ERR_INVALID_ARG,
                           "dt_backward: the graph reaches '%s', part of a backward pass in "
                           "progress (a nested backward must stay in its own graph)",
                           child->name);
                goto out;
            }
            child->deps++;
            if (child->visited)
                continue;
            child->visited = true;
            DT_CHECK_GOTO(list_push(all, dt__ag_node_retain(child)), s, out);
            DT_CHECK_GOTO(list_push(&stack, child), s, out);
        }
    }
out:
    free(stack.v);
    return s;
}

/* The placement layer's hooks, for gradients in flight that are distributed
 * (dist_hooks.h). */
static dt_status grad_hooks(const dt_ag_dist_hooks **tab)
{
    *tab = dt__ag_dist_hooks();
    if (*tab == NULL || (*tab)->grad_add == NULL || (*tab)->grad_materialize == NULL)
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "dt_backward: a distributed gradient and no rules to accumulate it");
    return DT_OK;
}

/* @p g brought to its tensor's local layout (a new reference). */
static dt_status materialize(dt_tensor *g, dt_tensor **out)
{
    const dt_ag_dist_hooks *tab = NULL;
    if (g->dist == NULL) {
        *out = dt_tensor_retain(g);
        return DT_OK;
    }
    DT_CHECK(grad_hooks(&tab));
    return tab->grad_materialize(g, out);
}

/* sum += g, where *sum may be NULL (then it takes g's reference). */
static dt_status accumulate(dt_tensor **sum, dt_tensor *g)
{
    dt_tensor *r = NULL;
    if (*sum == NULL) {
        *sum = dt_tensor_retain(g);
        return DT_OK;
    }
    if ((*sum)->dist != NULL || g->dist != NULL) { /* a pending Partial: add without reducing */
        const dt_ag_dist_hooks *tab = NULL;
        DT_CHECK(grad_hooks(&tab));
        DT_CHECK(tab->grad_add(*sum, g, &r));
        dt_tensor_release(*sum);
        *sum = r;
        return DT_OK;
    }
    DT_CHECK(dt__kt_binary_raw(DT_BINARY_ADD, *sum, g, &r));
    dt_tensor_release(*sum);
    *sum = r;
    return DT_OK;
}

/*
 * Distributed gradients of leaves stay pending until the walk ends: each
 * leaf's contributions are summed without communicating, then reduced once
 * (in first-seen order, the same on every rank).
 */
typedef struct leaf_pending {
    int n, cap;
    dt_tensor **leaf;      /* owned (the graph drops its edges as it goes) */
    dt_tensor **g;         /* owned */
    dt__ag_hooked *hooked; /* the hooked leaves: their hooks run when complete */
    /* hooked leaves whose last edge the running node delivered (owned): their
     * hooks run once that node released what it saved */
    int n_done, cap_done;
    dt_tensor **done;
    /* dt__ag_grad: these leaves' gradients are summed here, as they arrive
     * (a distributed one stays pending), instead of into their .grad */
    int n_cap;
    dt_tensor *const *cap_leaf;
    dt_tensor **cap_g;
} leaf_pending;

static dt_status pending_add(leaf_pending *p, dt_tensor *leaf, dt_tensor *g)
{
    for (int i = 0; i < p->n; i++)
        if (p->leaf[i] == leaf)
            return accumulate(&p->g[i], g);
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 8;
        dt_tensor **l = realloc(p->leaf, sizeof(*l) * (size_t)cap);
        if (l == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "dt_backward: %d pending leaf gradients", cap);
        p->leaf = l;
        dt_tensor **gg = realloc(p->g, sizeof(*gg) * (size_t)cap);
        if (gg == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "dt_backward: %d pending leaf gradients", cap);
        p->g = gg;
        p->cap = cap;
    }
    p->leaf[p->n] = dt_tensor_retain(leaf);
    p->g[p->n++] = dt_tensor_retain(g);
    return DT_OK;
}

/* Reduce and add every pending leaf gradient; frees the list. */
static dt_status pending_flush(leaf_pending *p, bool apply)
{
    dt_status s = DT_OK;
    for (int i = 0; i < p->n; i++) {
        dt_tensor *m = NULL;
        if (apply && s == DT_OK) {
            s = materialize(p->g[i], &m);
            if (s == DT_OK)
                s = dt__ag_accumulate_leaf(p->leaf[i], m, 1); /* m: ours alone */
            dt_tensor_release(m);
        }
        dt_tensor_release(p->g[i]);
        dt_tensor_release(p->leaf[i]);
    }
    free(p->leaf);
    free(p->g);
    dt__kt_release_all(p->n_done, p->done);
    free(p->done);
    dt__ag_hooked *hooked = p->hooked;
    memset(p, 0, sizeof(*p));
    p->hooked = hooked;
    return s;
}

/*
 * Hooked @p leaf's gradient is complete: what was kept pending (a distributed
 * one) is reduced and added now, not at the end of the pass, so its hooks - a
 * data-parallel reduction - can start while backward goes on. Every rank
 * reaches this point in the same order (the walk is the same).
 */
static dt_status pending_flush_leaf(leaf_pending *p, dt_tensor *leaf)
{
    for (int i = 0; i < p->n; i++) {
        if (p->leaf[i] != leaf)
            continue;
        dt_tensor *g = p->g[i], *m = NULL;
        p->n--;
        memmove(p->leaf + i, p->leaf + i + 1, sizeof(*p->leaf) * (size_t)(p->n - i));
        memmove(p->g + i, p->g + i + 1, sizeof(*p->g) * (size_t)(p->n - i));
        dt_status s = materialize(g, &m);
        if (s == DT_OK)
            s = dt__ag_accumulate_leaf(leaf, m, 1); /* m: ours alone */
        dt_tensor_release(m);
        dt_tensor_release(g);
        dt_tensor_release(leaf); /* the pending list's; the caller holds one */
        return s;
    }
    return DT_OK;
}

/* leaf.grad += g, or kept pending when g is distributed; @p held as in
 * dt__ag_accumulate_leaf. */
static dt_status accumulate_leaf(dt_tensor *leaf, dt_tensor *g, int held, leaf_pending *p)
{
    if (g->dist == NULL)
        return dt__ag_accumulate_leaf(leaf, g, held);
    return pending_add(p, leaf, g);
}

static bool same_shape(const dt_tensor *t, const dt_ag_meta *m)
{
    return t->ndim == m->ndim &&
           memcmp(t->shape, m->shape, sizeof(m->shape[0]) * (size_t)m->ndim) == 0;
}

/* Which captured leaf @p leaf is (dt__ag_grad), or -1. */
static int captured(const leaf_pending *p, const dt_tensor *leaf)
{
    for (int i = 0; leaf != NULL && i < p->n_cap; i++)
        if (p->cap_leaf[i] == leaf)
            return i;
    return -1;
}

/* Route gradient g of input i of node to its producer or leaf; the caller
 * holds one reference to g. */
static dt_status route(dt_ag_node *node, int i, dt_tensor *g, leaf_pending *p)
{
    dt_ag_edge *e = &node->inputs[i];
    dt_tensor *r = NULL;
    dt_status s = DT_OK;
    if (g->dist != NULL) { /* a shard of the input's own shape, kept pending */
        if (!same_shape(g->local, &e->meta))
            return DT_ERR(DT_ERR_INTERNAL,
                          "dt_backward: '%s' gave a distributed gradient of "
                          "the wrong shard shape for input %d",
                          node->name, i);
        r = dt_tensor_retain(g);
    } else if (same_shape(g, &e->meta))
        r = dt_tensor_retain(g);
    else
        DT_CHECK(dt__kt_reduce_to_shape(g, e->meta.ndim, e->meta.shape, &r));
    int c = e->node == NULL ? captured(p, e->leaf) : -1;
    if (c >= 0) {
        s = accumulate(&p->cap_g[c], r);
        dt_tensor_release(r);
        return s;
    }
    if (e->node != NULL)
        s = accumulate(&e->node->grads[e->output], r);
    else if (e->leaf != NULL)
        s = accumulate_leaf(e->leaf, r, r == g ? 2 : 1, p);
    dt_tensor_release(r);
    if (s != DT_OK || e->node != NULL || e->leaf == NULL ||
        !dt__ag_hooked_arrived(p->hooked, e->leaf))
        return s;
    if (p->n_done == p->cap_done) { /* its gradient is complete: hooks after the node */
        int cap = p->cap_done ? 2 * p->cap_done : 8;
        dt_tensor **v = realloc(p->done, sizeof(*v) * (size_t)cap);
        if (v == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "dt_backward: %d completed leaves", cap);
        p->done = v;
        p->cap_done = cap;
    }
    p->done[p->n_done++] = dt_tensor_retain(e->leaf);
    return DT_OK;
}

/*
 * The hooked leaves the node that just ran completed, in the order their
 * last edges delivered: a distributed gradient reduced and added, then the
 * hooks - after the node dropped its saved tensors, as PyTorch's
 * AccumulateGrad runs after its producer, so what a hook allocates (a
 * reduction buffer) does not add to those.
 */
static dt_status run_done_hooks(leaf_pending *p)
{
    dt_status s = DT_OK;
    for (int i = 0; i < p->n_done; i++) {
        if (s == DT_OK)
            s = pending_flush_leaf(p, p->done[i]);
        if (s == DT_OK)
            s = dt__ag_run_grad_hooks(p->done[i]);
        dt_tensor_release(p->done[i]);
    }
    p->n_done = 0;
    return s;
}

/* Run one node: complete and materialise its output grads, call backward, route. */
static dt_status run_node(dt_ag_node *node, leaf_pending *p)
{
    dt_tensor *gx_stack[8] = {0};
    dt_tensor **gx = gx_stack;
    dt_status s = DT_OK;
    bool any = false;
    uint64_t had = 0; /* the outputs a gradient reached (their hooks run) */
    for (int o = 0; o < node->n_outputs; o++) {
        any = any || node->grads[o] != NULL;
        if (node->grads[o] != NULL && o < 64)
            had |= (uint64_t)1 << o;
    }
    if (!any || node->backward == NULL)
        return DT_OK; /* nothing flows through: skip the work */
    for (int o = 0; o < node->n_outputs; o++) {
        dt_tensor *g = node->grads[o], *c = NULL;
        dt_ag_meta *m = &node->outputs[o];
        if (g == NULL) {
            DT_CHECK(dt__kt_zeros(m->ndim, m->shape, m->device, &c));
        } else if (g->dist != NULL && node->accepts_dist_grad) {
            continue;                 /* the node reduces it itself, as it likes */
        } else if (g->dist != NULL) { /* reduce a pending Partial now (collective) */
            dt_tensor *l = NULL;
            DT_CHECK(materialize(g, &l));
            s = dt__kt_contiguous(l, &c);
            dt_tensor_release(l);
            DT_CHECK(s);
        } else {
            DT_CHECK(dt__kt_contiguous(g, &c));
        }
        dt_tensor_release(g);
        node->grads[o] = c;
    }
    if (node->n_inputs > 8) {
        gx = calloc((size_t)node->n_inputs, sizeof(*gx));
        if (gx == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "dt_backward: %d input grads", node->n_inputs);
    }
    DT_CHECK_GOTO(dt__ag_run_out_hooks(node, had), s, out);
    DT_CHECK_GOTO(node->backward(node, node->grads, gx), s, out);
    for (int i = 0; i < node->n_inputs; i++) {
        if (gx[i] != NULL && dt__ag_input_needs_grad(node, i))
            DT_CHECK_GOTO(route(node, i, gx[i], p), s, out);
    }
out:
    dt__kt_release_all(node->n_inputs, gx);
    if (gx != gx_stack)
        free(gx);
    return s;
}

static dt_status check_root_grad(dt_tensor *root, dt_tensor *grad, dt_tensor **out)
{
    char sr[96], sg[96];
    if (grad == NULL) {
        if (dt_tensor_numel(root) != 1)
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_backward: root of shape %s has %lld elements; pass a gradient "
                          "for a non-scalar root",
                          dt__shape_str(root->ndim, root->shape, sr, sizeof(sr)),
                          (long long)dt_tensor_numel(root));
        DT_CHECK(dt__kt_empty(root->ndim, root->shape, root->device, out));
        return dt_tensor_fill(*out, 1.0);
    }
    DT_CHECK(dt__kt_check_f32("dt_backward", "grad", grad));
    DT_CHECK(dt__kt_reject_distributed("dt_backward", 1, &grad));
    if (grad->ndim != root->ndim ||
        memcmp(grad->shape, root->shape, sizeof(root->shape[0]) * (size_t)root->ndim) != 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_backward: grad shape %s differs from root shape %s",
                      dt__shape_str(grad->ndim, grad->shape, sg, sizeof(sg)),
                      dt__shape_str(root->ndim, root->shape, sr, sizeof(sr)));
    *out = dt_tensor_retain(grad);
    return DT_OK;
}

static dt_status run_all(node_list *all, dt_ag_node *root_node, int root_output, dt_tensor *g,
                         leaf_pending *pend)
{
    node_list ready = {0};
    leaf_pending pending = *pend;
    dt__ag_hooked *hooked = pend->hooked;
    dt_status s = DT_OK;
    for (int i = 0; i < all->n; i++) {
        dt_ag_node *node = all->v[i];
        node->grads =
            calloc((size_t)(node->n_outputs > 0 ? node->n_outputs : 1), sizeof(*node->grads));
        if (node->grads == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "dt_backward: grads of '%s'", node->name);
    }
    root_node->grads[root_output] = dt_tensor_retain(g);
    DT_CHECK_GOTO(list_push(&ready, root_node), s, out);
    while (ready.n > 0) {
        dt_ag_node *node = ready.v[--ready.n];
        DT_CHECK_GOTO(run_node(node, &pending), s, out);
        dt__kt_release_all(node->n_outputs, node->grads);
        for (int i = 0; i < node->n_inputs; i++) {
            dt_ag_node *child = node->inputs[i].node;
            if (child != NULL && --child->deps == 0)
                DT_CHECK_GOTO(list_push(&ready, child), s, out);
        }
        dt__ag_node_free_graph(node); /* saved activations go now */
        DT_CHECK_GOTO(run_done_hooks(&pending), s, out);
    }
    s = pending_flush(&pending, true);
    if (s == DT_OK) /* distributed leaf gradients are complete now, and the rest */
        s = dt__ag_hooked_finish(hooked);
out:
    if (s != DT_OK)
        pending_flush(&pending, false);
    free(ready.v);
    return s;
}

/*
 * Autograd runs on local shards (placement.h): a distributed root is replaced
 * by its shard, and a distributed seed by its shard. The seed of a one-element
 * distributed root is 1 on every rank holding the element (Replicate and
 * Partial read as Replicate: each rank's shard gradient is the full one).
 */
static dt_status local_root(dt_tensor **root, dt_tensor **grad)
{
    dt_tensor *r = *root, *g = *grad;
    if (g != NULL && g->dist != NULL) {
        if (r->dist == NULL)
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_backward: grad is distributed but root is a local tensor");
        g = g->local;
    }
    if (r->dist == NULL) {
        *grad = g;
        return DT_OK;
    }
    if (g == NULL && dt_tensor_numel(r) != 1) {
        char sr[96];
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_backward: distributed root of global shape %s is not a scalar; pass "
                      "a gradient",
                      dt__shape_str(r->ndim, r->shape, sr, sizeof(sr)));
    }
    *root = r->local;
    *grad = g;
    return DT_OK;
}

/* Collect and run the graph under @p root (a node), seeded with @p g on its
 * output @p out; @p pend says where captured leaves' gradients go. */
static dt_status walk(dt_ag_node *root, int out, dt_tensor *g, leaf_pending *pend)
{
    node_list all = {0};
    dt__ag_hooked hooked = {0};
    dt_status s = DT_OK;
    pend->hooked = &hooked;
    DT_CHECK_GOTO(collect(root, &all, &hooked), s, out);
    if (root->deps != 0) {
        s = DT_ERR(DT_ERR_INTERNAL, "dt_backward: the graph has a cycle through '%s'", root->name);
        goto out;
    }
    DT_LOG_DEBUG("autograd", "backward from '%s' over %d nodes", root->name, all.n);
    s = run_all(&all, root, out, g, pend);
out:
    free(hooked.v); /* after an error (finish freed it otherwise): the hooks do not run */
    for (int i = 0; i < all.n; i++) {
        dt_ag_node *node = all.v[i];
        if (node->grads != NULL)
            dt__kt_release_all(node->n_outputs, node->grads);
        free(node->grads);
        node->grads = NULL;
        node->deps = 0;
        node->visited = false;
        dt__ag_node_release(node);
    }
    free(all.v);
    return s;
}

dt_status dt_backward(dt_tensor *root, dt_tensor *grad)
{
    dt_tensor *g = NULL;
    dt_status s = DT_OK;
    DT_ARG_NOT_NULL(root);
    DT_CHECK(local_root(&root, &grad));
    if (!dt_tensor_requires_grad(root))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_backward: root does not require grad (no input of its graph requires "
                      "grad, or it was computed with grad mode off)");
    DT_CHECK(check_root_grad(root, grad, &g));
    dt__ag_pass pass = {0};
    dt__ag_pass_begin(&pass);
    if (root->grad_fn == NULL) { /* a leaf: its gradient is the seed itself */
        s = dt__ag_accumulate_leaf(root, g, grad == NULL ? 1 : 0); /* never the user's */
        if (s == DT_OK)
            s = dt__ag_run_grad_hooks(root);
    } else {
        leaf_pending pend = {0};
        s = walk(root->grad_fn, root->grad_fn_output, g, &pend);
    }
    dt_tensor_release(g);
    dt_status c = dt__ag_pass_end(&pass, s == DT_OK); /* the callbacks queued */
    return s == DT_OK ? c : s;
}

dt_status dt__ag_grad(dt_tensor *root, dt_tensor *grad, int n, dt_tensor *const *leaves,
                      dt_tensor **grads)
{
    for (int i = 0; i < n; i++)
        grads[i] = NULL;
    if (root->grad_fn == NULL) { /* the root is a leaf: its gradient is the seed */
        for (int i = 0; i < n; i++)
            if (leaves[i] == root) {
                grads[i] = dt_tensor_retain(grad);
                return DT_OK;
            }
        return DT_ERR(DT_ERR_INTERNAL, "dt__ag_grad: the root is a leaf not asked for");
    }
    leaf_pending pend = {.n_cap = n, .cap_leaf = leaves, .cap_g = grads};
    dt__ag_pass pass = {0}; /* callbacks queued inside it are this nested pass's */
    dt__ag_pass_begin(&pass);
    dt_status s = walk(root->grad_fn, root->grad_fn_output, grad, &pend);
    dt_status c = dt__ag_pass_end(&pass, s == DT_OK);
    if (s == DT_OK)
        s = c;
    if (s != DT_OK)
        dt__kt_release_all(n, grads);
    return s;
}
