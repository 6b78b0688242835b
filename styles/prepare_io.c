/*
 * PrepareModuleInput / PrepareModuleOutput (PyTorch 2.x): no parameters, only
 * layouts. Input: each input declared with a layout is wrapped (if local) in
 * it and redistributed to its desired layout; use_local_output (default
 * false) hands the prepared inputs on as local shards. Output: wrapped in
 * output_layout (if local), redistributed to desired_output_layout, handed on
 * local by default. Any module type. Two dt_style_ops like any program's.
 */
#include "core/error.h"
#include "styles/builtin_styles.h"

static dt_status prepare_input_defaults(dt_style_params *p)
{
    if (!(p->field_mask & DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT))
        p->use_local_output = false;
    return DT_OK;
}

static dt_status prepare_output_defaults(dt_style_params *p)
{
    if (!(p->field_mask & DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT))
        p->use_local_output = true;
    return DT_OK;
}

static dt_status prepare_input_io(const dt_style *s, dt_module *m, dt_style_io *io)
{
    (void)m;
    const dt_style_params *o = dt_style_options(s);
    io->n_inputs = o->n_inputs;
    for (int i = 0; i < o->n_inputs; i++) {
        io->input[i] = o->input_layouts[i];
        io->desired_input[i] = o->desired_input_layouts[i];
    }
    io->local_inputs = o->use_local_output;
    return DT_OK;
}

static dt_status prepare_output_io(const dt_style *s, dt_module *m, dt_style_io *io)
{
    (void)m;
    const dt_style_params *o = dt_style_options(s);
    io->output = o->output_layout;
    io->desired_output = o->desired_output_layout;
    io->local_output = o->use_local_output;
    return DT_OK;
}

const dt_style_ops dt__style_prepare_input = {
    .field_mask = DT_STYLE_OPS_FIELD_OPTIONS | DT_STYLE_OPS_FIELD_PLAN_IO,
    .name = "prepare_input",
    .options = DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS | DT_STYLE_PARAM_FIELD_DESIRED_INPUT_LAYOUTS |
               DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT,
    .required_options =
        DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS | DT_STYLE_PARAM_FIELD_DESIRED_INPUT_LAYOUTS,
    .defaults = prepare_input_defaults,
    .plan_io = prepare_input_io,
};

const dt_style_ops dt__style_prepare_output = {
    .field_mask = DT_STYLE_OPS_FIELD_OPTIONS | DT_STYLE_OPS_FIELD_PLAN_IO,
    .name = "prepare_output",
    .options = DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT | DT_STYLE_PARAM_FIELD_DESIRED_OUTPUT_LAYOUT |
               DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT,
    .required_options =
        DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT | DT_STYLE_PARAM_FIELD_DESIRED_OUTPUT_LAYOUT,
    .defaults = prepare_output_defaults,
    .plan_io = prepare_output_io,
};
