/*
 * What autograd needs from the placement layer for distributed tensors, as a
 * table of function pointers that placement/rules/ installs (autograd sits
 * below placement and cannot call it). Installed when the first distributed
 * tensor is made (dt__dist_wrap): autograd only needs the hooks for a
 * distributed tensor or gradient, so they are there whenever they are used.
 * No constructor: the linker drops those from static libraries.
 */
#ifndef DT_AUTOGRAD_DIST_HOOKS_H
#define DT_AUTOGRAD_DIST_HOOKS_H

#include "core/tensor_impl.h"

typedef struct dt_ag_dist_hooks {
    /* A distributed handle with @p like's spec over @p local (retained): dt_tensor_detach. */
    dt_status (*wrap_like)(dt_tensor *like, dt_tensor *local, dt_tensor **out);

    /*
     * Gradients in flight (engine.c). A backward may return a DISTRIBUTED
     * gradient: a shard whose layout is its spec (e.g. Partial(sum) where the
     * tensor is Replicate: this rank's part of the gradient, not yet summed).
     * The engine never reduces it eagerly: contributions are added with
     * grad_add, and the sum is brought to the tensor's own layout with
     * grad_materialize only when a node's backward or a leaf needs it, so
     * three Partial contributions (wq, wk, wv of one input) cost one
     * all-reduce, not three.
     */
    /* a + b where either is distributed (the other is a local gradient in the
     * tensor's convention): a new reference, distributed or local. No
     * communication unless the two specs disagree. */
    dt_status (*grad_add)(dt_tensor *a, dt_tensor *b, dt_tensor **out);
    /* The local gradient (tensor's convention: every Partial read as
     * Replicate) of distributed gradient @p g. Collective over g's mesh. */
    dt_status (*grad_materialize)(dt_tensor *g, dt_tensor **out);
} dt_ag_dist_hooks;

/* Install @p hooks unless some are installed already (thread-safe; the first
 * wins, so a table set on purpose, as by a test, is kept). */
void dt__ag_offer_dist_hooks(const dt_ag_dist_hooks *hooks);
/* The installed hooks, or NULL. */
const dt_ag_dist_hooks *dt__ag_dist_hooks(void);

#endif
