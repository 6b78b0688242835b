/* The module tree: creation, children, parameter slots, queries. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "core/tensor_impl.h"
#include "dtensor/autograd.h"
#include "dtensor/mesh.h"
#include "dtensor/placement.h"
#include "nn/module_impl.h"
#include "nn/nn_internal.h"

dt_tensor *dt__local_of(dt_tensor *t)
{
    return (t != NULL && t->dist != NULL) ? t->local : t;
}

bool dt__param_is_partial(const dt_tensor *t)
{
    if (t == NULL || t->dist == NULL)
        return false;
    const dt_placement *pl = dt_tensor_placements(t);
    for (int d = 0; d < dt_mesh_ndim(dt_tensor_mesh(t)); d++)
        if (pl[d].kind == DT_PLACEMENT_PARTIAL)
            return true;
    return false;
}

/* A local name: non-empty, no '.', no '*' (reserved for plan patterns). */
static dt_status check_name(const char *fn, const char *what, const char *name)
{
    if (name == NULL || name[0] == '\0')
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s name is empty", fn, what);
    if (strchr(name, '.') != NULL || strchr(name, '*') != NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s name '%s' contains '.' or '*'", fn, what, name);
    return DT_OK;
}

/* Grow *arr (of *cap elements of @p elem bytes) to hold at least @p need. */
static dt_status grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return DT_OK;
    int ncap = *cap > 0 ? *cap * 2 : 4;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (p == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "module: cannot grow a table to %d entries", ncap);
    *arr = p;
    *cap = ncap;
    return DT_OK;
}

dt_status dt_module_create(const dt_module_ops *ops, void *impl, dt_module **out)
{
    dt_status status;
    if (ops == NULL || ops->forward == NULL || ops->type_name == NULL) {
        status = DT_ERR(DT_ERR_INVALID_ARG,
                        "dt_module_create: ops, ops->forward and ops->type_name are required");
        goto err_free_impl;
    }
    if (out == NULL) {
        status = DT_ERR(DT_ERR_INVALID_ARG, "dt_module_create: argument 'out' is NULL");
        goto err_free_impl;
    }
    dt_module *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        status = DT_ERR(DT_ERR_NO_MEMORY, "dt_module_create: no memory for a %s", ops->type_name);
        goto err_free_impl;
    }
    m->name = strdup("");
    if (m->name == NULL) {
        free(m);
        status = DT_ERR(DT_ERR_NO_MEMORY, "dt_module_create: no memory for a name");
        goto err_free_impl;
    }
    m->ops = ops;
    m->impl = impl;
    *out = m;
    return DT_OK;

err_free_impl:
    if (ops != NULL && ops->destroy_impl != NULL && impl != NULL)
        ops->destroy_impl(impl);
    return status;
}

static void free_hook(dt_module_hook *h)
{
    if (h->free_user != NULL)
        h->free_user(h->user);
}

static void module_free(dt_module *m)
{
    for (int i = 0; i < m->n_children; i++)
        module_free(m->children[i]);
    free(m->children);
    for (int i = 0; i < m->n_params; i++) {
        dt_tensor_release(m->params[i].tensor);
        free(m->params[i].name);
    }
    free(m->params);
    for (int i = 0; i < m->n_hooks; i++)
        free_hook(&m->hooks[i]);
    free(m->hooks);
    if (m->ops->destroy_impl != NULL && m->impl != NULL)
        m->ops->destroy_impl(m->impl);
    free(m->name);
    free(m);
}

void dt_module_destroy(dt_module *m)
{
    if (m == NULL)
        return;
    if (m->parent != NULL) {
        DT_LOG_WARN("nn", "dt_module_destroy: module '%s' belongs to a parent; destroy the root",
                    m->name);
        return;
    }
    module_free(m);
}

dt_status dt_module_add_child(dt_module *parent, const char *name, dt_module *child)
{
    DT_ARG_NOT_NULL(parent);
    DT_ARG_NOT_NULL(child);
    DT_CHECK(check_name("dt_module_add_child", "child", name));
    if (child->parent != NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_module_add_child: module '%s' already has a parent",
                      child->name);
    for (const dt_module *a = parent; a != NULL; a = a->parent)
        if (a == child)
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_module_add_child: '%s' is an ancestor of the parent (a cycle)", name);
    if (dt_module_child(parent, name) != NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_module_add_child: parent already has a child '%s'",
                      name);
    DT_CHECK(grow((void **)&parent->children, &parent->cap_children, parent->n_children + 1,
                  sizeof(dt_module *)));
    char *copy = strdup(name);
    if (copy == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_module_add_child: no memory for name '%s'", name);
    free(child->name);
    child->name = copy;
    child->parent = parent;
    parent->children[parent->n_children++] = child;
    return DT_OK;
}

dt_status dt__module_adopt(dt_module *parent, const char *name, dt_module *child)
{
    dt_status status = dt_module_add_child(parent, name, child);
    if (status != DT_OK)
        dt_module_destroy(child);
    return status;
}

static dt_module_slot *find_slot(const dt_module *m, const char *name)
{
    for (int i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].name, name) == 0)
            return &m->params[i];
    return NULL;
}

/* Make @p t a parameter: requires grad, storage tagged DT_MEM_PARAMETER. */
static dt_status mark_param(const char *fn, const char *name, dt_tensor *t)
{
    if (!dt__dtype_is_float(t->dtype))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: parameter '%s' has dtype %s (floats only)", fn, name,
                      dt_dtype_name(t->dtype));
    if (t->grad_fn != NULL)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: parameter '%s' is the result of an op (detach it first)", fn, name);
    DT_CHECK(dt_tensor_set_requires_grad(t, true));
    dt_tensor *local = dt__local_of(t);
    if (local != NULL && local->storage != NULL)
        dt_tensor_set_mem_category(local, DT_MEM_PARAMETER);
    return DT_OK;
}

dt_status dt_module_param_add(dt_module *m, const char *name, dt_tensor *t)
{
    DT_ARG_NOT_NULL(m);
    DT_ARG_NOT_NULL(t);
    DT_CHECK(check_name("dt_module_param_add", "parameter", name));
    if (find_slot(m, name) != NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_module_param_add: %s already has a parameter '%s'",
                      m->ops->type_name, name);
    DT_CHECK(mark_param("dt_module_param_add", name, t));
    DT_CHECK(grow((void **)&m->params, &m->cap_params, m->n_params + 1, sizeof(dt_module_slot)));
    char *copy = strdup(name);
    if (copy == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_module_param_add: no memory for name '%s'", name);
    m->params[m->n_params].name = copy;
    m->params[m->n_params].tensor = dt_tensor_retain(t);
    m->params[m->n_params].init = (dt__init_rule){.kind = DT__INIT_CONST};
    m->n_params++;
    return DT_OK;
}

dt_status dt_module_param_set(dt_module *m, const char *name, dt_tensor *t)
{
    DT_ARG_NOT_NULL(m);
    DT_ARG_NOT_NULL(name);
    DT_ARG_NOT_NULL(t);
    dt_module_slot *s = find_slot(m, name);
    if (s == NULL)
        return DT_ERR(DT_ERR_NOT_FOUND, "dt_module_param_set: %s '%s' has no parameter '%s'",
                      m->ops->type_name, m->name, name);
    DT_CHECK(mark_param("dt_module_param_set", name, t));
    dt_tensor *old = s->tensor;
    s->tensor = dt_tensor_retain(t);
    dt_tensor_release(old);
    return DT_OK;
}

bool dt__module_slot_swap(dt_module *m, const char *name, dt_tensor *t)
{
    dt_module_slot *s = find_slot(m, name);
    if (s == NULL)
        return false;
    dt_tensor *old = s->tensor;
    s->tensor = dt_tensor_retain(t);
    dt_tensor_release(old);
    return true;
}

dt_status dt__module_new_param(dt_module *m, const char *name, int ndim, const int64_t *shape,
                               double fill)
{
    dt_tensor *t = NULL;
    bool deferred = dt_nn_deferred_active();
    dt_mem_category prev = dt_memory_set_default_category(DT_MEM_PARAMETER);
    dt_status status = deferred
                           ? dt__tensor_deferred(ndim, shape, DT_DTYPE_F32, dt_device_cpu(), &t)
                           : dt_tensor_full(ndim, shape, DT_DTYPE_F32, dt_device_cpu(), fill, &t);
    dt_memory_set_default_category(prev);
    DT_CHECK(status);
    status = dt_module_param_add(m, name, t);
    dt_tensor_release(t);
    if (status == DT_OK) /* what materialize fills in when deferred */
        m->params[m->n_params - 1].init = (dt__init_rule){.kind = DT__INIT_CONST, .a = fill};
    return status;
}

/* ---------------------------------------------------------------- queries */

dt_tensor *dt_module_param(const dt_module *m, const char *name)
{
    if (m == NULL || name == NULL)
        return NULL;
    dt_module_slot *s = find_slot(m, name);
    return s != NULL ? s->tensor : NULL;
}

int dt_module_num_params(const dt_module *m)
{
    return m != NULL ? m->n_params : 0;
}

const char *dt_module_param_name_at(const dt_module *m, int i)
{
    return (m != NULL && i >= 0 && i < m->n_params) ? m->params[i].name : NULL;
}

dt_tensor *dt_module_param_at(const dt_module *m, int i)
{
    return (m != NULL && i >= 0 && i < m->n_params) ? m->params[i].tensor : NULL;
}

const char *dt_module_type_name(const dt_module *m)
{
    return m != NULL ? m->ops->type_name : "(null)";
}

const char *dt_module_name(const dt_module *m)
{
    return m != NULL ? m->name : "";
}
dt_module *dt_module_parent(const dt_module *m)
{
    return m != NULL ? m->parent : NULL;
}
void *dt_module_impl(const dt_module *m)
{
    return m != NULL ? m->impl : NULL;
}
int dt_module_num_children(const dt_module *m)
{
    return m != NULL ? m->n_children : 0;
}

dt_module *dt_module_child_at(const dt_module *m, int i)
{
    return (m != NULL && i >= 0 && i < m->n_children) ? m->children[i] : NULL;
}

dt_module *dt_module_child(const dt_module *m, const char *name)
{
    if (m == NULL || name == NULL)
        return NULL;
    for (int i = 0; i < m->n_children; i++)
        if (strcmp(m->children[i]->name, name) == 0)
            return m->children[i];
    return NULL;
}

dt_status dt_module_find(dt_module *root, const char *fqn, dt_module **out)
{
    DT_ARG_NOT_NULL(root);
    DT_ARG_NOT_NULL(fqn);
    DT_ARG_NOT_NULL(out);
    dt_module *m = root;
    const char *p = fqn;
    while (*p != '\0') {
        const char *dot = strchr(p, '.');
        size_t len = dot != NULL ? (size_t)(dot - p) : strlen(p);
        dt_module *next = NULL;
        for (int i = 0; i < m->n_children; i++)
            if (strlen(m->children[i]->name) == len && strncmp(m->children[i]->name, p, len) == 0)
                next = m->children[i];
        if (next == NULL)
            return DT_ERR(DT_ERR_NOT_FOUND,
                          "dt_module_find: '%s': no child '%.*s' under the %s at '%.*s'", fqn,
                          (int)len, p, m->ops->type_name, (int)(p > fqn ? p - fqn - 1 : 0), fqn);
        m = next;
        p += len;
        if (*p == '.') {
            p++;
            if (*p == '\0')
                return DT_ERR(DT_ERR_NOT_FOUND, "dt_module_find: '%s' ends with '.'", fqn);
        }
    }
    *out = m;
    return DT_OK;
}

dt_status dt_module_fqn(const dt_module *m, char *buf, size_t len)
{
    DT_ARG_NOT_NULL(m);
    DT_ARG_NOT_NULL(buf);
    size_t need = 0;
    for (const dt_module *a = m; a->parent != NULL; a = a->parent)
        need += strlen(a->name) + (a->parent->parent != NULL ? 1 : 0);
    if (need + 1 > len)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_module_fqn: buffer of %zu bytes, need %zu", len,
                      need + 1);
    buf[need] = '\0';
    size_t end = need;
    for (const dt_module *a = m; a->parent != NULL; a = a->parent) {
        size_t n = strlen(a->name);
        end -= n;
        memcpy(buf + end, a->name, n);
        if (a->parent->parent != NULL)
            buf[--end] = '.';
    }
    return DT_OK;
}
