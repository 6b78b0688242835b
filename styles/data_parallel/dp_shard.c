/*
 * Each parameter's dp shard: collecting the parameters with their tp
 * layout, the dim the dp pieces split (a strided shard where tp already
 * splits every dim), the pieces, the offloaded master copies, and the
 * distributed shard that replaces the slot's tensor.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "mesh/mesh_impl.h"
#include "nn/nn_internal.h"
#include "styles/data_parallel/dp_impl.h"

typedef struct collect_ctx {
    dp_state *s;
    int cap;
} collect_ctx;

static dt_status collect(const char *fqn, dt_module *owner, const char *name, dt_tensor *t,
                         void *user)
{
    collect_ctx *c = user;
    dp_state *s = c->s;
    if (dt_tensor_dtype(t) != DT_DTYPE_F32)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_fully_shard: parameter '%s' is %s (f32 only)", fqn,
                      dt_dtype_name(dt_tensor_dtype(t)));
    for (int j = 0; j < s->n_params; j++)
        if (s->p[j].slot == t)
            return DT_ERR(DT_ERR_UNSUPPORTED,
                          "dt_fully_shard: parameter '%s' is the same tensor as '%s' (shared "
                          "parameters are not supported)",
                          fqn, s->p[j].fqn);
    if (s->n_params == c->cap) {
        int cap = c->cap > 0 ? 2 * c->cap : 32;
        dp_param *v = realloc(s->p, (size_t)cap * sizeof(*v));
        if (v == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "dt_fully_shard: no memory for %d parameters", cap);
        s->p = v, c->cap = cap;
    }
    dp_param *p = &s->p[s->n_params++];
    memset(p, 0, sizeof(*p));
    p->owner = owner;
    p->slot = dt_tensor_retain(t); /* for now: the parameter as it is */
    p->name = strdup(name);
    p->fqn = strdup(fqn);
    p->k = -1;
    if (p->name == NULL || p->fqn == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_fully_shard: no memory for '%s'", fqn);
    if (dt_tensor_is_distributed(t))
        p->tp_spec = dt_spec_retain((dt_spec *)dt_tensor_spec(t));
    dt_tensor *loc = dt__dp_local(t);
    p->ndim = loc->ndim;
    memcpy(p->lshape, loc->shape, sizeof(p->lshape));
    return DT_OK;
}

/* Does a tp placement of @p p shard its tensor dim @p d? */
static bool tp_shards(const dp_param *p, int d)
{
    if (p->tp_spec == NULL)
        return false;
    const dt_placement *pl = dt_spec_placements(p->tp_spec);
    for (int j = 0; j < dt_mesh_ndim(dt_spec_mesh(p->tp_spec)); j++)
        if (dt_placement_is_shard(pl[j], d))
            return true;
    return false;
}

/* Placements of param @p p on the whole mesh: its tp placements by dim name,
 * Shard(k) or Replicate on dp, Replicate on dims it is not distributed over. */
static dt_status full_placements(const dp_state *s, const dp_param *p, dt_placement *pl)
{
    int nd = dt_mesh_ndim(s->mesh);
    for (int i = 0; i < nd; i++)
        pl[i] = dt_replicate();
    /* where tp shards dim k too, dp splits tp's pieces: a strided shard */
    pl[s->dp_dim] = p->k < 0             ? dt_replicate()
                    : tp_shards(p, p->k) ? dt_strided_shard(p->k)
                                         : dt_shard(p->k);
    if (p->tp_spec == NULL)
        return DT_OK;
    dt_mesh *m2 = dt_spec_mesh(p->tp_spec);
    for (int j = 0; j < dt_mesh_ndim(m2); j++) {
        const char *nm = dt_mesh_dim_name(m2, j);
        int d = -1;
        if (nm == NULL || dt_mesh_dim_index(s->mesh, nm, &d) != DT_OK || d == s->dp_dim ||
            dt_mesh_dim_size(s->mesh, d) != dt_mesh_dim_size(m2, j))
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_fully_shard: parameter '%s' is distributed over mesh dim '%s', "
                          "which is not a dim of the data-parallel mesh other than '%s'",
                          p->fqn, nm != NULL ? nm : "(unnamed)",
                          dt_mesh_dim_name(s->mesh, s->dp_dim));
        pl[d] = dt_spec_placements(p->tp_spec)[j];
    }
    return DT_OK;
}

/* The dim the dp shards split: the first that no tp placement shards, else
 * dim 0 (a strided shard: dp splits each tp piece, PyTorch's _StridedShard);
 * -1 for a 0-dim parameter, which stays replicated over dp. */
static int pick_dim(const dp_param *p)
{
    for (int d = 0; d < p->ndim; d++)
        if (!tp_shards(p, d))
            return d;
    return p->ndim > 0 ? 0 : -1;
}

/* Compute p's pieces and (ZeRO) make its shard: on success p->slot is the
 * distributed shard on the whole mesh and p->gathered allocated. */
/* The dp pieces of dim p->k over @p R ranks (torch.chunk): their lengths,
 * offsets, element counts and (for k == 0) displacements, and the elements
 * before / after dim k. */
static dt_status piece_layout(dp_param *p, int R)
{
    p->klen = calloc((size_t)R, sizeof(int64_t));
    p->koff = calloc((size_t)R, sizeof(int64_t));
    p->counts = calloc((size_t)R, sizeof(size_t));
    p->displs = calloc((size_t)R, sizeof(size_t));
    if (p->klen == NULL || p->koff == NULL || p->counts == NULL || p->displs == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_fully_shard: no memory for '%s'", p->fqn);
    p->outer = p->inner = 1;
    for (int d = 0; d < p->k; d++)
        p->outer *= p->lshape[d];
    for (int d = p->k + 1; d < p->ndim; d++)
        p->inner *= p->lshape[d];
    for (int r = 0; r < R; r++) {
        dt_shard_chunk(p->lshape[p->k], R, r, &p->klen[r], &p->koff[r]);
        p->counts[r] = (size_t)(p->outer * p->klen[r] * p->inner);
        p->displs[r] = (size_t)(p->outer * p->koff[r] * p->inner); /* used for k == 0 */
    }
    return DT_OK;
}

/* Offload of a parameter replicated over dp: its slot becomes a host copy
 * (the master the optimizer updates), p->gathered a device copy refreshed
 * from it before each use. */
static dt_status offload_replicated(dp_state *s, dp_param *p, const dt_placement *pl,
                                    const int64_t *gshape)
{
    dt_tensor *loc = dt__dp_local(p->slot), *host = NULL, *shard = NULL;
    dt_mem_category prev = dt_memory_set_default_category(DT_MEM_PARAMETER);
    dt_status st = dt_tensor_to_device(loc, dt_device_cpu(), &host);
    if (st == DT_OK)
        st = dt_tensor_clone(loc, &p->gathered);
    dt_memory_set_default_category(prev);
    if (st == DT_OK)
        st = dt_tensor_set_requires_grad(host, true);
    if (st == DT_OK)
        st = dt_from_local(host, s->mesh, dt_mesh_ndim(s->mesh), pl, gshape, &shard);
    dt_tensor_release(host);
    if (st == DT_OK && s->stage == DT_DP_ZERO3)
        st = dt__dp_storage_drop(p->gathered);
    if (st != DT_OK) {
        dt_tensor_release(shard);
        return st;
    }
    dt_tensor_release(p->slot);
    p->slot = shard;
    return DT_OK;
}

/* Whether cpu_offload applies: a ZeRO stage and parameters off the host. */
bool dt__dp_wants_offload(const dp_state *s, bool asked)
{
    if (!asked || s->stage == DT_DP_DDP)
        return false;
    for (int i = 0; i < s->n_params; i++)
        if (dt__dp_local(s->p[i].slot)->device.type != DT_DEVICE_CPU)
            return true;
    return false;
}

/* This rank's dp piece @p piece (on @p master) and the gathered tensor (on
 * loc's device): allocated, the piece cut out of @p loc; or, for a deferred
 * parameter, a deferred piece (dt_module_materialize fills it) and a gathered
 * tensor dropped until its first gather. */
static dt_status make_piece(dp_param *p, int rank, dt_tensor *loc, const int64_t *pshape,
                            dt_device master, dt_tensor **piece)
{
    if (dt_param_is_deferred(loc)) {
        DT_CHECK(dt__tensor_deferred(p->ndim, pshape, DT_DTYPE_F32, master, piece));
        DT_CHECK(
            dt__tensor_alloc_handle(p->ndim, p->lshape, DT_DTYPE_F32, loc->device, &p->gathered));
        return dt__storage_create(0, loc->device, &p->gathered->storage);
    }
    dt_mem_category prev = dt_memory_set_default_category(DT_MEM_PARAMETER);
    dt_status st = dt_tensor_empty(p->ndim, pshape, DT_DTYPE_F32, master, piece);
    if (st == DT_OK)
        st = dt_tensor_empty(p->ndim, p->lshape, DT_DTYPE_F32, loc->device, &p->gathered);
    dt_memory_set_default_category(prev);
    if (st == DT_OK && !dt_tensor_is_contiguous(loc))
        st = DT_ERR(DT_ERR_UNSUPPORTED, "dt_fully_shard: parameter '%s' is not contiguous", p->fqn);
    if (st == DT_OK)
        st = dt__dp_slice(p, rank, loc, *piece);
    return st;
}

dt_status dt__dp_shard_param(dp_state *s, dp_param *p)
{
    int nd = dt_mesh_ndim(s->mesh);
    dt_placement pl[DT_MESH_MAX_DIMS];
    p->k = s->stage == DT_DP_DDP ? -1 : pick_dim(p);
    DT_CHECK(full_placements(s, p, pl)); /* validates the mesh dims for DDP too */
    if (s->stage == DT_DP_DDP)
        return DT_OK;
    dt_tensor *loc = dt__dp_local(p->slot), *piece = NULL, *shard = NULL;
    const int64_t *gshape = p->tp_spec != NULL ? dt_spec_shape(p->tp_spec) : p->lshape;
    if (s->offload && dt_param_is_deferred(loc))
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "dt_fully_shard: '%s' is deferred: cpu_offload copies parameters, call "
                      "dt_module_materialize before dt_fully_shard",
                      p->fqn);
    if (p->k < 0 && !s->offload) { /* replicated over dp: the same local tensor everywhere */
        DT_CHECK(dt_from_local(loc, s->mesh, nd, pl, gshape, &shard));
        dt_tensor_release(p->slot);
        p->slot = shard;
        return DT_OK;
    }
    if (p->k < 0) /* offloaded: the host copy is the master, the device one computes */
        return offload_replicated(s, p, pl, gshape);
    DT_CHECK(piece_layout(p, s->dp_size));
    int64_t pshape[DT_MAX_DIMS];
    memcpy(pshape, p->lshape, sizeof(pshape));
    pshape[p->k] = p->klen[s->dp_rank];
    dt_device master = s->offload ? dt_device_cpu() : loc->device;
    dt_status st = make_piece(p, s->dp_rank, loc, pshape, master, &piece);
    if (st == DT_OK)
        st = dt_tensor_set_requires_grad(piece, true);
    if (st == DT_OK)
        st = dt_from_local(piece, s->mesh, nd, pl, gshape, &shard);
    dt_tensor_release(piece);
    DT_CHECK(st);
    if (s->stage == DT_DP_ZERO3)
        DT_CHECK_GOTO(dt__dp_storage_drop(p->gathered), st, err_shard);
    dt_tensor_release(p->slot);
    p->slot = shard;
    return DT_OK;
err_shard:
    dt_tensor_release(shard);
    return st;
}

dt_status dt__dp_collect_params(dp_state *s, dt_module *root)
{
    collect_ctx c = {.s = s};
    return dt_module_foreach_param(root, collect, &c);
}
