/*
 * The layout behind dt_module and helpers shared by the built-in layers.
 * Not installed.
 */
#ifndef DT_NN_MODULE_IMPL_H
#define DT_NN_MODULE_IMPL_H

#include "dtensor/nn.h"

typedef struct dt_module_slot {
    char *name;
    dt_tensor *tensor; /* one reference */
} dt_module_slot;

typedef struct dt_module_hook {
    bool pre;
    dt_module_pre_hook_fn pre_fn;
    dt_module_post_hook_fn post_fn;
    void *user;
    void (*free_user)(void *);
} dt_module_hook;

struct dt_module {
    const dt_module_ops *ops;
    void *impl;
    char *name; /* "" for a root */
    dt_module *parent;

    dt_module **children;
    int n_children, cap_children;

    dt_module_slot *params;
    int n_params, cap_params;

    dt_module_hook *hooks;
    int n_hooks, cap_hooks;
};

/* Allocate a zero-filled f32 CPU tensor of @p shape as a parameter of @p m under @p name. */
dt_status dt__module_new_param(dt_module *m, const char *name, int ndim, const int64_t *shape,
                               double fill);

/* The default initialisation of new module @p m's parameters @p names (n of
 * them, same key): U(-bound, bound), or N(0, 1) when @p bound is 0, under the
 * rule of nn.h for type-and-sizes key @p what (default_init.c). */
dt_status dt__nn_default_init(dt_module *m, const char *what, int n, const char *const *names,
                              double bound);

/* Attach @p child (a new root) to @p parent; on failure destroy the child. */
dt_status dt__module_adopt(dt_module *parent, const char *name, dt_module *child);

/* Forward of child @p name of @p m on one input. */
dt_status dt__module_call_child(dt_module *m, const char *name, dt_tensor *x, dt_tensor **out);

/* Check that a built-in forward got exactly @p want inputs, none NULL. */
dt_status dt__module_check_inputs(const dt_module *m, int n_in, dt_tensor *const *inputs, int want);

/* The local (shard) data of a tensor: itself, or its local part when distributed. */
dt_tensor *dt__local_of(dt_tensor *t);

/* True when distributed @p t has a Partial placement on some mesh dim. */
bool dt__param_is_partial(const dt_tensor *t);

#endif
