/* Walking a module tree with FQNs: modules pre-order, parameters in the stable order. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/tensor_impl.h"
#include "nn/module_impl.h"

/* A growable path buffer: the FQN of the module being visited. */
typedef struct path_buf {
    char *s;
    size_t len, cap;
} path_buf;

/* Append ".name" (or "name" at the root) to @p p; returns the old length to restore. */
static dt_status path_push(path_buf *p, const char *name, size_t *old_len)
{
    size_t n = strlen(name);
    size_t need = p->len + n + 2;
    if (need > p->cap) {
        size_t cap = p->cap > 0 ? p->cap : 64;
        while (cap < need)
            cap *= 2;
        char *s = realloc(p->s, cap);
        if (s == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "module walk: no memory for a %zu-byte FQN", need);
        p->s = s;
        p->cap = cap;
    }
    *old_len = p->len;
    if (p->len > 0)
        p->s[p->len++] = '.';
    memcpy(p->s + p->len, name, n + 1);
    p->len += n;
    return DT_OK;
}

static void path_pop(path_buf *p, size_t old_len)
{
    p->len = old_len;
    p->s[old_len] = '\0';
}

static dt_status walk_modules(dt_module *m, path_buf *p, dt_module_visit_fn fn, void *user)
{
    DT_CHECK(fn(p->s, m, user));
    for (int i = 0; i < m->n_children; i++) {
        size_t old = 0;
        DT_CHECK(path_push(p, m->children[i]->name, &old));
        dt_status s = walk_modules(m->children[i], p, fn, user);
        path_pop(p, old);
        DT_CHECK(s);
    }
    return DT_OK;
}

static dt_status walk_params(dt_module *m, path_buf *p, dt_param_visit_fn fn, void *user)
{
    for (int i = 0; i < m->n_params; i++) {
        size_t old = 0;
        DT_CHECK(path_push(p, m->params[i].name, &old));
        dt_status s = fn(p->s, m, m->params[i].name, m->params[i].tensor, user);
        path_pop(p, old);
        DT_CHECK(s);
    }
    for (int i = 0; i < m->n_children; i++) {
        size_t old = 0;
        DT_CHECK(path_push(p, m->children[i]->name, &old));
        dt_status s = walk_params(m->children[i], p, fn, user);
        path_pop(p, old);
        DT_CHECK(s);
    }
    return DT_OK;
}

/* Start a walk at @p root with an empty (but allocated) path. */
static dt_status path_init(path_buf *p)
{
    p->cap = 64;
    p->len = 0;
    p->s = malloc(p->cap);
    if (p->s == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "module walk: no memory for the FQN buffer");
    p->s[0] = '\0';
    return DT_OK;
}

dt_status dt_module_foreach(dt_module *root, dt_module_visit_fn fn, void *user)
{
    DT_ARG_NOT_NULL(root);
    DT_ARG_NOT_NULL(fn);
    path_buf p;
    DT_CHECK(path_init(&p));
    dt_status s = walk_modules(root, &p, fn, user);
    free(p.s);
    return s;
}

dt_status dt_module_foreach_param(dt_module *root, dt_param_visit_fn fn, void *user)
{
    DT_ARG_NOT_NULL(root);
    DT_ARG_NOT_NULL(fn);
    path_buf p;
    DT_CHECK(path_init(&p));
    dt_status s = walk_params(root, &p, fn, user);
    free(p.s);
    return s;
}

int dt_module_param_count(dt_module *root)
{
    if (root == NULL)
        return 0;
    int n = root->n_params;
    for (int i = 0; i < root->n_children; i++)
        n += dt_module_param_count(root->children[i]);
    return n;
}

int64_t dt_module_param_numel(dt_module *root)
{
    if (root == NULL)
        return 0;
    int64_t n = 0;
    for (int i = 0; i < root->n_params; i++)
        n += dt_tensor_numel(root->params[i].tensor);
    for (int i = 0; i < root->n_children; i++)
        n += dt_module_param_numel(root->children[i]);
    return n;
}
