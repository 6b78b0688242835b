/*
 * Gradient clipping by the global 2-norm, PyTorch clip_grad_norm_ semantics:
 * norm = sqrt(sum over grads of sum(g^2)); coef = max_norm / (norm + 1e-6);
 * when coef < 1 every gradient is multiplied by it.
 *
 * Distributed gradients: a shard's sum of squares counts once per distinct
 * shard, so it is summed over the mesh dims that shard the tensor and not
 * over the dims that replicate it. Gradients are grouped by (mesh, set of
 * sharding dims); one all-reduce per mesh dim then carries every group that
 * shards over that dim, so a step costs at most ndim small all-reduces.
 */
#include <math.h>

#include "core/error.h"
#include "dtensor/autograd.h"
#include "dtensor/comm.h"
#include "dtensor/mesh.h"
#include "dtensor/placement.h"
#include "kernels/kernel_ops.h"
#include "nn/module_impl.h"

#define CLIP_MAX_GROUPS 64

typedef struct clip_group {
    dt_mesh *mesh;
    unsigned mask; /* bit d: mesh dim d shards the gradient */
    double sum_sq;
} clip_group;

typedef struct clip_ctx {
    double sum_sq; /* local and fully replicated gradients: the same on every rank */
    clip_group groups[CLIP_MAX_GROUPS];
    int n_groups;
    double coef;
} clip_ctx;

static dt_status local_sum_sq(const char *fqn, const dt_tensor *g, double *out)
{
    if (g->dtype != DT_DTYPE_F32 || !dt_tensor_is_contiguous(g))
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "dt_clip_grad_norm: the gradient of '%s' is not a contiguous f32 tensor",
                      fqn);
    const dt_kernel_ops *k = dt__kernels_for(g->device);
    if (k == NULL || k->sum_squares == NULL)
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "dt_clip_grad_norm: no sum_squares kernel for the device of '%s'", fqn);
    return k->sum_squares(g, out);
}

/* Add @p s to the group of (@p mesh, @p mask), creating it. */
static dt_status add_to_group(clip_ctx *c, const char *fqn, dt_mesh *mesh, unsigned mask, double s)
{
    for (int i = 0; i < c->n_groups; i++)
        if (c->groups[i].mask == mask && dt_mesh_equal(c->groups[i].mesh, mesh)) {
            c->groups[i].sum_sq += s;
            return DT_OK;
        }
    if (c->n_groups == CLIP_MAX_GROUPS)
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "dt_clip_grad_norm: more than %d distinct (mesh, sharding) groups at '%s'",
                      CLIP_MAX_GROUPS, fqn);
    c->groups[c->n_groups++] = (clip_group){.mesh = mesh, .mask = mask, .sum_sq = s};
    return DT_OK;
}

static dt_status add_sum_sq(const char *fqn, dt_module *owner, const char *name, dt_tensor *p,
                            void *user)
{
    clip_ctx *c = user;
    /* a distributed parameter's gradient is its local shard's (autograd.h),
     * laid out like the parameter */
    dt_tensor *g = dt_tensor_grad(p);
    if (g == NULL)
        return DT_OK;
    double s = 0.0;
    DT_CHECK(local_sum_sq(fqn, dt__local_of(g), &s));
    dt_tensor *placed = g->dist != NULL ? g : (p->dist != NULL ? p : NULL);
    if (placed == NULL) {
        c->sum_sq += s;
        return DT_OK;
    }
    dt_mesh *mesh = dt_tensor_mesh(placed);
    const dt_placement *pl = dt_tensor_placements(placed);
    unsigned mask = 0;
    for (int d = 0; d < dt_mesh_ndim(mesh); d++) {
        if (pl[d].kind == DT_PLACEMENT_PARTIAL)
            return DT_ERR(DT_ERR_UNSUPPORTED,
                          "dt_clip_grad_norm: '%s' is Partial on mesh dim %d (its gradient's "
                          "norm is not defined by the shards)",
                          fqn, d);
        if (pl[d].kind == DT_PLACEMENT_SHARD)
            mask |= 1u << d;
    }
    if (mask == 0) {
        c->sum_sq += s;
        return DT_OK;
    }
    return add_to_group(c, fqn, mesh, mask, s);
}

/* Sum every group over its sharding dims: one all-reduce per (mesh, dim). */
static dt_status reduce_groups(clip_ctx *c)
{
    double buf[CLIP_MAX_GROUPS];
    int idx[CLIP_MAX_GROUPS];
    bool done[CLIP_MAX_GROUPS] = {false};
    for (int first = 0; first < c->n_groups; first++) {
        if (done[first])
            continue;
        dt_mesh *mesh = c->groups[first].mesh;
        for (int d = 0; d < dt_mesh_ndim(mesh); d++) {
            int n = 0;
            for (int i = first; i < c->n_groups; i++)
                if (!done[i] && dt_mesh_equal(c->groups[i].mesh, mesh) &&
                    (c->groups[i].mask & (1u << d))) {
                    idx[n] = i;
                    buf[n++] = c->groups[i].sum_sq;
                }
            if (n == 0)
                continue;
            dt_comm *comm = dt_mesh_dim_comm(mesh, d);
            if (comm == NULL)
                return DT_ERR(DT_ERR_UNSUPPORTED,
                              "dt_clip_grad_norm: mesh dim %d has no comm (a virtual mesh)", d);
            DT_CHECK(
                dt_comm_allreduce(comm, buf, buf, (size_t)n, DT_DTYPE_F64, DT_REDUCE_OP_SUM, NULL));
            for (int k = 0; k < n; k++)
                c->groups[idx[k]].sum_sq = buf[k];
        }
        for (int i = first; i < c->n_groups; i++)
            if (dt_mesh_equal(c->groups[i].mesh, mesh))
                done[i] = true;
    }
    return DT_OK;
}

static dt_status scale_grad(const char *fqn, dt_module *owner, const char *name, dt_tensor *p,
                            void *user)
{
    const clip_ctx *c = user;
    dt_tensor *g = dt_tensor_grad(p);
    if (g == NULL)
        return DT_OK;
    g = dt__local_of(g);
    const dt_kernel_ops *k = dt__kernels_for(g->device);
    if (k == NULL)
        return DT_ERR(DT_ERR_UNSUPPORTED, "dt_clip_grad_norm: no kernels for the device of '%s'",
                      fqn);
    /* element-wise on identical layouts: in place is safe */
    return k->unary(DT_UNARY_SCALE, g, (float)c->coef, g);
}

dt_status dt_clip_grad_norm(dt_module *root, double max_norm, double *total_norm)
{
    DT_ARG_NOT_NULL(root);
    if (!(max_norm > 0.0))
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_clip_grad_norm: max_norm %g must be > 0", max_norm);
    clip_ctx c = {.sum_sq = 0.0, .n_groups = 0, .coef = 1.0};
    DT_CHECK(dt_module_foreach_param(root, add_sum_sq, &c));
    DT_CHECK(reduce_groups(&c));
    double sum_sq = c.sum_sq;
    for (int i = 0; i < c.n_groups; i++)
        sum_sq += c.groups[i].sum_sq;
    double norm = sqrt(sum_sq);
    c.coef = max_norm / (norm + 1e-6);
    if (c.coef < 1.0)
        DT_CHECK(dt_module_foreach_param(root, scale_grad, &c));
    if (total_norm != NULL)
        *total_norm = norm;
    return DT_OK;
}
