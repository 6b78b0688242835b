/* Running a module: pre-hooks, the type's forward (checkpointed when marked), post-hooks. */
#include <stdlib.h>

#include "core/error.h"
#include "nn/module_impl.h"

static dt_status add_hook(dt_module *m, dt_module_hook h)
{
    if (m->n_hooks == m->cap_hooks) {
        int cap = m->cap_hooks > 0 ? m->cap_hooks * 2 : 4;
        dt_module_hook *p = realloc(m->hooks, (size_t)cap * sizeof(*p));
        if (p == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "module: no memory for %d hooks", cap);
        m->hooks = p;
        m->cap_hooks = cap;
    }
    m->hooks[m->n_hooks++] = h;
    return DT_OK;
}

dt_status dt_module_add_pre_hook(dt_module *m, dt_module_pre_hook_fn fn, void *user,
                                 void (*free_user)(void *))
{
    DT_ARG_NOT_NULL(m);
    DT_ARG_NOT_NULL(fn);
    dt_module_hook h = {.pre = true, .pre_fn = fn, .user = user, .free_user = free_user};
    return add_hook(m, h);
}

dt_status dt_module_add_post_hook(dt_module *m, dt_module_post_hook_fn fn, void *user,
                                  void (*free_user)(void *))
{
    DT_ARG_NOT_NULL(m);
    DT_ARG_NOT_NULL(fn);
    dt_module_hook h = {.pre = false, .post_fn = fn, .user = user, .free_user = free_user};
    return add_hook(m, h);
}

const dt_module_ops *dt__module_ops_of(const dt_module *m)
{
    return m->ops;
}

bool dt__module_find_pre_hook(const dt_module *m, dt_module_pre_hook_fn fn, void **user)
{
    for (int i = 0; i < m->n_hooks; i++)
        if (m->hooks[i].pre && m->hooks[i].pre_fn == fn) {
            if (user != NULL)
                *user = m->hooks[i].user;
            return true;
        }
    return false;
}

void dt_module_clear_hooks(dt_module *m)
{
    if (m == NULL)
        return;
    for (int i = 0; i < m->n_hooks; i++)
        if (m->hooks[i].free_user != NULL)
            m->hooks[i].free_user(m->hooks[i].user);
    m->n_hooks = 0;
}

dt_status dt_module_forward(dt_module *m, int n_in, dt_tensor *const *inputs, dt_tensor **out)
{
    DT_ARG_NOT_NULL(m);
    DT_ARG_NOT_NULL(out);
    if (n_in < 0 || n_in > DT_MODULE_MAX_INPUTS)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_module_forward: %s '%s' called with %d inputs (max %d)",
                      m->ops->type_name, m->name, n_in, DT_MODULE_MAX_INPUTS);
    if (n_in > 0 && inputs == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_module_forward: inputs is NULL for %d inputs", n_in);
    /* before the hooks: data parallelism's would gather shards that have no storage */
    DT_CHECK(dt__module_check_materialized("dt_module_forward", m));

    /* Own one reference per input so pre-hooks can swap them. */
    dt_tensor *in[DT_MODULE_MAX_INPUTS] = {NULL};
    for (int i = 0; i < n_in; i++)
        in[i] = dt_tensor_retain(inputs[i]);

    dt_status status = DT_OK;
    dt_tensor *y = NULL;
    for (int h = 0; h < m->n_hooks; h++)
        if (m->hooks[h].pre)
            DT_CHECK_GOTO(m->hooks[h].pre_fn(m, n_in, in, m->hooks[h].user), status,
                          err_release_inputs);
    DT_CHECK_GOTO(dt__module_run_forward(m, n_in, in, &y), status, err_release_inputs);
    for (int h = 0; h < m->n_hooks; h++)
        if (!m->hooks[h].pre)
            DT_CHECK_GOTO(m->hooks[h].post_fn(m, &y, m->hooks[h].user), status, err_release_output);
    for (int i = 0; i < n_in; i++)
        dt_tensor_release(in[i]);
    *out = y;
    return DT_OK;

err_release_output:
    dt_tensor_release(y);
err_release_inputs:
    for (int i = 0; i < n_in; i++)
        dt_tensor_release(in[i]);
    return status;
}

dt_status dt_module_call(dt_module *m, dt_tensor *x, dt_tensor **out)
{
    return dt_module_forward(m, 1, &x, out);
}

dt_status dt__module_call_child(dt_module *m, const char *name, dt_tensor *x, dt_tensor **out)
{
    dt_module *c = dt_module_child(m, name);
    if (c == NULL)
        return DT_ERR(DT_ERR_NOT_FOUND, "%s '%s': child '%s' is missing", m->ops->type_name,
                      m->name, name);
    return dt_module_forward(c, 1, &x, out);
}

dt_status dt__module_check_inputs(const dt_module *m, int n_in, dt_tensor *const *inputs, int want)
{
    if (n_in != want)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s '%s': forward takes %d input(s), got %d",
                      m->ops->type_name, m->name, want, n_in);
    for (int i = 0; i < n_in; i++)
        if (inputs[i] == NULL)
            return DT_ERR(DT_ERR_INVALID_ARG, "%s '%s': input %d is NULL", m->ops->type_name,
                          m->name, i);
    return DT_OK;
}
