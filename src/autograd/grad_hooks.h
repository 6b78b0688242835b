/*
 * Post-accumulate-grad hooks, the engine's side (grad_hooks.c): which hooked
 * leaves a backward pass reaches, through how many edges, and when each one's
 * gradient is complete.
 */
#ifndef DT_AUTOGRAD_GRAD_HOOKS_H
#define DT_AUTOGRAD_GRAD_HOOKS_H

#include <stdbool.h>

#include "core/tensor_impl.h"
#include "dtensor/autograd.h"

typedef struct dt__ag_hooked_leaf {
    dt_tensor *leaf; /* borrowed: the graph's edges hold it */
    int edges;       /* edges into it not yet delivered */
    bool got, fired;
} dt__ag_hooked_leaf;

typedef struct dt__ag_hooked {
    dt__ag_hooked_leaf *v;
    int n, cap;
} dt__ag_hooked;

/* Remove (and free_user) the hook of @p t (a leaf, or distributed: its
 * shard's) registered with @p fn and @p user; false when there is none. */
bool dt__ag_grad_hook_remove(dt_tensor *t, dt_grad_hook_fn fn, void *user);
/* Whether the hook registered on @p t with @p user is its last one. */
bool dt__ag_grad_hook_is_last(const dt_tensor *t, const void *user);
/* Run @p leaf's hooks in order; the first error stops them. */
dt_status dt__ag_run_grad_hooks(dt_tensor *leaf);
/* While collecting the graph: one more edge into @p leaf (ignored without hooks). */
dt_status dt__ag_hooked_count(dt__ag_hooked *h, dt_tensor *leaf);
/* An edge delivered @p leaf's gradient: true when that was the last edge of
 * a hooked leaf (marked fired: the caller completes the gradient and runs
 * the hooks). */
bool dt__ag_hooked_arrived(dt__ag_hooked *h, const dt_tensor *leaf);
/* End of the pass: hooks of leaves that got a gradient and have not run yet;
 * frees the table. */
dt_status dt__ag_hooked_finish(dt__ag_hooked *h);

#endif
