/* A readable summary of a module tree: FQN, type, and each parameter's layout. */
#include <inttypes.h>
#include <stdio.h>

#include "core/error.h"
#include "core/tensor_impl.h"
#include "dtensor/placement.h"
#include "nn/module_impl.h"

typedef struct print_ctx {
    FILE *f;
    int64_t numel, local_numel;
} print_ctx;

/* "[4, 8]" of @p t's (global) shape into @p buf. */
static const char *shape_of(const dt_tensor *t, char *buf, size_t len)
{
    return dt__shape_str(t->ndim, t->shape, buf, len);
}

static void print_param(print_ctx *c, int depth, const char *name, dt_tensor *t)
{
    char shape[96], local[96], spec[160];
    fprintf(c->f, "%*s%s %s %s", 2 * depth + 2, "", name, shape_of(t, shape, sizeof(shape)),
            dt_dtype_name(t->dtype));
    c->numel += dt_tensor_numel(t);
    dt_tensor *l = dt__local_of(t);
    c->local_numel += dt_tensor_numel(l);
    if (t->dist != NULL) {
        dt_spec_format(dt_tensor_spec(t), spec, sizeof(spec));
        fprintf(c->f, "  %s, local %s", spec, shape_of(l, local, sizeof(local)));
    }
    fputc('\n', c->f);
}

static dt_status print_module(const char *fqn, dt_module *m, void *user)
{
    print_ctx *c = user;
    int depth = 0;
    for (const dt_module *a = m; a->parent != NULL; a = a->parent)
        depth++;
    fprintf(c->f, "%*s%s (%s)\n", 2 * depth, "", fqn[0] != '\0' ? fqn : "<root>",
            m->ops->type_name);
    for (int i = 0; i < m->n_params; i++)
        print_param(c, depth, m->params[i].name, m->params[i].tensor);
    return DT_OK;
}

dt_status dt_module_print(dt_module *root, FILE *f)
{
    DT_ARG_NOT_NULL(root);
    DT_ARG_NOT_NULL(f);
    print_ctx c = {.f = f, .numel = 0, .local_numel = 0};
    DT_CHECK(dt_module_foreach(root, print_module, &c));
    fprintf(f, "%" PRId64 " parameter elements (%" PRId64 " on this rank)\n", c.numel,
            c.local_numel);
    return DT_OK;
}
