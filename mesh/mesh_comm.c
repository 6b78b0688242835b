/* Meshes over the world: one comm per mesh dim, split once from the world comm. */
#include "core/error.h"
#include "core/log.h"
#include "mesh/mesh_impl.h"

/* Row-major index of @p coord with dim @p skip left out: the split color. */
static int color_without(const dt_mesh *m, const int *coord, int skip)
{
    int c = 0;
    for (int d = 0; d < m->ndim; d++)
        if (d != skip)
            c = c * m->shape[d] + coord[d];
    return c;
}

dt_status dt_mesh_create(dt_runtime *rt, int ndim, const int *shape, const char *const *dim_names,
                         dt_mesh **out)
{
    DT_ARG_NOT_NULL(rt);
    DT_ARG_NOT_NULL(out);
    dt_comm *world = dt_runtime_world(rt);
    dt_mesh *m = NULL;
    dt_status s;
    if (world == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_mesh_create: the runtime has no world comm");
    DT_CHECK(dt__mesh_layout_create(__func__, ndim, shape, dim_names, dt_comm_size(world),
                                    dt_comm_rank(world), &m));
    m->rt = rt;
    /* every rank runs the same splits in the same order: collective and hang-free */
    for (int d = 0; d < ndim; d++) {
        DT_CHECK_GOTO(
            dt_comm_split(world, color_without(m, m->coord, d), m->coord[d], &m->dim_comm[d]), s,
            err_release);
        if (m->dim_comm[d] == NULL || dt_comm_size(m->dim_comm[d]) != m->shape[d] ||
            dt_comm_rank(m->dim_comm[d]) != m->coord[d]) {
            s = DT_ERR(DT_ERR_INTERNAL,
                       "dt_mesh_create: split of mesh dim %d gave rank %d of %d, "
                       "expected %d of %d",
                       d, m->dim_comm[d] ? dt_comm_rank(m->dim_comm[d]) : -1,
                       m->dim_comm[d] ? dt_comm_size(m->dim_comm[d]) : -1, m->coord[d],
                       m->shape[d]);
            goto err_release;
        }
    }
    if (dt__log_level() >= DT_LOG_LEVEL_DEBUG) {
        char buf[512];
        dt_mesh_format(m, buf, sizeof(buf));
        DT_LOG_DEBUG("mesh", "created %s", buf);
    }
    *out = m;
    return DT_OK;
err_release:
    dt_mesh_release(m); /* destroys the comms split so far */
    return s;
}
