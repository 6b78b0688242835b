/*
 * The layout behind dt_module and helpers shared by the built-in layers.
 * Not installed.
 */
#ifndef DT_NN_MODULE_IMPL_H
#define DT_NN_MODULE_IMPL_H

#include "dtensor/nn.h"
#include "nn/nn_internal.h"

/* How a parameter is (or, when deferred, will be) initialised: by global
 * index, so a shard can be filled alone (deferred.c, init.c). */
typedef enum dt__init_kind {
    DT__INIT_CONST,   /* every element a */
    DT__INIT_UNIFORM, /* U[a, b) under seed */
    DT__INIT_NORMAL,  /* N(a, b^2) under seed */
} dt__init_kind;

typedef struct dt__init_rule {
    dt__init_kind kind;
    double a, b;
    uint64_t seed; /* already dt_param_seed(run seed, FQN or key) */
} dt__init_rule;

typedef struct dt_module_slot {
    char *name;
    dt_tensor *tensor;  /* one reference */
    dt__init_rule init; /* the last rule given; what dt_module_materialize applies */
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

    bool checkpoint; /* dt_module_checkpoint: recompute forward in backward */
};

/* Allocate an f32 CPU tensor of @p shape filled with @p fill as a parameter of
 * @p m under @p name; inside dt_nn_deferred_begin/end one without storage
 * that remembers the fill. */
dt_status dt__module_new_param(dt_module *m, const char *name, int ndim, const int64_t *shape,
                               double fill);

/* The default initialisation of new module @p m's parameters @p names (n of
 * them, same key): U(-bound, bound), or N(0, 1) when @p bound is 0, under the
 * rule of nn.h for type-and-sizes key @p what (default_init.c). */
dt_status dt__nn_default_init(dt_module *m, const char *what, int n, const char *const *names,
                              double bound);

/* Fill parameter @p p (local, or distributed: its shard at its global
 * offset) by @p rule; @p fqn names it in errors. Off the tape. */
dt_status dt__param_fill(dt_tensor *p, const char *fqn, const dt__init_rule *rule);

/* Initialise slot @p name of @p m by @p rule: at once, or, when the
 * parameter is deferred, only remembered for dt_module_materialize. */
dt_status dt__param_init_slot(dt_module *m, const char *name, const char *fqn,
                              const dt__init_rule *rule);

/* True when @p t (or, distributed, its local shard) has no storage yet. */
bool dt__tensor_is_deferred(const dt_tensor *t);
/* Whether any deferred parameter was ever made in this process (a cheap
 * guard for the checks below). */
bool dt__deferred_seen(void);
/* DT_ERR_INVALID_ARG naming the first deferred parameter under @p m (its FQN
 * from the root), for @p fn; DT_OK when there is none. */
dt_status dt__module_check_materialized(const char *fn, dt_module *m);
/* @p m's type forward; for a module marked by dt_module_checkpoint under
 * grad mode, without keeping its graph: one node that recomputes it in
 * backward (checkpoint_recompute.c). */
dt_status dt__module_run_forward(dt_module *m, int n_in, dt_tensor **in, dt_tensor **out);

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

/* Incremental decoding (kv_cache.c): the cache of the dt_gpt_forward_cached
 * running on this thread, or NULL (a plain forward). */
dt_kv_cache *dt__kv_active(void);
/* The first position of the running cached forward's new tokens. */
int64_t dt__kv_offset(const dt_kv_cache *c);
/* Attention @p m under cache @p c: append kh, vh [B, H, T, hd] at the cache's
 * length, *o = softmax(qh K^T / sqrt(hd)) V over every cached position
 * (causal among the new ones), [B, H, T, hd]. */
dt_status dt__kv_attend(dt_kv_cache *c, const dt_module *m, dt_tensor *qh, dt_tensor *kh,
                        dt_tensor *vh, dt_tensor **o);

#endif
