/*
 * TorchShard-style conveniences, thin wrappers over the styles:
 * ParallelLinear(dim=None|0|1) and parallel_cross_entropy.
 */
#include "core/error.h"
#include "dtensor/ops.h"
#include "styles/style_impl.h"

dt_status dt_parallel_linear_create(int64_t in_features, int64_t out_features, bool bias, int dim,
                                    dt_mesh *mesh, const char *tp_dim, dt_module **out)
{
    DT_ARG_NOT_NULL(out);
    if (dim != -1 && dim != 0 && dim != 1)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_parallel_linear_create: dim %d: use -1 (none), 0 (row) or 1 (column)",
                      dim);
    dt_module *m = NULL;
    dt_plan *plan = NULL;
    dt_style *style = NULL;
    dt_status s;
    DT_CHECK(dt_linear_create(in_features, out_features, bias, &m));
    if (dim == -1) {
        *out = m;
        return DT_OK;
    }
    DT_CHECK_GOTO(dim == 1 ? dt_style_colwise(&style) : dt_style_rowwise(&style), s, err_free);
    DT_CHECK_GOTO(dt_plan_create(&plan), s, err_free);
    DT_CHECK_GOTO(dt_plan_add(plan, "", style), s, err_free);
    DT_CHECK_GOTO(dt_parallelize_module(m, mesh, plan, tp_dim), s, err_free);
    dt_plan_destroy(plan);
    dt_style_release(style);
    *out = m;
    return DT_OK;

err_free:
    dt_plan_destroy(plan);
    dt_style_release(style);
    dt_module_destroy(m);
    return s;
}

dt_status dt_parallel_cross_entropy(dt_tensor *logits, dt_tensor *targets, dt_tensor **loss)
{
    DT_ARG_NOT_NULL(logits);
    DT_ARG_NOT_NULL(targets);
    DT_ARG_NOT_NULL(loss);
    const dt_spec *spec = dt_tensor_spec(logits);
    if (spec == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_parallel_cross_entropy: logits are a local tensor; pass the "
                      "distributed, vocabulary-sharded logits (colwise with local=false)");
    int nd = dt_spec_ndim(spec), mn = dt_mesh_ndim(dt_spec_mesh(spec));
    const dt_placement *pl = dt_spec_placements(spec);
    bool vocab = false;
    for (int k = 0; k < mn; k++)
        vocab = vocab || dt_placement_is_shard(pl[k], nd - 1);
    if (!vocab) {
        char buf[64];
        dt_placements_format(mn, pl, ",", buf, sizeof(buf));
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_parallel_cross_entropy: logits placed %s are not sharded along the "
                      "class dim %d",
                      buf, nd - 1);
    }
    return dt_cross_entropy(logits, targets, -100, loss);
}
