/*
 * ColwiseParallel (PyTorch 2.x defaults): a Linear's output features are
 * sharded (weight S(0), bias S(0)); an Embedding's embedding dim (weight
 * S(1)). Input R (gathered or wrapped) -> output S(-1), handed on as the local
 * shard unless use_local_output is false.
 */
#include "core/error.h"
#include "styles/style_kind.h"

static void colwise_defaults(dt_style *s)
{
    if (!(s->set_fields & DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS)) {
        s->n_inputs = 1;
        s->input_layouts[0] = dt_layout_of(dt_replicate());
    }
    s->desired_input_layouts[0] = dt_layout_of(dt_replicate());
    if (!(s->set_fields & DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT))
        s->output_layout = dt_layout_of(dt_shard(-1));
    if (!(s->set_fields & DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT))
        s->use_local_output = true;
}

static dt_status colwise_plan(const dt_style *s, dt_module *m, const char *fqn,
                              dt_style_param_plan *out, int *n)
{
    (void)s;
    return dt__tp_param_plan(m, "colwise", fqn, true, out, n);
}

static dt_status colwise_hooks(const dt_style *s, dt_module *m, dt_mesh *tp)
{
    dt__hook_ctx *c = NULL;
    DT_CHECK(dt__hook_ctx_new(s, DT_STYLE_COLWISE, tp, &c));
    c->n_in = 1;
    c->in[0] = s->input_layouts[0];
    c->desired[0] = s->desired_input_layouts[0];
    c->out = dt_layout_of(dt_shard(-1)); /* what the linear / embedding rule leaves */
    c->desired_out = s->output_layout;
    c->local_out = s->use_local_output;
    return dt__hook_add(m, c, true, true);
}

const dt__style_kind_ops dt__style_colwise_ops = {
    .name = "colwise",
    .allowed_fields = DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS | DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT |
                      DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT | DT_STYLE_PARAM_FIELD_PREPARE_INPUT |
                      DT_STYLE_PARAM_FIELD_PREPARE_OUTPUT,
    .defaults = colwise_defaults,
    .param_plan = colwise_plan,
    .add_hooks = colwise_hooks,
};
