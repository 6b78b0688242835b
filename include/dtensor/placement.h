/*
 * dtensor/placement.h - placements, distributed tensor specs, distributed
 * tensors and redistribute (PyTorch's Shard/Replicate/Partial, DTensorSpec,
 * distribute_tensor, DTensor.from_local/to_local/full_tensor, redistribute).
 *
 * A placement says how a tensor lives along one mesh dim:
 *   Shard(d)     each rank of the dim holds a torch.chunk piece of tensor dim d
 *                (chunk size ceil(n/k); trailing shards may be smaller or empty);
 *   Replicate    each rank holds the whole (logical) tensor;
 *   Partial(op)  each rank holds a tensor of the full logical shape and the
 *                value is the reduction (sum, avg, max, min) of them over the dim.
 * A spec = mesh + one placement per mesh dim + global shape + dtype. When two
 * mesh dims shard the same tensor dim, the first mesh dim splits it and the
 * next splits each piece again (nested sharding).
 *
 * Text form, used by messages, plans and the CLI: "S(0)", "S(-1)", "R",
 * "P(sum)" ("P" alone means sum); a list is written "S(0),R" (commas and
 * spaces between items are optional: "S(0)R" parses too).
 *
 * A distributed tensor is a dt_tensor handle whose shape is the global shape,
 * with no storage of its own, holding its spec and this rank's shard (the
 * "local" tensor). Autograd runs on the local tensors: the gradient of a
 * distributed tensor's local shard is the local shard of its global gradient
 * laid out with the tensor's placements, Partial read as Replicate (PyTorch's
 * convention for the gradient of a Partial). dt_redistribute records a node
 * whose backward redistributes the gradient back.
 *
 * Thread safety: specs are immutable and may be shared; functions that
 * communicate follow comm.h (one thread at a time per mesh).
 */
#ifndef DTENSOR_PLACEMENT_H
#define DTENSOR_PLACEMENT_H

#include "dtensor/mesh.h"
#include "dtensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ placements */

typedef enum dt_placement_kind {
    DT_PLACEMENT_REPLICATE = 0,
    DT_PLACEMENT_SHARD,
    DT_PLACEMENT_PARTIAL
} dt_placement_kind;

/** A placement is a value: compare with dt_placement_equal, copy freely. */
typedef struct dt_placement {
    dt_placement_kind kind;
    int dim;          /* Shard: tensor dim (may be negative until normalised) */
    dt_reduce_op op;  /* Partial: sum, avg, max or min */
    int strided;      /* Shard: 1 for a strided shard (dt_strided_shard[_split]), else 0 */
    int split_factor; /* Shard: k >= 2 for dt_strided_shard_split(dim, k), else 0 */
} dt_placement;

/** The largest split factor of dt_strided_shard_split. */
#define DT_PLACEMENT_MAX_SPLIT 16

DT_API dt_placement dt_shard(int dim);
/**
 * A strided shard of tensor dim @p dim, text "_S(dim)" (PyTorch's
 * `_StridedShard`). The mesh dims that shard one tensor dim normally nest in
 * mesh-dim order (the first splits the dim, each later one splits the piece);
 * strided shards split after every plain Shard of that dim, in mesh-dim order
 * among themselves. So on a mesh (dp, tp), [_S(0), S(0)] is "tp shards dim 0,
 * then dp shards each tp piece": what fully sharded data parallelism holds of a
 * parameter that tensor parallelism already sharded on that dim. Each rank's
 * shard is still one box of the tensor (checkpoints store it as such).
 * Sharding rules read a strided shard as Shard(dim), moving it first.
 */
DT_API dt_placement dt_strided_shard(int dim);
/**
 * A strided shard with a split factor, text "_S(dim,sf=k)" (PyTorch's
 * `_StridedShard(dim, split_factor=k)`): tensor dim @p dim is cut into k*n
 * equal pieces (n = the mesh dim's size) and coordinate c holds pieces
 * c, c+n, ..., c+(k-1)n, concatenated in that order. Read the dim as k equal
 * parts (k = 3: the q, k and v rows of a fused attention projection): each
 * rank holds its torch.chunk of every part, so its shard is k boxes of the
 * tensor (dt_spec_local_boxes). As in PyTorch the split must be even: a spec
 * (dt_spec_create) requires n*k to divide the dim, no other mesh dim to shard
 * that dim, and at most one such placement. @p split_factor 0 or 1 gives
 * dt_strided_shard(dim); above DT_PLACEMENT_MAX_SPLIT a spec refuses it.
 */
DT_API dt_placement dt_strided_shard_split(int dim, int split_factor);
DT_API dt_placement dt_replicate(void);
DT_API dt_placement dt_partial(dt_reduce_op op);

/** A Shard (strided or not) of tensor dim @p dim; dim < 0: of any dim. */
DT_API bool dt_placement_is_shard(dt_placement p, int dim);
/** Same kind, dim, stridedness and split factor (Shard) or op (Partial). Normalise first to compare
 * S(-1) with S(1). */
DT_API bool dt_placement_equal(dt_placement a, dt_placement b);
/**
 * @p p with a negative shard dim wrapped for a tensor of @p ndim dims.
 * DT_ERR_INVALID_ARG naming the placement when the dim is outside [-ndim, ndim)
 * or a Partial op is not sum/avg/max/min.
 */
DT_API dt_status dt_placement_normalize(dt_placement p, int ndim, dt_placement *out);

/** Write "S(0)" / "_S(0)" / "_S(0,sf=3)" / "R" / "P(sum)" into @p buf; returns the length it needed
 * (snprintf rule). */
DT_API int dt_placement_format(dt_placement p, char *buf, size_t len);
/** Write @p n placements joined by @p sep ("," or "") ; snprintf rule. */
DT_API int dt_placements_format(int n, const dt_placement *pl, const char *sep, char *buf,
                                size_t len);
/** Parse one placement ("S(1)", "Shard(-1)", "_S(0)", "StridedShard(0)", "_S(0,sf=3)",
 * "StridedShard(0,sf=3)", "R", "Replicate", "P", "P(max)", "Partial(avg)"). */
DT_API dt_status dt_placement_parse(const char *text, dt_placement *out);
/**
 * Parse a list ("S(0),R", "S(0) R", "S(0)R") of at most @p max placements into
 * @p out, their number into @p n. DT_ERR_INVALID_ARG names the bad token and
 * its position ("item 2 'X' of \"S(0),X\"").
 */
DT_API dt_status dt_placements_parse(const char *text, int max, dt_placement *out, int *n);

/* ------------------------------------------------------------ shard math */

/**
 * torch.chunk rule: a dim of @p size split in @p num_chunks; chunk @p index
 * has *local_size elements starting at *offset. c = ceil(size/k); chunk i is
 * [min(size, i*c), min(size, (i+1)*c)) (so size 5 over 4: 2, 2, 1, 0; an
 * empty chunk's offset is size). No errors for valid input (size >= 0,
 * 0 <= index < num_chunks); returns 0/0 otherwise.
 */
DT_API void dt_shard_chunk(int64_t size, int num_chunks, int index, int64_t *local_size,
                           int64_t *offset);
/** ceil(size / num_chunks): every chunk padded to this size makes an even collective. */
DT_API int64_t dt_shard_padded_size(int64_t size, int num_chunks);

/**
 * Local shape and global offset of the shard at mesh coordinate @p coord of a
 * tensor of @p ndim dims @p shape placed with @p pl (mesh_ndim entries,
 * normalised) over a mesh of @p mesh_shape. Shards of one tensor dim nest in
 * mesh-dim order, plain ones first, then strided ones (dt_strided_shard).
 * @p global_offset may be NULL; for a split-factor shard it is the offset of
 * the first of its boxes (dt_spec_local_boxes gives them all). DT_ERR_INVALID_ARG for a bad shard
 * dim or coordinate.
 */
DT_API dt_status dt_shard_local_shape(int ndim, const int64_t *shape, int mesh_ndim,
                                      const int *mesh_shape, const dt_placement *pl,
                                      const int *coord, int64_t *local_shape,
                                      int64_t *global_offset);

/* ------------------------------------------------------------ specs */

typedef struct dt_spec dt_spec; /* refcounted, immutable */

/**
 * A spec for a tensor of @p ndim dims @p shape and @p dtype placed on @p mesh
 * (retained) with @p n placements. Shard dims are normalised.
 * DT_ERR_INVALID_ARG naming the value: n != mesh ndim, a shard dim out of
 * range, a Partial op other than sum/avg/max/min, two different Partial ops,
 * a split-factor shard that is not even, not alone on its tensor dim, above
 * DT_PLACEMENT_MAX_SPLIT or not the only one (dt_strided_shard_split).
 */
DT_API dt_status dt_spec_create(dt_mesh *mesh, int n, const dt_placement *pl, int ndim,
                                const int64_t *shape, dt_dtype dtype, dt_spec **out);
DT_API dt_spec *dt_spec_retain(dt_spec *s);
DT_API void dt_spec_release(dt_spec *s);

DT_API dt_mesh *dt_spec_mesh(const dt_spec *s);                  /* borrowed */
DT_API const dt_placement *dt_spec_placements(const dt_spec *s); /* mesh ndim entries */
DT_API int dt_spec_ndim(const dt_spec *s);
DT_API const int64_t *dt_spec_shape(const dt_spec *s); /* global shape */
DT_API dt_dtype dt_spec_dtype(const dt_spec *s);
/** Local shape and global offset (either may be NULL) at @p coord (NULL: this rank's). */
DT_API dt_status dt_spec_local_shape(const dt_spec *s, const int *coord, int64_t *local_shape,
                                     int64_t *global_offset);
/** One box of a shard: where it lies in the global tensor and in the local one. */
typedef struct dt_box {
    int64_t offset[DT_MAX_DIMS];       /* in the global tensor */
    int64_t local_offset[DT_MAX_DIMS]; /* in the local shard */
    int64_t shape[DT_MAX_DIMS];
} dt_box;

/**
 * The boxes the shard at @p coord (NULL: this rank's) is made of, at most
 * @p max into @p boxes, their number into *n: one box (the local shape at
 * its global offset) unless a placement has a split factor k
 * (dt_strided_shard_split), then k boxes along its dim in local order. Boxes
 * may be empty. Not collective. Errors: DT_ERR_INVALID_ARG for NULL
 * arguments, a bad coordinate or @p max smaller than the count.
 */
DT_API dt_status dt_spec_local_boxes(const dt_spec *s, const int *coord, dt_box *boxes, int max,
                                     int *n);
/** Number of distinct shards: product of the mesh dims that Shard. */
DT_API int dt_spec_num_shards(const dt_spec *s);
/** Same mesh (dt_mesh_equal), placements, shape and dtype. */
DT_API bool dt_spec_equal(const dt_spec *a, const dt_spec *b);
/** "S(0),R [7, 5] f32 on mesh 2x2"; snprintf rule. */
DT_API int dt_spec_format(const dt_spec *s, char *buf, size_t len);

/* ------------------------------------------------------------ plans */

/**
 * Explain how dt_redistribute turns @p src into @p dst (same mesh) without
 * communicating: the chain of placement lists ("S(0)R -> RR -> RS(1)") then one
 * line per step with the mesh dim, the transition, the collective, the logical
 * shape it works on and the bytes this rank receives in it (ideal algorithm;
 * all-reduce counted as the ring's 2(n-1)/n). snprintf rule on @p buf.
 * DT_ERR_INVALID_ARG when the meshes, shapes or dtypes differ.
 */
DT_API dt_status dt_redistribute_explain(const dt_spec *src, const dt_spec *dst, char *buf,
                                         size_t len);

/* ------------------------------------------------------------ distributed tensors */

/**
 * Distribute @p full (the same full tensor on every rank of @p mesh) with @p n
 * placements: each rank keeps only its shard (a new, contiguous tensor).
 * Replicate keeps the whole; Partial(sum) keeps it on the rank at coordinate 0
 * of that dim and zeros elsewhere, Partial(avg|max|min) keeps it everywhere.
 * The result is a new leaf (no autograd history). Errors as dt_spec_create.
 * Not collective: nothing is communicated (every rank already has the data).
 */
DT_API dt_status dt_distribute(dt_tensor *full, dt_mesh *mesh, int n, const dt_placement *pl,
                               dt_tensor **out);
/**
 * Collective over @p mesh: like dt_distribute, but only mesh rank @p src_rank
 * passes the full tensor (the others pass NULL; their argument is ignored):
 * shape and dtype are broadcast, each rank receives only its shard (scatter
 * along sharded mesh dims, broadcast along the others).
 */
DT_API dt_status dt_distribute_from(dt_tensor *full, int src_rank, dt_mesh *mesh, int n,
                                    const dt_placement *pl, dt_tensor **out);
/**
 * Wrap this rank's @p local shard (retained, not copied; its autograd history
 * is kept, so gradients flow to it) as a distributed tensor.
 * With @p global_shape (local's ndim entries) no communication happens: a rank
 * whose local shape differs from the one the spec gives fails alone.
 * With @p global_shape NULL it is collective over @p mesh: local shapes and
 * dtypes are exchanged, the global shape inferred (sum of the shards along
 * sharded dims) and checked against torch.chunk; any disagreement fails on
 * every rank with the same message naming the first bad rank.
 */
DT_API dt_status dt_from_local(dt_tensor *local, dt_mesh *mesh, int n, const dt_placement *pl,
                               const int64_t *global_shape, dt_tensor **out);
/** This rank's shard of distributed @p t (with its autograd history). Borrowed; NULL if not
 * distributed. */
DT_API dt_tensor *dt_to_local(dt_tensor *t);
/** The spec of distributed @p t (borrowed), NULL for a local tensor. */
DT_API const dt_spec *dt_tensor_spec(const dt_tensor *t);
/** Shortcuts: the mesh / placements of distributed @p t (borrowed; NULL if local). */
DT_API dt_mesh *dt_tensor_mesh(const dt_tensor *t);
DT_API const dt_placement *dt_tensor_placements(const dt_tensor *t);

/**
 * Collective over @p t's mesh: a new distributed tensor with the same global
 * value as @p t, placed with @p n placements @p pl (one collective per plan
 * step, see dt_redistribute_explain; nothing when the specs are equal: the
 * result then shares @p t's shard). Differentiable: the gradient is
 * redistributed back to @p t's placements (Partial read as Replicate).
 */
DT_API dt_status dt_redistribute(dt_tensor *t, int n, const dt_placement *pl, dt_tensor **out);
/** Same to an explicit spec; DT_ERR_INVALID_ARG when its mesh, shape or dtype differ from @p t's.
 */
DT_API dt_status dt_redistribute_to(dt_tensor *t, const dt_spec *dst, dt_tensor **out);
/**
 * Collective over @p t's mesh: the full global tensor on every rank (a local
 * tensor; redistribute to all-Replicate, then the shard). Differentiable.
 */
DT_API dt_status dt_full_tensor(dt_tensor *t, dt_tensor **out);

#ifdef __cplusplus
}
#endif
#endif /* DTENSOR_PLACEMENT_H */
