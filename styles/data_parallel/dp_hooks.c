/*
 * When a data-parallel model's gradients are ready, from autograd's public
 * hooks (include/dtensor/autograd.h), as PyTorch's DDP and FSDP2 learn it:
 *
 *   post-accumulate-grad hook on each parameter's leaf (p->leaf): its
 *       gradient of this backward is complete (every use of the parameter
 *       delivered) - start its reduction (dp_grad.c);
 *   gradient hook on the root's output: backward through this model began -
 *       stash the leaves' earlier gradients and queue the end-of-pass callback;
 *   gradient hook on each ZeRO-3 unit's output: the unit's backward is next -
 *       gather its parameters again (and prefetch the unit after it);
 *   end-of-pass callback: every gradient is in - complete the reductions and
 *       install the gradients.
 *
 * The leaf hooks are registered once (dt_fully_shard) and do nothing unless a
 * forward of this model recorded a graph (armed); the others come with each
 * forward's graph and hold a reference to the state.
 */
#include <stdlib.h>

#include "autograd/grad_hooks.h"
#include "core/error.h"
#include "core/log.h"
#include "styles/data_parallel/dp_impl.h"

typedef struct dp_leaf_hook {
    dp_state *s; /* no reference: the state holds the leaf, the leaf this */
    int i;
} dp_leaf_hook;

typedef struct dp_unit_hook {
    dp_state *s; /* a reference */
    int u;
} dp_unit_hook;

/* ---------------------------------------------------------------- end of backward */

/* Each leaf gets back the gradient it had when backward began (the local
 * one a later hook saw is dropped): the reduced one is added to it. */
static dt_status give_back_priors(dp_state *s)
{
    dt_status first = DT_OK;
    for (int i = 0; i < s->n_params; i++) {
        dp_param *p = &s->p[i];
        dt_status st = dt_tensor_set_grad(p->leaf, p->prior);
        dt_tensor_release(p->prior);
        p->prior = NULL;
        p->left = false;
        if (first == DT_OK)
            first = st;
    }
    return first;
}

static dt_status backward_end(void *user)
{
    dp_state *s = user;
    DT_LOG_DEBUG("dp", "backward ended: completing the reductions");
    s->in_backward = false;
    s->armed = false;
    DT_CHECK(give_back_priors(s));
    return s->sync ? dt__dp_grads_finish(s) : DT_OK;
}

void dt__dp_backward_abort(dp_state *s)
{
    if (!s->in_backward)
        return;
    dt__dp_grads_reset(s);
    (void)give_back_priors(s); /* the same tensors back: cannot fail */
    s->in_backward = false;
}

/* ---------------------------------------------------------------- begin */

/*
 * Backward through this model began (its output's gradient is complete, or,
 * should a parameter be reached another way first, the hook of param
 * @p except ran): each leaf's gradient from before is set aside, so the one
 * autograd accumulates is this pass's alone - what is reduced - and the end
 * callback is queued.
 */
static dt_status backward_begin(dp_state *s, int except)
{
    if (s->in_backward)
        return DT_OK;
    s->refs++;
    dt_status st = dt_backward_queue_callback(backward_end, s, dt__dp_state_unref);
    if (st != DT_OK) {
        s->refs--;
        return st;
    }
    s->in_backward = true;
    for (int i = 0; i < s->n_params; i++) {
        dp_param *p = &s->p[i];
        p->ready = p->left = false;
        dt_tensor *g = dt_tensor_grad(p->leaf);
        if (g != NULL && i != except) {
            p->prior = dt_tensor_retain(g);
            DT_CHECK(dt_tensor_set_grad(p->leaf, NULL));
        }
    }
    return DT_OK;
}

static dt_status begin_hook(dt_tensor *grad, void *user)
{
    (void)grad;
    return backward_begin(user, -1);
}

dt_status dt__dp_forward_end(dp_state *s, dt_tensor *out)
{
    if (!dt_grad_is_enabled())
        return DT_OK;
    s->armed = true; /* stays until a backward ended, whatever forwards come between */
    if (out == NULL || dt__dp_local(out)->grad_fn == NULL)
        return DT_OK;
    s->refs++;
    dt_status st = dt_tensor_register_hook(out, begin_hook, s, dt__dp_state_unref);
    if (st != DT_OK)
        s->refs--;
    return st;
}

/* ---------------------------------------------------------------- gradient ready */

/*
 * The gradient the reduction takes (a new reference the caller may change):
 * the leaf's own when ours is its last hook (.grad cleared; in flight it
 * counts as backward scratch, as the gradient an op returns), else a copy, so
 * the hooks after ours see the local gradient (dropped at the end).
 */
static dt_status take_grad(dp_param *p, dt_tensor **out)
{
    dt_tensor *g = dt_tensor_grad(p->leaf);
    if (dt__ag_grad_hook_is_last(p->leaf, p->hook)) {
        *out = dt_tensor_retain(g);
        dt__storage_set_category(g->storage, DT_MEM_ACTIVATION);
        return dt_tensor_set_grad(p->leaf, NULL);
    }
    p->left = true;
    dt_mem_category prev = dt_memory_set_default_category(DT_MEM_ACTIVATION);
    dt_status st = dt_tensor_clone(g, out);
    dt_memory_set_default_category(prev);
    return st;
}

static dt_status param_hook(dt_tensor *leaf, void *user)
{
    (void)leaf; /* p->leaf */
    dp_leaf_hook *h = user;
    dp_state *s = h->s;
    dp_param *p = &s->p[h->i];
    if (!s->armed || dt_tensor_grad(p->leaf) == NULL)
        return DT_OK;                  /* a graph that no forward of this model recorded */
    DT_CHECK(backward_begin(s, h->i)); /* when the output's hook did not say so first */
    if (p->ready)
        return DT_OK;
    p->ready = true;
    DT_LOG_DEBUG("dp", "gradient of '%s' ready", p->fqn);
    dt_tensor *g = NULL;
    DT_CHECK(take_grad(p, &g));
    dt_status st = dt__dp_grad_ready(s, p, g);
    dt_tensor_release(g);
    return st;
}

dt_status dt__dp_hooks_register(dp_state *s)
{
    for (int i = 0; i < s->n_params; i++)
        if (!dt_tensor_requires_grad(s->p[i].leaf))
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_fully_shard: parameter '%s' does not require grad (frozen "
                          "parameters are not supported)",
                          s->p[i].fqn);
    for (int i = 0; i < s->n_params; i++) {
        dp_param *p = &s->p[i];
        dp_leaf_hook *h = malloc(sizeof(*h));
        dt_status st =
            h == NULL ? DT_ERR(DT_ERR_NO_MEMORY, "dt_fully_shard: no memory for hooks") : DT_OK;
        if (st == DT_OK) {
            *h = (dp_leaf_hook){.s = s, .i = i};
            st = dt_tensor_register_post_accumulate_grad_hook(p->leaf, param_hook, h, free);
        }
        if (st != DT_OK) {
            free(h);
            dt__dp_hooks_remove(s);
            return st;
        }
        p->hook = h;
    }
    return DT_OK;
}

void dt__dp_hooks_remove(dp_state *s)
{
    for (int i = 0; i < s->n_params; i++) {
        dp_param *p = &s->p[i];
        if (p->hook != NULL)
            (void)dt__ag_grad_hook_remove(p->leaf, param_hook, p->hook); /* frees it */
        p->hook = NULL;
    }
}

/* ---------------------------------------------------------------- ZeRO-3 regather */

static int order_pos(const dp_state *s, int u)
{
    for (int j = 0; j < s->n_order; j++)
        if (s->order[j] == u)
            return j;
    return -1;
}

static dt_status regather_hook(dt_tensor *grad, void *user)
{
    (void)grad;
    dp_unit_hook *h = user;
    dp_state *s = h->s;
    DT_CHECK(dt__dp_unit_gather_wait(s, h->u));
    if (s->prefetch && s->order_known) { /* the unit whose backward comes next */
        int pos = order_pos(s, h->u);
        int prev = pos == 0 ? s->n_order - 1 : pos - 1;
        if (pos >= 0 && prev > 0)
            DT_CHECK(dt__dp_unit_gather_post(s, s->order[prev]));
    }
    return dt__dp_progress(s);
}

static void unit_hook_free(void *user)
{
    dp_unit_hook *h = user;
    dt__dp_state_unref(h->s);
    free(h);
}

dt_status dt__dp_unit_output_hook(dp_state *s, int u, dt_tensor *out)
{
    if (out == NULL || !dt_grad_is_enabled() || dt__dp_local(out)->grad_fn == NULL)
        return DT_OK;
    dp_unit_hook *h = malloc(sizeof(*h));
    if (h == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "data parallel: no memory for a unit hook");
    *h = (dp_unit_hook){.s = s, .u = u};
    s->refs++;
    dt_status st = dt_tensor_register_hook(out, regather_hook, h, unit_hook_free);
    if (st != DT_OK) {
        s->refs--;
        free(h);
    }
    return st;
}
