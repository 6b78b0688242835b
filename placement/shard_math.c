/* Sharding arithmetic: torch.chunk sizes and offsets, nested over mesh dims. */
#include "core/error.h"
#include "placement/placement_impl.h"

void dt_shard_chunk(int64_t size, int num_chunks, int index, int64_t *local_size, int64_t *offset)
{
    int64_t sz = 0, off = 0;
    if (size >= 0 && num_chunks > 0 && index >= 0 && index < num_chunks) {
        int64_t c = (size + num_chunks - 1) / num_chunks;
        int64_t lo = c * index < size ? c * index : size;
        int64_t hi = c * (index + 1) < size ? c * (index + 1) : size;
        sz = hi - lo;
        off = lo;
    }
    if (local_size != NULL)
        *local_size = sz;
    if (offset != NULL)
        *offset = off;
}

int64_t dt_shard_padded_size(int64_t size, int num_chunks)
{
    return num_chunks > 0 && size > 0 ? (size + num_chunks - 1) / num_chunks : 0;
}

void dt__local_shape(int ndim, const int64_t *shape, int mesh_ndim, const int *mesh_shape,
                     const dt_placement *pl, const int *coord, int64_t *local_shape,
                     int64_t *offset)
{
    int64_t ls[DT_MAX_DIMS], off[DT_MAX_DIMS];
    for (int d = 0; d < ndim; d++) {
        ls[d] = shape[d];
        off[d] = 0;
    }
    /* mesh dims in order: the first splits, each later one splits the piece;
     * strided shards split after every plain one (pass 1) */
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < mesh_ndim; k++) {
            if (pl[k].kind != DT_PLACEMENT_SHARD || (pl[k].strided != 0) != (pass == 1))
                continue;
            int d = pl[k].dim;
            int64_t sz, o;
            dt_shard_chunk(ls[d], mesh_shape[k], coord[k], &sz, &o);
            if (pl[k].split_factor > 1) /* even (dt_spec_create): the first of its boxes */
                o = coord[k] * (ls[d] / ((int64_t)mesh_shape[k] * pl[k].split_factor));
            ls[d] = sz;
            off[d] += o;
        }
    }
    for (int d = 0; d < ndim; d++) {
        if (local_shape != NULL)
            local_shape[d] = ls[d];
        if (offset != NULL)
            offset[d] = off[d];
    }
}

dt_status dt_shard_local_shape(int ndim, const int64_t *shape, int mesh_ndim, const int *mesh_shape,
                               const dt_placement *pl, const int *coord, int64_t *local_shape,
                               int64_t *global_offset)
{
    DT_ARG_NOT_NULL(mesh_shape);
    DT_ARG_NOT_NULL(pl);
    DT_ARG_NOT_NULL(coord);
    DT_ARG_NOT_NULL(local_shape);
    if (ndim < 0 || ndim > DT_MAX_DIMS || (ndim > 0 && shape == NULL))
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_shard_local_shape: bad tensor ndim %d", ndim);
    if (mesh_ndim < 1 || mesh_ndim > DT_MESH_MAX_DIMS)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_shard_local_shape: mesh ndim %d is outside 1..%d",
                      mesh_ndim, DT_MESH_MAX_DIMS);
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0)
            return DT_ERR(DT_ERR_INVALID_ARG, "dt_shard_local_shape: dim %d has size %lld", d,
                          (long long)shape[d]);
    for (int k = 0; k < mesh_ndim; k++) {
        if (mesh_shape[k] < 1 || coord[k] < 0 || coord[k] >= mesh_shape[k])
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_shard_local_shape: coordinate %d is outside mesh dim %d of size %d",
                          coord[k], k, mesh_shape[k]);
        if (pl[k].kind == DT_PLACEMENT_SHARD && (pl[k].dim < 0 || pl[k].dim >= ndim))
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_shard_local_shape: mesh dim %d: S(%d) is out of range for a tensor "
                          "of %d dims (normalise it first)",
                          k, pl[k].dim, ndim);
    }
    dt__local_shape(ndim, shape, mesh_ndim, mesh_shape, pl, coord, local_shape, global_offset);
    return DT_OK;
}
