/*
 * RowwiseParallel (PyTorch 2.x defaults). On a Linear the input features are
 * sharded (weight S(1), bias R added once after the reduction): input S(-1)
 * -> a Partial sum -> output R (all-reduce) or S(1) (reduce-scatter, when
 * sequence parallelism follows). On an Embedding the vocabulary is sharded
 * (weight S(0)): ids R, rows outside this rank's range give zeros, the
 * Partial sum is reduced the same way. The output is handed on as the local
 * tensor unless use_local_output is false.
 */
#include "core/error.h"
#include "styles/style_kind.h"

static void rowwise_defaults(dt_style *s)
{
    if (!(s->set_fields & DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS)) {
        s->n_inputs = 1;
        s->input_layouts[0] = dt_layout_none(); /* per module type, at apply time */
    }
    if (!(s->set_fields & DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT))
        s->output_layout = dt_layout_of(dt_replicate());
    if (!(s->set_fields & DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT))
        s->use_local_output = true;
}

static dt_status rowwise_plan(const dt_style *s, dt_module *m, const char *fqn,
                              dt_style_param_plan *out, int *n)
{
    (void)s;
    return dt__tp_param_plan(m, "rowwise", fqn, false, out, n);
}

/* The input width of a Linear-like @p m: the size of its first rowwise-sharded dim. */
static int64_t in_features(const dt_module *m, const dt_module_tp_param *tp)
{
    for (; tp != NULL && tp->name != NULL; tp++) {
        dt_tensor *p = dt_module_param(m, tp->name);
        if (p != NULL && tp->rowwise_dim >= 0)
            return dt_tensor_dim(p, tp->rowwise_dim);
    }
    return -1;
}

static dt_status rowwise_hooks(const dt_style *s, dt_module *m, dt_mesh *tp)
{
    dt_module_tp_kind kind;
    const dt_module_tp_param *params = dt__module_tp(m, &kind);
    bool linear = kind == DT_MODULE_TP_LINEAR;
    dt__hook_ctx *c = NULL;
    DT_CHECK(dt__hook_ctx_new(s, DT_STYLE_ROWWISE, tp, &c));
    c->n_in = 1;
    /* Linear: S(-1) -> S(-1); Embedding: ids R -> R (PyTorch's defaults per type) */
    dt_placement def = linear ? dt_shard(-1) : dt_replicate();
    c->in[0] = s->input_layouts[0].present ? s->input_layouts[0] : dt_layout_of(def);
    c->desired[0] = dt_layout_of(def);
    if (linear) /* the full input width is the weight's in_features: no shape exchange */
        c->in_last_dim = in_features(m, params);
    c->out = dt_layout_of(dt_partial(DT_REDUCE_OP_SUM));
    c->desired_out = s->output_layout;
    c->local_out = s->use_local_output;
    return dt__hook_add(m, c, true, true);
}

const dt__style_kind_ops dt__style_rowwise_ops = {
    .name = "rowwise",
    .allowed_fields = DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS | DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT |
                      DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT | DT_STYLE_PARAM_FIELD_PREPARE_INPUT |
                      DT_STYLE_PARAM_FIELD_PREPARE_OUTPUT,
    .defaults = rowwise_defaults,
    .param_plan = rowwise_plan,
    .add_hooks = rowwise_hooks,
};
