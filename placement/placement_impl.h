/*
 * Internals of placement/: the spec object behind a distributed tensor, the
 * redistribute plan, and helpers shared by the executor and dtensor.c.
 * Not installed.
 */
#ifndef DT_PLACEMENT_IMPL_H
#define DT_PLACEMENT_IMPL_H

#include <stdatomic.h>

#include "core/tensor_impl.h"
#include "dtensor/placement.h"
#include "mesh/mesh_impl.h"

/* The spec; a distributed tensor's `dist` points at one (owned reference). */
struct dt_spec {
    dt_refobj base; /* must stay first: core releases tensor->dist through it */
    atomic_int refcount;
    dt_mesh *mesh; /* retained */
    int mesh_ndim;
    dt_placement pl[DT_MESH_MAX_DIMS]; /* normalised */
    int ndim;
    int64_t shape[DT_MAX_DIMS];
    dt_dtype dtype;
    /* The dtype its Partial sums travel and are summed in: bf16 for a matmul
     * or linear result made under autocast (redistribute_wire.c), else dtype.
     * Not part of the spec's identity (dt_spec_equal). */
    dt_dtype wire;
};

/* ------------------------------------------------------------ plans */

typedef enum dt__step_kind {
    DT__STEP_ALLGATHER,      /* S(d) -> R */
    DT__STEP_ALLREDUCE,      /* P -> R */
    DT__STEP_REDUCE_SCATTER, /* P -> S(d) */
    DT__STEP_ALLTOALL,       /* S(a) -> S(b) */
    DT__STEP_SLICE,          /* R -> S(d), local */
    DT__STEP_PARTITION       /* R -> P(op), local */
} dt__step_kind;

typedef struct dt__step {
    int mesh_dim;
    dt_placement src, dst;
    dt__step_kind kind;
    int64_t logical_shape[DT_MAX_DIMS]; /* the tensor this mesh dim's group works on */
    int64_t bytes;                      /* received by this rank (ideal algorithm) */
} dt__step;

#define DT__PLAN_MAX_STEPS (4 * DT_MESH_MAX_DIMS)

typedef struct dt__plan {
    int n_steps;
    int mesh_ndim, ndim;
    dt__step steps[DT__PLAN_MAX_STEPS];
    dt_placement states[DT__PLAN_MAX_STEPS + 1]
                       [DT_MESH_MAX_DIMS]; /* before each step, after last */
} dt__plan;

/* Validate that src and dst can be redistributed (same mesh, shape, dtype). */
dt_status dt__redist_check(const char *fn, const dt_spec *src, const dt_spec *dst);
/* Plan src -> dst for this rank (cached on the mesh). @p backward: Partial
 * targets are read as Replicate (the gradient convention). */
dt_status dt__redist_plan(const dt_spec *src, const dt_spec *dst, dt__plan *out);
/* "S(0)R -> RR -> RS(1)" then one line per step; snprintf rule. */
int dt__plan_format(const dt__plan *plan, const dt_mesh *mesh, dt_dtype dtype, char *buf,
                    size_t len);
const char *dt__step_kind_name(dt__step_kind k);

/* The dtype step @p st of a tensor of spec @p src sends and reduces in:
 * src->wire for the sum of a Partial, else src->dtype (redistribute_wire.c). */
dt_dtype dt__redist_wire_dtype(const dt__step *st, const dt_spec *src);

/* Run @p plan on this rank's shard @p local of a tensor of spec @p src: the new
 * shard into *out (may be @p local itself, retained). No autograd. Collective. */
dt_status dt__redist_exec(const dt__plan *plan, const dt_spec *src, dt_tensor *local,
                          dt_tensor **out);
/* Plan + exec with autograd recording; the result is a local shard of dst. */
dt_status dt__redist_local(const dt_spec *src, const dt_spec *dst, dt_tensor *local,
                           dt_tensor **out);

/* ------------------------------------------------------------ helpers */

/* A distributed handle over @p spec (retained) and @p local (retained). The
 * only maker of distributed tensors, so it installs the sharding rules first. */
dt_status dt__dist_wrap(dt_spec *spec, dt_tensor *local, dt_tensor **out);
/* Offer the sharding rules to the ops layer and the gradient hooks to
 * autograd (rules/rules_table.c): the lower layers cannot call up for them.
 * Idempotent; a table already installed (a test's) is kept. */
void dt__dist_rules_install(void);
/* @p spec with every Partial replaced by Replicate (new reference). */
dt_status dt__spec_normalize_grad(const dt_spec *spec, dt_spec **out);
/* Same mesh/shape/dtype as @p like, placements @p pl (n = mesh ndim). */
dt_status dt__spec_like(const dt_spec *like, int n, const dt_placement *pl, dt_spec **out);
/* @p pl (n entries) with every strided shard replaced by Replicate into
 * @p out (may be @p pl); whether there was one. The plain layout a strided
 * one is sliced from, locally (redistribute_plan.c, dt_distribute_from). */
bool dt__placements_unstride(int n, const dt_placement *pl, dt_placement *out);
/* Split-factor shards (split_layout.c, dt_strided_shard_split). */
/* The mesh dim whose placement in @p pl (n entries) has a split factor, or -1. */
int dt__split_mesh_dim(int n, const dt_placement *pl);
/* DT_ERR_INVALID_ARG unless every split-factor shard of normalised @p pl is
 * even, alone on its tensor dim and the only one (dt_spec_create). */
dt_status dt__split_check(const dt_mesh *mesh, int n, const dt_placement *pl, int ndim,
                          const int64_t *shape);
/* @p y holds the n shards of mesh dim coordinates 0..n-1 concatenated along
 * dim @p d (what an all-gather gives), each sf runs: *out the tensor in global
 * order (new, contiguous). */
dt_status dt__split_gathered(dt_tensor *y, int d, int n, int sf, dt_tensor **out);
/* Coordinate @p me's shard of @p x along dim @p d under _S(d,sf) over n: its
 * sf runs, concatenated (new, contiguous). */
dt_status dt__split_slice(dt_tensor *x, int d, int n, int me, int sf, dt_tensor **out);
/* Local shape at @p coord given placements (no validation: spec already valid). */
void dt__local_shape(int ndim, const int64_t *shape, int mesh_ndim, const int *mesh_shape,
                     const dt_placement *pl, const int *coord, int64_t *local_shape,
                     int64_t *offset);
/* Pack the n torch.chunk blocks of @p x along dim d one after another into a
 * new flat buffer; counts[q] = elements of block q (0 for block @p skip,
 * which is left out; -1 = none). */
dt_status dt__pack_chunks(dt_tensor *x, int d, int n, int skip, size_t *counts, dt_tensor **out);
/* True when a Partial(sum) mesh dim has this rank off coordinate 0: its shard
 * of a freshly distributed tensor is zeros (the value lives on coordinate 0). */
bool dt__partial_zero(const dt_spec *s);
/* Check that @p t is a distributed tensor (named @p what for fn's message). */
dt_status dt__check_dist(const char *fn, const char *what, const dt_tensor *t);

#endif
