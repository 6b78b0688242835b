/*
 * Calls of nn for the layers above it (styles/, data parallelism): what they
 * need done to a module, without the module's layout (module_impl.h stays
 * private to src/nn/). Not installed.
 */
#ifndef DT_NN_INTERNAL_H
#define DT_NN_INTERNAL_H

#include "dtensor/nn.h"

/*
 * Put @p t (retained; the old tensor released) in parameter slot @p name of
 * @p m, as it is: unlike dt_module_param_set, @p t is not made a parameter
 * (no requires_grad, no DT_MEM_PARAMETER tag) and may be the output of an op.
 * Data parallelism swaps the gathered parameter in for one forward and its
 * shard back after it. False when @p m has no slot @p name.
 */
bool dt__module_slot_swap(dt_module *m, const char *name, dt_tensor *t);

/* Whether @p fn is one of @p m's pre-forward hooks, and then (@p user not
 * NULL) the user pointer of the first such hook: data parallelism finds its
 * state on the root, and refuses to be applied twice to one model. */
bool dt__module_find_pre_hook(const dt_module *m, dt_module_pre_hook_fn fn, void **user);

/* A deferred tensor: a handle with shape, dtype and device and no storage
 * (deferred.c); dt_module_materialize allocates and fills it. */
dt_status dt__tensor_deferred(int ndim, const int64_t *shape, dt_dtype dtype, dt_device device,
                              dt_tensor **out);

/* The vtable of @p m's type: its identity (styles recognise types by it). */
const dt_module_ops *dt__module_ops_of(const dt_module *m);
/* The built-in types the styles know. */
extern const dt_module_ops dt__linear_ops, dt__embedding_ops, dt__layer_norm_ops,
    dt__feed_forward_ops, dt__attention_ops, dt__sequential_ops, dt__mha_ops;

/* True while this thread recomputes a checkpointed module's forward in
 * backward (checkpoint_recompute.c): the module's descendants run again, and
 * hooks that must run once per step (a ZeRO-3 unit's) can refuse. */
bool dt__module_recomputing(void);

#endif
