/*
 * Activation checkpointing, the recompute (torch.utils.checkpoint, the
 * reentrant variant per module): a marked module's type forward runs with
 * grad mode off and records one "checkpoint" node instead of its graph. The
 * node's edges go to the inputs and to the tensors in the subtree's
 * parameter slots, so the rest of the graph - data parallelism's
 * per-parameter nodes, post-accumulate-grad hooks, leaf gradients - sees it
 * as one consumer of each. Its backward puts those tensors back into the
 * slots as fresh leaves, replays the random stream and autocast, re-runs the
 * forward with grad mode on, and runs a nested backward through it that
 * returns the leaves' gradients as they arrived (dt__ag_grad): the outer
 * engine then routes them exactly as it routes a plain run's.
 */
#include <stdlib.h>
#include <string.h>

#include "autograd/node.h"
#include "core/error.h"
#include "dtensor/autograd.h"
#include "dtensor/ops.h"
#include "kernels/kernel_tensor.h"
#include "nn/module_impl.h"

/* one subtree slot, as the forward saw it */
typedef struct ck_slot {
    dt_module *owner;
    int idx;
    dt_tensor *t; /* detached handle on what the slot held (shares data) */
} ck_slot;

typedef struct ck_state {
    dt_module *m;
    int n_in;
    dt_tensor *in[DT_MODULE_MAX_INPUTS]; /* detached handles on the inputs */
    int n_slots, cap_slots;
    ck_slot *slots;
    dt_rng_state rng;
    dt_dtype autocast;
} ck_state;

/* recomputes running on this thread (descendants' hooks may ask) */
static _Thread_local int g_recomputing;

bool dt__module_recomputing(void)
{
    return g_recomputing > 0;
}

static void ck_drop(void *extra)
{
    ck_state *ck = extra;
    for (int i = 0; i < ck->n_in; i++)
        dt_tensor_release(ck->in[i]);
    for (int i = 0; i < ck->n_slots; i++)
        dt_tensor_release(ck->slots[i].t);
    free(ck->slots);
    memset(ck, 0, sizeof(*ck));
}

static dt_status add_slot(ck_state *ck, dt_module *owner, int idx)
{
    if (ck->n_slots == ck->cap_slots) {
        int cap = ck->cap_slots > 0 ? 2 * ck->cap_slots : 16;
        ck_slot *v = realloc(ck->slots, (size_t)cap * sizeof(*v));
        if (v == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "activation checkpoint: %d parameter slots", cap);
        ck->slots = v;
        ck->cap_slots = cap;
    }
    ck_slot *s = &ck->slots[ck->n_slots];
    s->owner = owner;
    s->idx = idx;
    s->t = NULL;
    DT_CHECK(dt_tensor_detach(owner->params[idx].tensor, &s->t));
    ck->n_slots++;
    return DT_OK;
}

/* Every filled slot of @p m's subtree, in walk order. */
static dt_status add_slots(ck_state *ck, dt_module *m)
{
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].tensor != NULL)
            DT_CHECK(add_slot(ck, m, i));
    for (int c = 0; c < m->n_children; c++)
        DT_CHECK(add_slots(ck, m->children[c]));
    return DT_OK;
}

/* The local tensors autograd sees as the node's inputs: the module's
 * inputs, then the slots' tensors (as they are now, in the forward). */
static void edge_tensors(const ck_state *ck, dt_tensor *const *in, dt_tensor **out)
{
    for (int i = 0; i < ck->n_in; i++)
        out[i] = in[i] != NULL ? dt__local_of(in[i]) : NULL;
    for (int j = 0; j < ck->n_slots; j++)
        out[ck->n_in + j] = dt__local_of(ck->slots[j].owner->params[ck->slots[j].idx].tensor);
}

static dt_status ck_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx);

/* A fresh leaf on @p saved's data (a gradient is wanted when @p grad). */
static dt_status fresh(dt_tensor *saved, bool grad, dt_tensor **out)
{
    DT_CHECK(dt_tensor_detach(saved, out));
    if (!grad)
        return DT_OK;
    dt_status s = dt_tensor_set_requires_grad(*out, true);
    if (s != DT_OK) {
        dt_tensor_release(*out);
        *out = NULL;
    }
    return s;
}

/* Swap the slots' tensors with @p t[] (both ways: t gets what was there). */
static void swap_slots(ck_state *ck, dt_tensor **t)
{
    for (int j = 0; j < ck->n_slots; j++) {
        dt_module_slot *sl = &ck->slots[j].owner->params[ck->slots[j].idx];
        dt_tensor *old = sl->tensor;
        sl->tensor = t[j];
        t[j] = old;
    }
}

/* The forward again, grad mode on, from @p x (inputs) with @p p[] (fresh
 * leaves) in the slots, the random stream and autocast as they were. */
static dt_status recompute(ck_state *ck, dt_tensor **x, dt_tensor **p, dt_tensor **y)
{
    dt_rng_state rng = dt_rng_get_state();
    dt_dtype ac = dt_autocast_get();
    DT_CHECK(dt_autocast_set(ck->autocast, NULL));
    dt_rng_set_state(ck->rng);
    bool prev = dt_grad_set_enabled(true);
    swap_slots(ck, p);
    g_recomputing++;
    dt_status s = ck->m->ops->forward(ck->m, ck->n_in, x, y);
    g_recomputing--;
    swap_slots(ck, p); /* the slots hold what data parallelism put back */
    dt_grad_set_enabled(prev);
    dt_rng_set_state(rng);
    (void)dt_autocast_set(ac, NULL); /* was valid a moment ago */
    return s;
}

/* Whether the recomputed output @p y is shaped as the first forward's. */
static dt_status same_output(const ck_state *ck, const dt_ag_meta *m, dt_tensor *y)
{
    const dt_tensor *l = dt__local_of(y);
    if (l->ndim == m->ndim && l->dtype == m->dtype &&
        memcmp(l->shape, m->shape, sizeof(m->shape[0]) * (size_t)m->ndim) == 0)
        return DT_OK;
    return DT_ERR(DT_ERR_INVALID_ARG,
                  "activation checkpoint: %s '%s' recomputed an output of another shape or "
                  "dtype than its forward (a forward that depends on more than its inputs, "
                  "parameters and the random stream)",
                  ck->m->ops->type_name, ck->m->name);
}

/* Zeros for a parameter the recompute gave no gradient: data parallelism
 * counts one gradient per parameter its forward handed out. */
static dt_status fill_missing(dt_ag_node *node, int from, dt_tensor **gx)
{
    for (int i = from; i < node->n_inputs; i++) {
        const dt_ag_meta *m = &node->inputs[i].meta;
        if (gx[i] == NULL && dt__ag_input_needs_grad(node, i))
            DT_CHECK(dt__kt_zeros(m->ndim, m->shape, m->device, &gx[i]));
    }
    return DT_OK;
}

static dt_status ck_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    ck_state *ck = node->extra;
    int n = node->n_inputs;
    dt_tensor *x[DT_MODULE_MAX_INPUTS] = {NULL}, *y = NULL;
    dt_tensor **p = calloc((size_t)(ck->n_slots + 1), sizeof(*p));
    dt_tensor **leaves = calloc((size_t)n, sizeof(*leaves));
    dt_status s = p == NULL || leaves == NULL
                      ? DT_ERR(DT_ERR_NO_MEMORY, "activation checkpoint: %d leaves", n)
                      : DT_OK;
    for (int i = 0; s == DT_OK && i < ck->n_in; i++)
        if (ck->in[i] != NULL &&
            (s = fresh(ck->in[i], dt__ag_input_needs_grad(node, i), &x[i])) == DT_OK)
            leaves[i] = dt__ag_input_needs_grad(node, i) ? dt__local_of(x[i]) : NULL;
    for (int j = 0; s == DT_OK && j < ck->n_slots; j++) {
        bool g = dt__ag_input_needs_grad(node, ck->n_in + j);
        if ((s = fresh(ck->slots[j].t, g, &p[j])) == DT_OK)
            leaves[ck->n_in + j] = g ? dt__local_of(p[j]) : NULL;
    }
    if (s == DT_OK)
        s = recompute(ck, x, p, &y);
    if (s == DT_OK)
        s = same_output(ck, &node->outputs[0], y);
    if (s == DT_OK && dt_tensor_requires_grad(y))
        s = dt__ag_grad(dt__local_of(y), gy[0], n, leaves, gx);
    if (s == DT_OK)
        s = fill_missing(node, ck->n_in, gx);
    dt_tensor_release(y);
    dt__kt_release_all(ck->n_in, x);
    if (p != NULL)
        dt__kt_release_all(ck->n_slots, p);
    free(p);
    free(leaves);
    return s;
}

/* Record the node: @p y (no history) becomes, through a detached handle,
 * its output in *out. Takes @p ck (freed with the node). */
static dt_status ck_record(ck_state *ck, dt_tensor *const *in, dt_tensor *y, dt_tensor **out)
{
    int n = ck->n_in + ck->n_slots;
    dt_tensor **edges = calloc((size_t)n, sizeof(*edges));
    dt_ag_node *node = NULL;
    dt_tensor *o = NULL;
    dt_status s = DT_OK;
    if (edges == NULL) {
        ck_drop(ck);
        free(ck);
        return DT_ERR(DT_ERR_NO_MEMORY, "activation checkpoint: %d edges", n);
    }
    edge_tensors(ck, in, edges);
    s = dt__ag_node_create("checkpoint", ck_backward, n, edges, &node);
    free(edges);
    if (s != DT_OK) {
        ck_drop(ck);
        free(ck);
        return s;
    }
    node->extra = ck;
    node->drop_extra = ck_drop;
    node->accepts_dist_grad = true; /* handed to the recomputed graph as it came */
    s = dt_tensor_detach(y, &o);    /* y may be (a view of) an input: never attach to it */
    if (s != DT_OK) {
        dt__ag_node_release(node);
        return s;
    }
    dt_tensor *lo = dt__local_of(o);
    s = dt__ag_attach(node, 1, &lo);
    if (s != DT_OK) {
        dt_tensor_release(o);
        return s;
    }
    *out = o;
    return DT_OK;
}

/* Whether the node is worth recording: something it computes from needs a gradient. */
static bool ck_needs_grad(const ck_state *ck, dt_tensor *const *in)
{
    for (int i = 0; i < ck->n_in; i++)
        if (in[i] != NULL && dt_tensor_requires_grad(in[i]))
            return true;
    for (int j = 0; j < ck->n_slots; j++)
        if (dt_tensor_requires_grad(ck->slots[j].owner->params[ck->slots[j].idx].tensor))
            return true;
    return false;
}

dt_status dt__module_run_forward(dt_module *m, int n_in, dt_tensor **in, dt_tensor **out)
{
    if (!m->checkpoint || !dt_grad_is_enabled())
        return m->ops->forward(m, n_in, in, out);
    ck_state *ck = calloc(1, sizeof(*ck));
    if (ck == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "activation checkpoint of '%s'", m->name);
    ck->m = m;
    ck->rng = dt_rng_get_state();
    ck->autocast = dt_autocast_get();
    dt_status s = add_slots(ck, m);
    for (int i = 0; s == DT_OK && i < n_in; i++, ck->n_in++)
        if (in[i] != NULL)
            s = dt_tensor_detach(in[i], &ck->in[i]);
    if (s != DT_OK || !ck_needs_grad(ck, in)) {
        ck_drop(ck);
        free(ck);
        return s != DT_OK ? s : m->ops->forward(m, n_in, in, out);
    }
    dt_tensor *y = NULL;
    bool prev = dt_grad_set_enabled(false); /* nothing of the forward is kept */
    s = m->ops->forward(m, n_in, in, &y);
    dt_grad_set_enabled(prev);
    if (s != DT_OK) {
        ck_drop(ck);
        free(ck);
        return s;
    }
    s = ck_record(ck, in, y, out);
    dt_tensor_release(y);
    return s;
}
