/*
 * What a style does to a module, in two phases so that parallelize can check
 * everything before changing anything: dt__style_param_plan / dt_style_check
 * only look; dt__style_apply swaps parameter slots and adds hooks.
 */
#include <inttypes.h>
#include <string.h>

#include "core/error.h"
#include "nn/nn_internal.h"
#include "styles/style_kind.h"

dt_status dt__style_param_plan(const dt_style *s, dt_module *m, const char *fqn,
                               dt_style_param_plan *out, int *n)
{
    *n = 0;
    return dt__style_kind_ops_of(s->kind)->param_plan(s, m, fqn, out, n);
}

/* Heads must not be split: a sharded projection of an Attention (or the
 * in_proj of a MultiheadAttention) needs tp | n_heads. */
static dt_status check_heads(const dt_style_param_plan *pp, const char *fqn, int tp_size)
{
    dt_module *parent = dt_module_parent(pp->owner);
    int64_t heads = 0;
    if (pp->placement.kind != DT_PLACEMENT_SHARD)
        return DT_OK;
    if (dt__module_is(pp->owner, &dt__mha_ops))
        DT_CHECK(dt_multihead_attention_config(pp->owner, &heads, NULL, NULL));
    else if (parent != NULL && dt__module_is(parent, &dt__attention_ops))
        DT_CHECK(dt_attention_config(parent, &heads, NULL));
    else
        return DT_OK;
    if (heads % tp_size != 0)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "parallelize: '%s': n_heads %" PRId64 " is not divisible by the tp size %d "
                      "(attention shards must hold whole heads)",
                      fqn, heads, tp_size);
    return DT_OK;
}

dt_status dt_style_check(const dt_style *s, dt_module *m, const char *fqn, int tp_size)
{
    DT_ARG_NOT_NULL(s);
    DT_ARG_NOT_NULL(m);
    if (fqn == NULL)
        fqn = dt_module_name(m);
    if (tp_size < 1)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_style_check: tp size %d < 1", tp_size);
    dt_style_param_plan pp[DT_STYLE_MAX_PARAMS];
    int n = 0;
    DT_CHECK(dt__style_param_plan(s, m, fqn, pp, &n));
    for (int i = 0; i < n; i++) {
        dt_tensor *t = dt_module_param(pp[i].owner, pp[i].name);
        if (t == NULL)
            return DT_ERR(DT_ERR_INTERNAL, "parallelize: '%s' has no parameter '%s'", fqn,
                          pp[i].name);
        if (dt_tensor_is_distributed(t)) {
            char spec[160];
            dt_spec_format(dt_tensor_spec(t), spec, sizeof(spec));
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "parallelize: '%s': parameter '%s' of %s '%s' is already distributed "
                          "(%s): apply tensor parallelism once, and before data parallelism "
                          "(dt_parallelize_module, then dt_fully_shard / dt_ddp_apply)",
                          fqn, pp[i].name, dt_module_type_name(pp[i].owner),
                          dt_module_name(pp[i].owner), spec);
        }
        DT_CHECK(check_heads(&pp[i], fqn, tp_size));
    }
    return DT_OK;
}

dt_status dt__style_apply(const dt_style *s, dt_module *m, dt_mesh *tp, int n_params,
                          const dt_style_param_plan *plan, dt_tensor **params)
{
    dt_status status = DT_OK;
    int i = 0;
    for (; i < n_params; i++) {
        status = dt_module_param_set(plan[i].owner, plan[i].name, params[i]);
        dt_tensor_release(params[i]);
        params[i] = NULL;
        if (status != DT_OK)
            break;
    }
    for (i++; i < n_params; i++) { /* consume the rest on failure */
        dt_tensor_release(params[i]);
        params[i] = NULL;
    }
    DT_CHECK(status);
    return dt__style_kind_ops_of(s->kind)->add_hooks(s, m, tp);
}
