/*
 * SequenceParallel (PyTorch 2.x): a LayerNorm runs on activations sharded
 * along the sequence dim (default 1); its parameters are replicated (their
 * gradients are all-reduced by the layer-norm rule). A local input is taken
 * as this rank's S(seq) shard; a distributed one is used as it is. The output
 * stays distributed S(seq) unless use_local_output is true. The neighbouring
 * layers do the communication: a colwise layer with input S(1) all-gathers,
 * a rowwise layer with output S(1) reduce-scatters.
 */
#include "core/error.h"
#include "nn/nn_internal.h"
#include "styles/style_kind.h"

static void sequence_defaults(dt_style *s)
{
    if (!(s->set_fields & DT_STYLE_PARAM_FIELD_SEQUENCE_DIM))
        s->sequence_dim = 1;
    if (!(s->set_fields & DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT))
        s->use_local_output = false;
    s->n_inputs = 1;
    s->input_layouts[0] = dt_layout_of(dt_shard(s->sequence_dim));
    s->output_layout = dt_layout_of(dt_shard(s->sequence_dim));
}

static dt_status sequence_plan(const dt_style *s, dt_module *m, const char *fqn,
                               dt_style_param_plan *out, int *n)
{
    (void)s;
    if (!dt__module_is(m, &dt__layer_norm_ops))
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "parallelize: sequence cannot run '%s', a %s, on sequence shards (it "
                      "takes LayerNorm)",
                      fqn, dt_module_type_name(m));
    for (int i = 0; i < dt_module_num_params(m) && *n < DT_STYLE_MAX_PARAMS; i++)
        out[(*n)++] = (dt_style_param_plan){m, dt_module_param_name_at(m, i), dt_replicate()};
    return DT_OK;
}

static dt_status sequence_hooks(const dt_style *s, dt_module *m, dt_mesh *tp)
{
    dt__hook_ctx *c = NULL;
    DT_CHECK(dt__hook_ctx_new(s, DT_STYLE_SEQUENCE, tp, &c));
    c->n_in = 1;
    c->in[0] = s->input_layouts[0];
    c->desired[0] = dt_layout_none(); /* a distributed input is used as it is */
    c->out = s->output_layout;
    c->desired_out = dt_layout_none();
    c->local_out = s->use_local_output;
    return dt__hook_add(m, c, true, true);
}

const dt__style_kind_ops dt__style_sequence_ops = {
    .name = "sequence",
    .allowed_fields = DT_STYLE_PARAM_FIELD_SEQUENCE_DIM | DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT,
    .defaults = sequence_defaults,
    .param_plan = sequence_plan,
    .add_hooks = sequence_hooks,
};
