/*
 * RowwiseParallel (PyTorch 2.x defaults). On a Linear the input features are
 * sharded (weight S(1), bias R added once after the reduction): input S(-1)
 * -> a Partial sum -> output R (all-reduce) or S(1) (reduce-scatter, when
 * sequence parallelism follows). On an Embedding the vocabulary is sharded
 * (weight S(0)): ids R, rows outside this rank's range give zeros, the
 * Partial sum is reduced the same way. The output is handed on as the local
 * tensor unless use_local_output is false. A dt_style_ops like any program's.
 */
#include "core/error.h"
#include "styles/builtin_styles.h"

static dt_status rowwise_defaults(dt_style_params *p)
{
    if (p->field_mask & DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS) {
        if (p->n_inputs != 1)
            return DT_ERR(DT_ERR_INVALID_ARG, "takes one input layout, got %d", p->n_inputs);
    } else {
        p->n_inputs = 1;
        p->input_layouts[0] = dt_layout_none(); /* per module type, in plan_io */
    }
    if (!(p->field_mask & DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT))
        p->output_layout = dt_layout_of(dt_replicate());
    if (!(p->field_mask & DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT))
        p->use_local_output = true;
    return DT_OK;
}

static dt_status rowwise_plan(dt_module *m, const char *fqn, dt_style_param_placement *out, int *n)
{
    (void)fqn;
    return dt__tp_param_plan(m, false, out, n);
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

static dt_status rowwise_io(const dt_style *s, dt_module *m, dt_style_io *io)
{
    const dt_style_params *o = dt_style_options(s);
    dt_module_tp_kind kind;
    const dt_module_tp_param *params = dt__module_tp(m, &kind);
    bool linear = kind == DT_MODULE_TP_LINEAR;
    io->n_inputs = 1;
    /* Linear: S(-1) -> S(-1); Embedding: ids R -> R (PyTorch's defaults per type) */
    dt_placement def = linear ? dt_shard(-1) : dt_replicate();
    io->input[0] = o->input_layouts[0].present ? o->input_layouts[0] : dt_layout_of(def);
    io->desired_input[0] = dt_layout_of(def);
    if (linear) /* the full input width is the weight's in_features: no shape exchange */
        io->input_last_dim[0] = in_features(m, params);
    io->output = dt_layout_of(dt_partial(DT_REDUCE_OP_SUM));
    io->desired_output = o->output_layout;
    io->local_output = o->use_local_output;
    return DT_OK;
}

const dt_style_ops dt__style_rowwise = {
    .field_mask = DT_STYLE_OPS_FIELD_OPTIONS | DT_STYLE_OPS_FIELD_PLAN_IO,
    .name = "rowwise",
    .plan_params = rowwise_plan,
    .options = DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS | DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT |
               DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT | DT_STYLE_PARAM_FIELD_PREPARE_INPUT |
               DT_STYLE_PARAM_FIELD_PREPARE_OUTPUT,
    .defaults = rowwise_defaults,
    .plan_io = rowwise_io,
};
