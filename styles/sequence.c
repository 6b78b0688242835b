/*
 * SequenceParallel (PyTorch 2.x): a LayerNorm runs on activations sharded
 * along the sequence dim (default 1); its parameters are replicated (their
 * gradients are all-reduced by the layer-norm rule). A local input is taken
 * as this rank's S(seq) shard; a distributed one is used as it is. The output
 * stays distributed S(seq) unless use_local_output is true. The neighbouring
 * layers do the communication: a colwise layer with input S(1) all-gathers,
 * a rowwise layer with output S(1) reduce-scatters. A dt_style_ops like any
 * program's.
 */
#include "core/error.h"
#include "nn/nn_internal.h"
#include "styles/builtin_styles.h"

static dt_status sequence_defaults(dt_style_params *p)
{
    if (!(p->field_mask & DT_STYLE_PARAM_FIELD_SEQUENCE_DIM))
        p->sequence_dim = 1;
    if (!(p->field_mask & DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT))
        p->use_local_output = false;
    p->n_inputs = 1;
    p->input_layouts[0] = dt_layout_of(dt_shard(p->sequence_dim));
    p->output_layout = dt_layout_of(dt_shard(p->sequence_dim));
    return DT_OK;
}

static dt_status sequence_plan(dt_module *m, const char *fqn, dt_style_param_placement *out, int *n)
{
    (void)fqn;
    if (!dt__module_is(m, &dt__layer_norm_ops))
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "it cannot run a %s on sequence shards (it takes LayerNorm)",
                      dt_module_type_name(m));
    for (int i = 0; i < dt_module_num_params(m) && *n < DT_STYLE_MAX_PARAMS; i++)
        out[(*n)++] = (dt_style_param_placement){dt_module_param_name_at(m, i), dt_replicate()};
    return DT_OK;
}

static dt_status sequence_io(const dt_style *s, dt_module *m, dt_style_io *io)
{
    (void)m;
    const dt_style_params *o = dt_style_options(s);
    io->n_inputs = 1;
    io->input[0] = o->input_layouts[0];
    io->desired_input[0] = dt_layout_none(); /* a distributed input is used as it is */
    io->output = o->output_layout;
    io->desired_output = dt_layout_none();
    io->local_output = o->use_local_output;
    return DT_OK;
}

const dt_style_ops dt__style_sequence = {
    .field_mask = DT_STYLE_OPS_FIELD_OPTIONS | DT_STYLE_OPS_FIELD_PLAN_IO,
    .name = "sequence",
    .plan_params = sequence_plan,
    .options = DT_STYLE_PARAM_FIELD_SEQUENCE_DIM | DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT,
    .defaults = sequence_defaults,
    .plan_io = sequence_io,
};
