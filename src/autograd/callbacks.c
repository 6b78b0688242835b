/*
 * Callbacks run when a backward pass ends (PyTorch's
 * Variable._execution_engine.queue_callback): what DDP and FSDP use to wait
 * for their reductions once every gradient of the pass is in.
 */
#include <stdlib.h>

#include "autograd/callbacks.h"
#include "core/error.h"

static _Thread_local dt__ag_pass *g_pass; /* the innermost pass running on this thread */

void dt__ag_pass_begin(dt__ag_pass *pass)
{
    pass->outer = g_pass;
    g_pass = pass;
}

dt_status dt__ag_pass_end(dt__ag_pass *pass, bool run)
{
    dt_status s = DT_OK;
    for (int i = 0; run && s == DT_OK && i < pass->n; i++) /* n may grow meanwhile */
        s = pass->v[i].fn(pass->v[i].user);
    g_pass = pass->outer;
    for (int i = 0; i < pass->n; i++)
        if (pass->v[i].free_user != NULL)
            pass->v[i].free_user(pass->v[i].user);
    free(pass->v);
    pass->v = NULL;
    pass->n = pass->cap = 0;
    return s;
}

dt_status dt_backward_queue_callback(dt_backward_callback_fn fn, void *user,
                                     void (*free_user)(void *user))
{
    const char *fn_name = "dt_backward_queue_callback";
    DT_ARG_NOT_NULL(fn);
    dt__ag_pass *p = g_pass;
    if (p == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: no backward pass runs on this thread (call it from a hook)", fn_name);
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 4;
        dt__ag_callback *v = realloc(p->v, sizeof(*v) * (size_t)cap);
        if (v == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "%s: %d callbacks", fn_name, cap);
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = (dt__ag_callback){.fn = fn, .user = user, .free_user = free_user};
    return DT_OK;
}
