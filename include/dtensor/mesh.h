/*
 * dtensor/mesh.h - the n-dimensional device mesh.
 *
 * A mesh lays the ranks of the world (or of a slice of it) out on an
 * n-d grid (1 to DT_MESH_MAX_DIMS dims), row-major: on a 2x3 mesh, rank
 * 4 sits at coordinate (1, 1). Dims may be named ("dp", "tp"). Each mesh dim
 * has its own process group: the ranks that share this rank's coordinates on
 * every other dim, ordered by their coordinate on that dim (created once, by
 * splitting the world comm, when the mesh is created).
 *
 * A mesh made by dt_mesh_create_virtual has the same layout but no comms: it
 * serves planning, printing and unit tests without communication.
 *
 * Meshes are refcounted (distributed tensors hold a reference). A mesh is
 * read-only after creation except for its plan cache and its collective
 * counters, which are thread-safe; its comms follow comm.h's rule (one thread
 * at a time).
 */
#ifndef DTENSOR_MESH_H
#define DTENSOR_MESH_H

#include "dtensor/comm.h"
#include "dtensor/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DT_MESH_MAX_DIMS 4
#define DT_MESH_NAME_MAX 32 /* longest dim name, with its terminating NUL */

typedef struct dt_mesh dt_mesh;

/**
 * Collective over the world of @p rt: build a mesh of @p ndim dims of sizes
 * @p shape over all ranks of the world (the product must equal the world
 * size), with optional @p dim_names (NULL, or ndim non-empty distinct names;
 * a NULL entry leaves that dim unnamed). Splits the world comm once per dim.
 * Errors (DT_ERR_INVALID_ARG naming the value): ndim outside 1..4, a size
 * < 1, a product over INT_MAX (named as such, never wrapped), product !=
 * world size, duplicate or over-long names.
 * The caller releases the mesh with dt_mesh_release. Distributed tensors, specs
 * and sliced meshes hold references too: drop them all before
 * dt_runtime_destroy (the mesh's comms are split from the world comm).
 */
DT_API dt_status dt_mesh_create(dt_runtime *rt, int ndim, const int *shape,
                                const char *const *dim_names, dt_mesh **out);

/**
 * A mesh without comms, as seen by rank @p my_rank (0 .. product-1) of a world
 * of product(shape) ranks. Not collective; same validation as dt_mesh_create
 * (plus my_rank in range). dt_mesh_dim_comm() returns NULL on it, so it cannot
 * run collectives: use it to plan, explain and print.
 */
DT_API dt_status dt_mesh_create_virtual(int ndim, const int *shape, const char *const *dim_names,
                                        int my_rank, dt_mesh **out);

/** Add a reference; returns @p m (NULL-safe). */
DT_API dt_mesh *dt_mesh_retain(dt_mesh *m);
/** Drop a reference; at zero frees the mesh and the comms it owns. NULL-safe. Not collective. */
DT_API void dt_mesh_release(dt_mesh *m);

DT_API int dt_mesh_ndim(const dt_mesh *m);
/** Number of ranks in the mesh (product of its shape). */
DT_API int dt_mesh_size(const dt_mesh *m);
/** Size of mesh dim @p dim (negative counts from the end); -1 if out of range. */
DT_API int dt_mesh_dim_size(const dt_mesh *m, int dim);
/** Name of mesh dim @p dim, or NULL when unnamed or out of range. Borrowed. */
DT_API const char *dt_mesh_dim_name(const dt_mesh *m, int dim);
/** Index of the dim called @p name; DT_ERR_NOT_FOUND naming it and the mesh's names. */
DT_API dt_status dt_mesh_dim_index(const dt_mesh *m, const char *name, int *out);

/** This process's rank within the mesh (0 .. size-1). */
DT_API int dt_mesh_rank(const dt_mesh *m);
/** This process's coordinate (dt_mesh_ndim entries) into @p coord. */
DT_API void dt_mesh_coordinate(const dt_mesh *m, int *coord);
/** Coordinate of mesh rank @p rank; DT_ERR_INVALID_ARG for a rank outside the mesh. */
DT_API dt_status dt_mesh_rank_to_coord(const dt_mesh *m, int rank, int *coord);
/** Mesh rank at @p coord; DT_ERR_INVALID_ARG naming a coordinate outside the mesh. */
DT_API dt_status dt_mesh_coord_to_rank(const dt_mesh *m, const int *coord, int *rank);
/** World rank of mesh rank @p rank (they differ on a sliced mesh); -1 if out of range. */
DT_API int dt_mesh_world_rank(const dt_mesh *m, int rank);

/**
 * The process group of mesh dim @p dim: this rank and the ranks that share
 * its coordinates on all other dims, ranked by their coordinate on @p dim.
 * Borrowed (owned by the mesh). NULL on a virtual mesh or a bad dim.
 */
DT_API dt_comm *dt_mesh_dim_comm(const dt_mesh *m, int dim);

/**
 * The sub-mesh of the dims named in @p dim_names: a comma-separated list in
 * mesh order ("tp", or "dp,tp"). It holds this rank and every rank sharing its
 * coordinates on the other dims, and shares the parent's comms (no
 * communication). Errors: an unknown name (DT_ERR_NOT_FOUND), a repeated name
 * or names out of mesh order (DT_ERR_INVALID_ARG). Caller releases.
 */
DT_API dt_status dt_mesh_slice(dt_mesh *m, const char *dim_names, dt_mesh **out);
/** Same by dim indices (@p n ascending indices). */
DT_API dt_status dt_mesh_slice_dims(dt_mesh *m, int n, const int *dims, dt_mesh **out);

/** True when both meshes have the same shape and the same ranks in the same places. */
DT_API bool dt_mesh_equal(const dt_mesh *a, const dt_mesh *b);

/**
 * Format the mesh as a grid of world ranks:
 *     mesh 2x2 (dp, tp)
 *     [[0, 1],
 *      [2, 3]]
 * Truncates to @p len (always NUL-terminated); returns the length it needed.
 */
DT_API int dt_mesh_format(const dt_mesh *m, char *buf, size_t len);
DT_API void dt_mesh_print(const dt_mesh *m, FILE *f);

/* ------------------------------------------------------------ collective counters */

/** Kinds of collectives the placement layer issues on a mesh (only append). */
typedef enum dt_coll_kind {
    DT_COLL_ALLGATHER = 0,
    DT_COLL_ALLREDUCE,
    DT_COLL_REDUCE_SCATTER,
    DT_COLL_ALLTOALL,
    DT_COLL_BROADCAST, /* also scatter and the small exchanges of from_local */
    DT_COLL_KIND_COUNT
} dt_coll_kind;

/** "all-gather", "all-reduce", "reduce-scatter", "all-to-all", "broadcast". */
DT_API const char *dt_coll_kind_name(dt_coll_kind kind);

/**
 * What PyTorch's CommDebugMode shows: how many collectives of each kind the
 * placement layer ran on this mesh (and the meshes sliced from it, which share
 * the counters), and the bytes this rank received in them (the same figure
 * dt_redistribute_explain prints per step).
 */
typedef struct dt_coll_stats {
    int64_t count[DT_COLL_KIND_COUNT];
    int64_t bytes[DT_COLL_KIND_COUNT];
} dt_coll_stats;

DT_API void dt_mesh_coll_stats(const dt_mesh *m, dt_coll_stats *out);
DT_API void dt_mesh_coll_stats_reset(dt_mesh *m);
/** Total number of collectives counted (sum of count[]). */
DT_API int64_t dt_coll_stats_total(const dt_coll_stats *s);

#ifdef __cplusplus
}
#endif
#endif /* DTENSOR_MESH_H */
