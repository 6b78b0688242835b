/*
 * Gradient hooks on op outputs (dt_tensor_register_hook), the engine's side:
 * kept on the node that produced the tensor, run when that node is about to
 * run its backward (every gradient of its outputs is complete).
 */
#ifndef DT_AUTOGRAD_OUT_HOOKS_H
#define DT_AUTOGRAD_OUT_HOOKS_H

#include <stdint.h>

#include "autograd/node.h"
#include "dtensor/autograd.h"

typedef struct dt__ag_out_hook {
    int output; /* which output of the node */
    dt_tensor_hook_fn fn;
    void *user;
    void (*free_user)(void *user);
    struct dt__ag_out_hook *next;
} dt__ag_out_hook;

/* Run @p node's hooks, in registration order, for the outputs whose bit is
 * set in @p had (output o >= 64 counts as set); the first error stops them. */
dt_status dt__ag_run_out_hooks(dt_ag_node *node, uint64_t had);
/* Free @p node's hooks (free_user of each): it ran, or it goes. */
void dt__ag_free_out_hooks(dt_ag_node *node);

#endif
