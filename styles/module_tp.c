/*
 * What a module type declares for tensor parallelism (dt_module_ops.tp_kind,
 * tp_params), as the built-in styles read it: types by identity, layouts by
 * declaration.
 */
#include "core/error.h"
#include "nn/nn_internal.h"
#include "styles/builtin_styles.h"

bool dt__module_is(const dt_module *m, const dt_module_ops *type)
{
    return m != NULL && dt__module_ops_of(m) == type;
}

const dt_module_tp_param *dt__module_tp(const dt_module *m, dt_module_tp_kind *kind)
{
    const dt_module_ops *ops = dt__module_ops_of(m);
    *kind = ops->tp_kind;
    return ops->tp_kind != DT_MODULE_TP_NONE ? ops->tp_params : NULL;
}

dt_status dt__tp_param_plan(dt_module *m, bool colwise, dt_style_param_placement *out, int *n)
{
    dt_module_tp_kind kind;
    const dt_module_tp_param *tp = dt__module_tp(m, &kind);
    if (tp == NULL)
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "it cannot shard a %s (it takes Linear, Embedding, or a type whose "
                      "dt_module_ops declare tp_kind and tp_params)",
                      dt_module_type_name(m));
    for (; tp->name != NULL; tp++) {
        if (dt_module_param(m, tp->name) == NULL)
            continue; /* an optional parameter (a bias) it does not have */
        if (*n == DT_STYLE_MAX_PARAMS)
            return DT_ERR(DT_ERR_UNSUPPORTED, "a %s declares over %d tp_params",
                          dt_module_type_name(m), DT_STYLE_MAX_PARAMS);
        int d = colwise ? tp->colwise_dim : tp->rowwise_dim;
        out[(*n)++] = (dt_style_param_placement){tp->name, d >= 0 ? dt_shard(d) : dt_replicate()};
    }
    return DT_OK;
}
