/*
 * Batches and losses over data-parallel ranks (include/dtensor/nn.h): this
 * rank's rows of the global batch, the value of a (distributed) scalar, and
 * the loss of the global batch.
 */
#include <inttypes.h>

#include "core/error.h"
#include "mesh/mesh_impl.h"
#include "dtensor/autograd.h"
#include "dtensor/mesh.h"
#include "dtensor/nn.h"
#include "dtensor/placement.h"

/* Coordinate and size of this rank on mesh dim @p dp_dim. */
static dt_status dp_coord(const char *fn, const dt_mesh *mesh, const char *dp_dim, int *r, int *n)
{
    int d = -1, coord[DT_MESH_MAX_DIMS];
    DT_CHECK(dt__mesh_dim_find(fn, mesh, dp_dim, &d));
    dt_mesh_coordinate(mesh, coord);
    *r = coord[d];
    *n = dt_mesh_dim_size(mesh, d);
    return DT_OK;
}

dt_status dt_dp_rows(const dt_mesh *mesh, const char *dp_dim, int64_t batch, int64_t *lo,
                     int64_t *hi)
{
    DT_ARG_NOT_NULL(lo);
    DT_ARG_NOT_NULL(hi);
    if (batch < 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_dp_rows: batch %" PRId64 " is negative", batch);
    int r = 0, n = 1;
    if (mesh != NULL && dp_dim != NULL)
        DT_CHECK(dp_coord(__func__, mesh, dp_dim, &r, &n));
    /* train_gpt's split: sizes differ by at most one, and no rank is empty when B >= n */
    *lo = (int64_t)r * batch / n;
    *hi = (int64_t)(r + 1) * batch / n;
    return DT_OK;
}

dt_status dt_dp_batch(dt_tensor *batch, const dt_mesh *mesh, const char *dp_dim, dt_tensor **out)
{
    DT_ARG_NOT_NULL(batch);
    DT_ARG_NOT_NULL(out);
    if (dt_tensor_is_distributed(batch) || dt_tensor_ndim(batch) < 1)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_dp_batch: batch must be a local tensor of at least 1 dim (it is %s, "
                      "%d dims)",
                      dt_tensor_is_distributed(batch) ? "distributed" : "local",
                      dt_tensor_ndim(batch));
    if (mesh == NULL || dp_dim == NULL) {
        *out = dt_tensor_retain(batch);
        return DT_OK;
    }
    int64_t lo = 0, hi = 0;
    DT_CHECK(dt_dp_rows(mesh, dp_dim, dt_tensor_dim(batch, 0), &lo, &hi));
    return dt_tensor_narrow(batch, 0, lo, hi - lo, out);
}

dt_status dt_item(dt_tensor *t, double *out)
{
    DT_ARG_NOT_NULL(t);
    DT_ARG_NOT_NULL(out);
    if (!dt_tensor_is_distributed(t))
        return dt_tensor_item(t, out);
    if (dt_tensor_numel(t) != 1)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_item: distributed tensor has %" PRId64 " elements, not 1",
                      dt_tensor_numel(t));
    const dt_placement *pl = dt_tensor_placements(t);
    bool replicated = true;
    for (int d = 0; d < dt_mesh_ndim(dt_tensor_mesh(t)); d++)
        replicated = replicated && pl[d].kind == DT_PLACEMENT_REPLICATE;
    if (replicated) /* every rank holds the value: no communication */
        return dt_tensor_item(dt_to_local(t), out);
    /* Partial or sharded: reduce / gather once, outside any graph */
    dt_tensor *full = NULL;
    bool prev = dt_grad_set_enabled(false);
    dt_status s = dt_full_tensor(t, &full);
    dt_grad_set_enabled(prev);
    if (s == DT_OK)
        s = dt_tensor_item(full, out);
    dt_tensor_release(full);
    return s;
}

dt_status dt_dp_mean_loss(dt_tensor *loss, dt_mesh *mesh, const char *dp_dim, int64_t batch,
                          double *out)
{
    DT_ARG_NOT_NULL(loss);
    DT_ARG_NOT_NULL(out);
    if (batch <= 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_dp_mean_loss: batch %" PRId64 " is not positive",
                      batch);
    double v = 0.0;
    DT_CHECK(dt_item(loss, &v));
    if (mesh == NULL || dp_dim == NULL) {
        *out = v;
        return DT_OK;
    }
    int64_t lo = 0, hi = 0;
    DT_CHECK(dt_dp_rows(mesh, dp_dim, batch, &lo, &hi));
    int d = -1;
    DT_CHECK(dt__mesh_dim_find("dt_dp_mean_loss", mesh, dp_dim, &d));
    dt_comm *c = dt_mesh_dim_comm(mesh, d);
    if (c == NULL)
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "dt_dp_mean_loss: mesh dim '%s' has no comm (a virtual mesh)", dp_dim);
    v *= (double)(hi - lo) / (double)batch; /* this rank's share of the global mean */
    DT_CHECK(dt_comm_allreduce(c, &v, &v, 1, DT_DTYPE_F64, DT_REDUCE_OP_SUM, NULL));
    *out = v;
    return DT_OK;
}
