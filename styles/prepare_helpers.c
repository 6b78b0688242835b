/*
 * PyTorch's tensor-parallel prepare helpers (make_input_replicate_1d, ...)
 * with their semantics and its 1-d mesh checks (_prepare_input_validate,
 * _prepare_output_validate); see styles.h.
 */
#include "core/error.h"
#include "dtensor/placement.h"
#include "dtensor/styles.h"

/* The 1-d mesh to use: @p mesh, else @p t's (distributed); names @p fn. */
static dt_status mesh_1d(const char *fn, dt_tensor *t, dt_mesh *mesh, dt_mesh **use)
{
    if (t == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: the tensor is NULL", fn);
    if (mesh == NULL && dt_tensor_is_distributed(t))
        mesh = dt_tensor_mesh(t);
    if (mesh == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: no mesh given, and a local tensor has none to take",
                      fn);
    if (dt_mesh_ndim(mesh) != 1)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: the mesh has %d dims, expected 1", fn,
                      dt_mesh_ndim(mesh));
    *use = mesh;
    return DT_OK;
}

/* An input in placement @p p: a local tensor wrapped as this rank's piece, a
 * distributed one redistributed. */
static dt_status input_as(const char *fn, dt_tensor *t, dt_mesh *mesh, dt_placement p,
                          dt_tensor **out)
{
    DT_ARG_NOT_NULL(out);
    DT_CHECK(mesh_1d(fn, t, mesh, &mesh));
    if (!dt_tensor_is_distributed(t))
        return dt_from_local(t, mesh, 1, &p, NULL, out);
    if (dt_tensor_mesh(t) != mesh)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: the tensor is on another mesh", fn);
    return dt_redistribute(t, 1, &p, out);
}

/* An output must be distributed, on a 1-d mesh. */
static dt_status check_output(const char *fn, dt_tensor *t, dt_mesh *mesh, dt_tensor **out)
{
    DT_ARG_NOT_NULL(out);
    DT_CHECK(mesh_1d(fn, t, mesh, &mesh));
    if (!dt_tensor_is_distributed(t))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: expects the distributed output of a tensor-parallel module, got a "
                      "local tensor",
                      fn);
    return DT_OK;
}

/* An output (distributed) in placement @p p. */
static dt_status output_as(const char *fn, dt_tensor *t, dt_mesh *mesh, dt_placement p,
                           dt_tensor **out)
{
    DT_CHECK(check_output(fn, t, mesh, out));
    return dt_redistribute(t, 1, &p, out);
}

/* The local tensor of distributed @p d (consumed). */
static dt_status local_of(dt_tensor *d, dt_tensor **out)
{
    *out = dt_tensor_retain(dt_to_local(d));
    dt_tensor_release(d);
    return DT_OK;
}

dt_status dt_make_input_replicate_1d(dt_tensor *t, dt_mesh *mesh, dt_tensor **out)
{
    return input_as(__func__, t, mesh, dt_replicate(), out);
}

dt_status dt_make_input_shard_1d(dt_tensor *t, dt_mesh *mesh, int dim, dt_tensor **out)
{
    return input_as(__func__, t, mesh, dt_shard(dim), out);
}

dt_status dt_make_input_shard_1d_last_dim(dt_tensor *t, dt_mesh *mesh, dt_tensor **out)
{
    DT_ARG_NOT_NULL(t);
    return input_as(__func__, t, mesh, dt_shard(dt_tensor_ndim(t) - 1), out);
}

dt_status dt_make_input_reshard_replicate(dt_tensor *t, dt_mesh *mesh, dt_tensor **out)
{
    dt_tensor *s = NULL;
    DT_CHECK(input_as(__func__, t, mesh, dt_shard(0), &s));
    dt_status st = input_as(__func__, s, NULL, dt_replicate(), out);
    dt_tensor_release(s);
    return st;
}

dt_status dt_make_output_replicate_1d(dt_tensor *t, dt_mesh *mesh, dt_tensor **out)
{
    return output_as(__func__, t, mesh, dt_replicate(), out);
}

dt_status dt_make_output_shard_1d(dt_tensor *t, dt_mesh *mesh, int dim, dt_tensor **out)
{
    return output_as(__func__, t, mesh, dt_shard(dim), out);
}

dt_status dt_make_output_tensor(dt_tensor *t, dt_mesh *mesh, dt_tensor **out)
{
    dt_tensor *r = NULL;
    DT_CHECK(output_as(__func__, t, mesh, dt_replicate(), &r));
    return local_of(r, out);
}

dt_status dt_make_output_reshard_tensor(dt_tensor *t, dt_mesh *mesh, dt_tensor **out)
{
    dt_tensor *r = NULL;
    DT_CHECK(output_as(__func__, t, mesh, dt_shard(0), &r));
    return local_of(r, out);
}

dt_status dt_make_sharded_output_tensor(dt_tensor *t, dt_mesh *mesh, dt_tensor **out)
{
    DT_CHECK(check_output(__func__, t, mesh, out));
    *out = dt_tensor_retain(dt_to_local(t));
    return DT_OK;
}
