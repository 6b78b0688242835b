/*
 * dtensor/autograd.h - reverse-mode automatic differentiation.
 *
 * Ops (ops.h) record nodes on a tape when grad mode is on and an input
 * requires grad. dt_backward() walks the graph from a scalar loss in reverse
 * topological order, accumulating gradients into leaf tensors' .grad and
 * freeing each node's saved activations once its backward ran.
 *
 * A tensor "requires grad" when it is a leaf marked with
 * dt_tensor_set_requires_grad, or the output of an op that recorded a node
 * (a non-leaf). Only leaves receive .grad. Gradients of leaves are allocated
 * in memory category DT_MEM_GRADIENT; the temporaries of backward and the
 * saved activations are DT_MEM_ACTIVATION and are all freed by the time
 * dt_backward returns (the graph is consumed).
 *
 * The graph holds references to the leaves it accumulates into and to the
 * tensors its backward needs; releasing the loss (and the other outputs)
 * without calling backward frees the whole graph.
 *
 * Saved tensors share data with the tensors they came from: modifying an
 * input in place between forward and backward gives wrong gradients (there is
 * no version counter).
 *
 * Grad mode is per thread (as in PyTorch); a graph must not be used by two
 * threads at once.
 *
 * Distributed tensors (placement.h): autograd runs on their local shards.
 * requires_grad, grad and set_grad of a distributed tensor act on its shard
 * (dt_tensor_grad returns the shard's gradient, a local tensor laid out with
 * the tensor's placements, Partial read as Replicate); detach keeps the spec.
 * dt_backward from a distributed root is collective over its mesh (backward
 * may all-reduce or redistribute gradients) and must be called by every rank.
 */
#ifndef DTENSOR_AUTOGRAD_H
#define DTENSOR_AUTOGRAD_H

#include "dtensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Mark a leaf tensor as needing a gradient (float dtypes only). Not collective.
 * Errors: DT_ERR_INVALID_ARG for NULL, an integer dtype, or clearing the flag
 * of a non-leaf (an op output: use dt_tensor_detach).
 */
DT_API dt_status dt_tensor_set_requires_grad(dt_tensor *t, bool requires_grad);
/** True for a leaf marked requires_grad and for every recorded op output; false for NULL. */
DT_API bool dt_tensor_requires_grad(const dt_tensor *t);

/** Accumulated gradient of a leaf, or NULL (none yet, or NULL @p t). Borrowed. */
DT_API dt_tensor *dt_tensor_grad(const dt_tensor *t);
/**
 * Replace the gradient of @p t (retains @p grad; NULL clears it, the usual
 * zero_grad). The next backward adds into @p grad in place.
 * Errors: DT_ERR_INVALID_ARG for NULL @p t, or a grad whose shape or dtype
 * differs from @p t's.
 */
DT_API dt_status dt_tensor_set_grad(dt_tensor *t, dt_tensor *grad);

/** A post-accumulate-grad hook: @p t's gradient (dt_tensor_grad) is final for
 *  this backward pass. An error it returns fails dt_backward with it. */
typedef dt_status (*dt_grad_hook_fn)(dt_tensor *t, void *user);

/**
 * Run @p fn(t, user) once in every dt_backward that gives leaf @p t a
 * gradient, as soon as that gradient is complete - every edge of the graph
 * into @p t delivered its part, and the op that delivered the last one
 * released what it saved (PyTorch's register_post_accumulate_grad_hook):
 * an optimizer step or a gradient reduction can start while backward goes on.
 * A leaf used several times (tied weights) gets one call, with the sum. A
 * gradient that arrives distributed (a pending Partial) is reduced when its
 * last edge delivered, just before the hooks (collective over its mesh: every
 * rank of it must hook the same tensors); one whose last edge carried none
 * completes at the end of the pass. Hooks of one tensor run in registration
 * order. A distributed @p t's
 * hooks are its local shard's, which they receive (autograd runs on shards).
 * @p free_user (may be NULL) gets @p user when the tensor is freed. Not
 * collective. Errors: DT_ERR_INVALID_ARG for NULL @p t or @p fn, or a tensor
 * that is not a leaf requiring grad; DT_ERR_NO_MEMORY.
 */
DT_API dt_status dt_tensor_register_post_accumulate_grad_hook(dt_tensor *t, dt_grad_hook_fn fn,
                                                              void *user,
                                                              void (*free_user)(void *user));

/** A gradient hook: @p grad is the gradient with respect to the hooked tensor
 *  (borrowed, read only; distributed - a pending Partial - when the op that
 *  made the tensor takes it so). An error it returns fails dt_backward. */
typedef dt_status (*dt_tensor_hook_fn)(dt_tensor *grad, void *user);

/**
 * Run @p fn(grad, user) in the dt_backward that reaches non-leaf @p t (an op
 * output), when the gradient with respect to @p t is complete - every consumer
 * of @p t ran its backward - and before the op that produced @p t runs its own
 * (PyTorch's Tensor.register_hook, read only): a "pre-backward" signal for the
 * ops behind @p t, e.g. to gather a module's parameters again before its
 * backward (ZeRO-3, FSDP's register_multi_grad_hook on a module's output).
 * The hook belongs to the graph, not to the handle: releasing @p t keeps it,
 * and it runs at most once (the graph is consumed). Hooks of one tensor run
 * in registration order. A distributed @p t's hook is its shard's. It does not
 * run when no gradient reaches @p t. @p free_user (may be NULL) gets @p user
 * once the hook ran or its graph is freed. Not collective.
 * Errors: DT_ERR_INVALID_ARG for NULL @p t or @p fn, a leaf (use
 * dt_tensor_register_post_accumulate_grad_hook), a tensor that is not part of
 * a graph, or a consumed graph; DT_ERR_NO_MEMORY.
 */
DT_API dt_status dt_tensor_register_hook(dt_tensor *t, dt_tensor_hook_fn fn, void *user,
                                         void (*free_user)(void *user));

/** A callback run when a backward pass ends. An error it returns fails dt_backward. */
typedef dt_status (*dt_backward_callback_fn)(void *user);

/**
 * From inside a backward pass (a hook, or an op's backward): run @p fn(user)
 * once when that pass ends - after every node ran, every leaf got its
 * gradient and every post-accumulate-grad hook ran - before dt_backward
 * returns (PyTorch's Variable._execution_engine.queue_callback): data
 * parallelism waits for its reductions there. Callbacks run in the order they
 * were queued (one may queue another, which runs after it); the first error
 * stops them. A pass that fails runs none. Inside a nested pass (activation
 * checkpointing's recompute) the callback is that pass's. @p free_user (may
 * be NULL) gets @p user when the pass ends, whether @p fn ran or not; it is
 * not called when this function fails. Not collective.
 * Errors: DT_ERR_INVALID_ARG for NULL @p fn or when no backward pass runs on
 * this thread; DT_ERR_NO_MEMORY.
 */
DT_API dt_status dt_backward_queue_callback(dt_backward_callback_fn fn, void *user,
                                            void (*free_user)(void *user));

/**
 * Backpropagate from @p root. With @p grad NULL, root must have one element
 * and its gradient is 1. Gradients accumulate (+=) into every leaf that
 * requires grad (from a multiply-used tensor, contributions are summed; a
 * broadcast input gets the gradient summed down to its shape). The graph is
 * freed as it is consumed: calling backward twice on the same graph is an
 * error (DT_ERR_INVALID_ARG, "already consumed"), detected before any
 * gradient is written. With @p root a leaf, its .grad += @p grad (or 1).
 * @p grad (borrowed) must be f32 with root's shape. Not collective for local
 * tensors. A distributed root (a Replicate or Partial scalar loss, e.g. the
 * parallel cross entropy) is seeded with 1 on every rank; a non-scalar one
 * needs @p grad, distributed like it (its shard is used).
 * Errors: DT_ERR_INVALID_ARG for NULL root, a root that does not require
 * grad, a non-scalar root without @p grad, a mismatched @p grad, or a consumed
 * graph; DT_ERR_NO_MEMORY; collective errors for a distributed graph. After an error in the middle
 * of the walk the graph is partly consumed and leaves may hold partial gradients.
 */
DT_API dt_status dt_backward(dt_tensor *root, dt_tensor *grad);

/**
 * Enable or disable recording on this thread; returns the previous mode, so a
 * no-grad scope is `bool prev = dt_grad_set_enabled(false); ...;
 * dt_grad_set_enabled(prev);`. Enabled by default in every thread.
 */
DT_API bool dt_grad_set_enabled(bool enabled);
DT_API bool dt_grad_is_enabled(void);

/**
 * Cut @p t from its history: a new handle (caller releases) on the same data,
 * with no grad_fn and requires_grad false.
 * A distributed @p t gives a distributed handle with the same spec over the
 * detached shard.
 * Errors: DT_ERR_INVALID_ARG for NULL.
 */
DT_API dt_status dt_tensor_detach(dt_tensor *t, dt_tensor **out);

#ifdef __cplusplus
}
#endif
#endif /* DTENSOR_AUTOGRAD_H */
