/*
 * dtensor/autograd.h - reverse-mode automatic differentiation.
 *
 * Ops (ops.h) record nodes on a tape when grad mode is on and an input
 * requires grad. dt_backward() walks the graph from a scalar loss in reverse
 * topological order, accumulating gradients into leaf tensors' .grad and
 * freeing each node's saved activations once its backward ran.
 *
 * Grad mode is per thread (as in PyTorch); a graph must not be used by two
 * threads at once.
 */
#ifndef DTENSOR_AUTOGRAD_H
#define DTENSOR_AUTOGRAD_H

#include "dtensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Mark a leaf tensor as needing a gradient (float dtypes only). */
DT_API dt_status dt_tensor_set_requires_grad(dt_tensor *t, bool requires_grad);
DT_API bool dt_tensor_requires_grad(const dt_tensor *t);

/** Accumulated gradient of a leaf, or NULL. Borrowed. */
DT_API dt_tensor *dt_tensor_grad(const dt_tensor *t);
/** Replace the gradient of @p t (retains @p grad; NULL clears it). */
DT_API dt_status dt_tensor_set_grad(dt_tensor *t, dt_tensor *grad);

/**
 * Backpropagate from @p root. With @p grad NULL, root must have one element
 * and its gradient is 1. Gradients accumulate (+=) into every leaf that
 * requires grad. The graph is freed as it is consumed: calling backward twice
 * on the same graph is an error (DT_ERR_INVALID_ARG).
 */
DT_API dt_status dt_backward(dt_tensor *root, dt_tensor *grad);

/** Enable or disable recording on this thread; returns the previous mode. */
DT_API bool dt_grad_set_enabled(bool enabled);
DT_API bool dt_grad_is_enabled(void);

/** Cut @p t from its history: a new handle on the same data, no grad_fn. */
DT_API dt_status dt_tensor_detach(dt_tensor *t, dt_tensor **out);

#ifdef __cplusplus
}
#endif
#endif /* DTENSOR_AUTOGRAD_H */
