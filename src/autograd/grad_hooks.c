/*
 * Post-accumulate-grad hooks: registered on a leaf, run by the engine when the
 * leaf's gradient of a backward pass is complete (engine.c counts the edges
 * into each hooked leaf).
 */
#include <stdlib.h>

#include "autograd/grad_hooks.h"
#include "core/error.h"
#include "dtensor/autograd.h"

dt_status dt_tensor_register_post_accumulate_grad_hook(dt_tensor *t, dt_grad_hook_fn fn, void *user,
                                                       void (*free_user)(void *user))
{
    const char *fn_name = "dt_tensor_register_post_accumulate_grad_hook";
    DT_ARG_NOT_NULL(t);
    DT_ARG_NOT_NULL(fn);
    if (t->dist != NULL) /* autograd runs on the shard */
        t = t->local;
    if (t->grad_fn != NULL || !t->requires_grad)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: the tensor is %s", fn_name,
                      t->grad_fn != NULL ? "not a leaf (the output of an op)"
                                         : "a leaf that does not require grad");
    dt__grad_hook *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory", fn_name);
    *h = (dt__grad_hook){.fn = fn, .user = user, .free_user = free_user};
    dt__grad_hook **end = &t->grad_hooks;
    while (*end != NULL)
        end = &(*end)->next;
    *end = h;
    return DT_OK;
}

bool dt__ag_grad_hook_remove(dt_tensor *t, dt_grad_hook_fn fn, void *user)
{
    if (t->dist != NULL)
        t = t->local;
    for (dt__grad_hook **at = &t->grad_hooks; *at != NULL; at = &(*at)->next) {
        dt__grad_hook *h = *at;
        if (h->fn != fn || h->user != user)
            continue;
        *at = h->next;
        if (h->free_user != NULL)
            h->free_user(h->user);
        free(h);
        return true;
    }
    return false;
}

bool dt__ag_grad_hook_is_last(const dt_tensor *t, const void *user)
{
    if (t->dist != NULL)
        t = t->local;
    const dt__grad_hook *h = t->grad_hooks;
    while (h != NULL && h->next != NULL)
        h = h->next;
    return h != NULL && h->user == user;
}

dt_status dt__ag_run_grad_hooks(dt_tensor *leaf)
{
    for (dt__grad_hook *h = leaf->grad_hooks; h != NULL; h = h->next)
        DT_CHECK(h->fn(leaf, h->user));
    return DT_OK;
}

dt_status dt__ag_hooked_count(dt__ag_hooked *h, dt_tensor *leaf)
{
    if (leaf == NULL || leaf->grad_hooks == NULL)
        return DT_OK;
    for (int i = 0; i < h->n; i++)
        if (h->v[i].leaf == leaf) {
            h->v[i].edges++;
            return DT_OK;
        }
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 16;
        dt__ag_hooked_leaf *v = realloc(h->v, sizeof(*v) * (size_t)cap);
        if (v == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "dt_backward: %d hooked leaves", cap);
        h->v = v;
        h->cap = cap;
    }
    h->v[h->n++] = (dt__ag_hooked_leaf){.leaf = leaf, .edges = 1};
    return DT_OK;
}

/* The entry of @p leaf, or NULL when it has no hooks. */
static dt__ag_hooked_leaf *find(dt__ag_hooked *h, const dt_tensor *leaf)
{
    for (int i = 0; i < h->n; i++)
        if (h->v[i].leaf == leaf)
            return &h->v[i];
    return NULL;
}

bool dt__ag_hooked_arrived(dt__ag_hooked *h, const dt_tensor *leaf)
{
    dt__ag_hooked_leaf *e = find(h, leaf);
    if (e == NULL)
        return false;
    e->got = true;
    if (--e->edges > 0 || e->fired)
        return false;
    e->fired = true;
    return true;
}

dt_status dt__ag_hooked_finish(dt__ag_hooked *h)
{
    dt_status s = DT_OK;
    for (int i = 0; i < h->n && s == DT_OK; i++) {
        dt__ag_hooked_leaf *e = &h->v[i];
        if (e->got && !e->fired) {
            e->fired = true;
            s = dt__ag_run_grad_hooks(e->leaf);
        }
    }
    free(h->v);
    *h = (dt__ag_hooked){0};
    return s;
}
