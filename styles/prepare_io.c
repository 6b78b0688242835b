/*
 * PrepareModuleInput / PrepareModuleOutput (PyTorch 2.x): no parameters, only
 * layouts. Input: each input declared with a layout is wrapped (if local) in
 * it and redistributed to its desired layout; use_local_output (default
 * false) hands the prepared inputs on as local shards. Output: wrapped in
 * output_layout (if local), redistributed to desired_output_layout, handed on
 * local by default. Any module type.
 */
#include "core/error.h"
#include "styles/style_kind.h"

static void prepare_input_defaults(dt_style *s)
{
    if (!(s->set_fields & DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT))
        s->use_local_output = false;
}

static void prepare_output_defaults(dt_style *s)
{
    if (!(s->set_fields & DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT))
        s->use_local_output = true;
}

static dt_status no_params(const dt_style *s, dt_module *m, const char *fqn,
                           dt_style_param_plan *out, int *n)
{
    (void)s, (void)m, (void)fqn, (void)out, (void)n;
    return DT_OK;
}

static dt_status prepare_input_hooks(const dt_style *s, dt_module *m, dt_mesh *tp)
{
    dt__hook_ctx *c = NULL;
    DT_CHECK(dt__hook_ctx_new(s, DT_STYLE_PREPARE_INPUT, tp, &c));
    c->n_in = s->n_inputs;
    for (int i = 0; i < s->n_inputs; i++) {
        c->in[i] = s->input_layouts[i];
        c->desired[i] = s->desired_input_layouts[i];
    }
    c->local_in = s->use_local_output;
    return dt__hook_add(m, c, true, false);
}

static dt_status prepare_output_hooks(const dt_style *s, dt_module *m, dt_mesh *tp)
{
    dt__hook_ctx *c = NULL;
    DT_CHECK(dt__hook_ctx_new(s, DT_STYLE_PREPARE_OUTPUT, tp, &c));
    c->out = s->output_layout;
    c->desired_out = s->desired_output_layout;
    c->local_out = s->use_local_output;
    return dt__hook_add(m, c, false, true);
}

const dt__style_kind_ops dt__style_prepare_input_ops = {
    .name = "prepare_input",
    .allowed_fields = DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS |
                      DT_STYLE_PARAM_FIELD_DESIRED_INPUT_LAYOUTS |
                      DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT,
    .required_fields =
        DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS | DT_STYLE_PARAM_FIELD_DESIRED_INPUT_LAYOUTS,
    .defaults = prepare_input_defaults,
    .param_plan = no_params,
    .add_hooks = prepare_input_hooks,
};

const dt__style_kind_ops dt__style_prepare_output_ops = {
    .name = "prepare_output",
    .allowed_fields = DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT |
                      DT_STYLE_PARAM_FIELD_DESIRED_OUTPUT_LAYOUT |
                      DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT,
    .required_fields =
        DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT | DT_STYLE_PARAM_FIELD_DESIRED_OUTPUT_LAYOUT,
    .defaults = prepare_output_defaults,
    .param_plan = no_params,
    .add_hooks = prepare_output_hooks,
};
