/*
 * ColwiseParallel (PyTorch 2.x defaults): a Linear's output features are
 * sharded (weight S(0), bias S(0)); an Embedding's embedding dim (weight
 * S(1)). Input R (gathered or wrapped) -> output S(-1), handed on as the local
 * shard unless use_local_output is false. A dt_style_ops like any program's.
 */
#include "core/error.h"
#include "styles/builtin_styles.h"

static dt_status colwise_defaults(dt_style_params *p)
{
    if (p->field_mask & DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS) {
        if (p->n_inputs != 1)
            return DT_ERR(DT_ERR_INVALID_ARG, "takes one input layout, got %d", p->n_inputs);
    } else {
        p->n_inputs = 1;
        p->input_layouts[0] = dt_layout_of(dt_replicate());
    }
    p->desired_input_layouts[0] = dt_layout_of(dt_replicate()); /* fixed by the partition */
    if (!(p->field_mask & DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT))
        p->output_layout = dt_layout_of(dt_shard(-1));
    if (!(p->field_mask & DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT))
        p->use_local_output = true;
    return DT_OK;
}

static dt_status colwise_plan(dt_module *m, const char *fqn, dt_style_param_placement *out, int *n)
{
    (void)fqn;
    return dt__tp_param_plan(m, true, out, n);
}

static dt_status colwise_io(const dt_style *s, dt_module *m, dt_style_io *io)
{
    (void)m;
    const dt_style_params *o = dt_style_options(s);
    io->n_inputs = 1;
    io->input[0] = o->input_layouts[0];
    io->desired_input[0] = o->desired_input_layouts[0];
    io->output = dt_layout_of(dt_shard(-1)); /* what the linear / embedding rule leaves */
    io->desired_output = o->output_layout;
    io->local_output = o->use_local_output;
    return DT_OK;
}

const dt_style_ops dt__style_colwise = {
    .field_mask = DT_STYLE_OPS_FIELD_OPTIONS | DT_STYLE_OPS_FIELD_PLAN_IO,
    .name = "colwise",
    .plan_params = colwise_plan,
    .options = DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS | DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT |
               DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT | DT_STYLE_PARAM_FIELD_PREPARE_INPUT |
               DT_STYLE_PARAM_FIELD_PREPARE_OUTPUT,
    .defaults = colwise_defaults,
    .plan_io = colwise_io,
};
