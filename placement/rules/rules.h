/*
 * Sharding-propagation rules: how the ops of ops.h run on distributed tensors
 * (PyTorch DTensor's op strategies). Not installed.
 *
 * A distributed op is
 *   1. decide, per mesh dim, the placement each input must have and the
 *      placement of the output (the rule, one file per op family);
 *   2. redistribute the inputs (differentiable, dt__redist_local);
 *   3. run the LOCAL op on the shards (recorded on the tape as usual);
 *   4. wrap the local result with the output spec.
 *
 * Autograd runs on the local shards. The gradient convention (placement.h):
 * the gradient of a shard is the shard of the global gradient, laid out with
 * the tensor's placements, Partial read as Replicate. The local backward of an
 * op keeps that convention except in one case: an input that is Replicate on
 * a mesh dim where the output is not (Shard or Partial) gets only this rank's
 * part of its gradient (Megatron's "f": a column-parallel layer's input). For
 * those mesh dims step 2 also inserts a node that is the identity forward and
 * hands its gradient back as a pending Partial(sum) (a distributed gradient,
 * rules_grad.c): the engine adds contributions without communicating and
 * all-reduces once when the sum is needed. The rules therefore only pick
 * placements, and every gradient stays correct by construction.
 *
 * Graph symmetry: every rank records the same nodes (no rank-dependent graph
 * shapes), so the collectives of backward run in the same order everywhere.
 */
#ifndef DT_PLACEMENT_RULES_H
#define DT_PLACEMENT_RULES_H

#include "dtensor/comm.h"
#include "dtensor/ops.h"
#include "ops/dist_dispatch.h"
#include "ops/ops_internal.h"
#include "placement/placement_impl.h"

#define DT__RL_MAX_MESH DT_MESH_MAX_DIMS

/* The mesh every distributed input of @p xs lives on (borrowed); inputs on
 * different meshes fail naming the op and the input. */
dt_status dt__rl_mesh(const char *op, int n, dt_tensor *const *xs, dt_mesh **out);

/* The placements of @p x on @p mesh: its own (a strided shard read as the
 * plain Shard of its dim), or all-Replicate for a local tensor. */
void dt__rl_placements(const dt_tensor *x, const dt_mesh *mesh, dt_placement *pl);

/*
 * Steps 2 of the recipe for one input: redistribute @p x (distributed or local,
 * read as Replicate) to @p want, and for each mesh dim where want is Replicate
 * and @p out_pl is not, make the gradient all-reduced on the way back.
 * *local: a new reference to the shard to hand to the local op. NULL @p x
 * gives NULL.
 */
dt_status dt__rl_prepare(const char *op, dt_tensor *x, dt_mesh *mesh, const dt_placement *want,
                         const dt_placement *out_pl, dt_tensor **local);

/* Step 4: wrap shard @p local (retained) as a tensor of global @p shape with
 * placements @p pl; DT_ERR_INTERNAL when the shard's shape is not the one the
 * spec gives (a rule bug, named with the op). */
dt_status dt__rl_wrap(const char *op, dt_mesh *mesh, const dt_placement *pl, int ndim,
                      const int64_t *shape, dt_dtype dtype, dt_tensor *local, dt_tensor **out);

/* dt__rl_wrap for a matmul or linear result: made under autocast bf16, its
 * Partial sums travel in bf16 (spec->wire, redistribute_wire.c). */
dt_status dt__rl_wrap_product(const char *op, dt_mesh *mesh, const dt_placement *pl, int ndim,
                              const int64_t *shape, dt_tensor *local, dt_tensor **out);

/* A Partial(sum) placement; Replicate. */
static inline dt_placement dt__rl_psum(void)
{
    return dt_partial(DT_REDUCE_OP_SUM);
}
static inline bool dt__rl_is_psum(dt_placement p)
{
    return p.kind == DT_PLACEMENT_PARTIAL && p.op == DT_REDUCE_OP_SUM;
}
static inline bool dt__rl_is_r(dt_placement p)
{
    return p.kind == DT_PLACEMENT_REPLICATE;
}

/* "S(0),R" of @p pl into buf (for log lines); returns buf. */
const char *dt__rl_fmt(int n, const dt_placement *pl, char *buf, size_t len);

/*
 * The rule of last resort: every input replicated (a warning naming the op
 * on the "redist" log), the local op on the full tensors, a Replicate result.
 * @p run computes the local op from the replicated locals.
 */
typedef dt_status (*dt__rl_local_fn)(void *ctx, dt_tensor *const *locals, dt_tensor **out);
dt_status dt__rl_fallback(const char *op, int n, dt_tensor *const *xs, dt__rl_local_fn run,
                          void *ctx, dt_tensor **out);

/* ------------------------------------------------------------ entries (one file per family) */

/* rules_elementwise.c */
dt_status dt__rl_binary(dt_binary_op op, dt_tensor *a, dt_tensor *b, dt_tensor **out);
dt_status dt__rl_unary(dt_unary_op op, dt_tensor *x, double alpha, dt_tensor **out);
dt_status dt__rl_masked_fill(dt_tensor *x, dt_tensor *mask, double value, dt_tensor **out);
/* rules_matmul.c */
dt_status dt__rl_matmul(dt_tensor *a, dt_tensor *b, bool ta, bool tb, dt_tensor **out);
dt_status dt__rl_linear(dt_tensor *x, dt_tensor *w, dt_tensor *bias, dt_tensor **out);
/* rules_norm.c */
dt_status dt__rl_softmax(dt_dist_softmax_kind kind, dt_tensor *x, int dim, double scale,
                         dt_tensor **out);
dt_status dt__rl_layer_norm(dt_tensor *x, dt_tensor *w, dt_tensor *b, double eps, dt_tensor **out);
dt_status dt__rl_reduce(dt_reduce_kind kind, dt_tensor *x, int dim, bool keepdim, dt_tensor **out);
dt_status dt__rl_sum_all(dt_tensor *x, dt_tensor **out);
/* rules_embedding.c */
dt_status dt__rl_embedding(dt_tensor *weight, dt_tensor *ids, dt_tensor **out);
/* rules_loss.c */
dt_status dt__rl_cross_entropy(dt_tensor *logits, dt_tensor *targets, int64_t ignore_index,
                               dt_tensor **out);
/* rules_grad.c: distributed gradients in flight (see autograd/dist_hooks.h) */
dt_status dt__rl_grad_add(dt_tensor *a, dt_tensor *b, dt_tensor **out);
dt_status dt__rl_grad_materialize(dt_tensor *g, dt_tensor **out);
/*
 * For a backward that accepts distributed gradients (node->accepts_dist_grad,
 * autograd/node.h): the local shard of pending gradient @p g laid out as
 * @p dst (same mesh/shape), in one plan: a pending Partial(sum) going to a
 * Shard is ONE reduce-scatter (what the sequence-parallel all-gather's
 * backward wants) instead of an all-reduce then a slice. Collective.
 */
dt_status dt__rl_grad_redistribute(dt_tensor *g, const dt_spec *dst, dt_tensor **out);
/* rules_shape.c */
dt_status dt__rl_reshape(dt_tensor *x, int ndim, const int64_t *shape, dt_tensor **out);
dt_status dt__rl_permute(dt_tensor *x, const int *perm, dt_tensor **out);
dt_status dt__rl_narrow(dt_tensor *x, int dim, int64_t start, int64_t length, dt_tensor **out);
dt_status dt__rl_contiguous(dt_tensor *x, dt_tensor **out);
dt_status dt__rl_concat(int n, dt_tensor *const *xs, int dim, dt_tensor **out);
dt_status dt__rl_split(dt_tensor *x, int dim, int n, const int64_t *sizes, dt_tensor **outs);

#endif
