/*
 * PairwiseParallel on a MultiheadAttention (nn.MultiheadAttention layout,
 * src/nn/multihead_attention.c), as PyTorch's TensorParallelMultiheadAttention
 * and, in PyTorch 2.x DTensor terms, _StridedShard(0, split_factor=3): each
 * rank holds the q, k and v rows of its own heads (three boxes of
 * in_proj_weight [3E, E] and in_proj_bias [3E]), out_proj is rowwise, the
 * input is replicated and the output costs one all-reduce. The parameters
 * stay one distributed tensor of the global shape; gathering one gives
 * PyTorch's layout back. Heads must divide over the ranks, as for the GPT's
 * Attention (styles/partition.c refuses otherwise, naming the module).
 */
#include "core/error.h"
#include "nn/nn_internal.h"
#include "styles/pairwise_mha.h"

bool dt__pairwise_mha_takes(const dt_module *m)
{
    return dt__module_is(m, &dt__mha_ops);
}

dt_status dt__pairwise_mha_plan(dt_module *m, const char *fqn, dt_style_param_placement *out,
                                int *n)
{
    (void)m, (void)fqn;
    dt_placement qkv = dt_strided_shard_split(0, 3); /* q, k and v rows of this rank's heads */
    out[(*n)++] = (dt_style_param_placement){"in_proj_weight", qkv};
    out[(*n)++] = (dt_style_param_placement){"in_proj_bias", qkv};
    return DT_OK;
}

void dt__pairwise_mha_io(dt_style_io *io)
{
    /* a local tensor wrapped as Replicate, so the q, k and v products' input
     * gradients are summed over the ranks */
    io->n_inputs = 1;
    io->input[0] = dt_layout_of(dt_replicate());
    io->desired_input[0] = dt_layout_of(dt_replicate());
}

dt_status dt__pairwise_mha_children(dt_module *m, const char *fqn, dt_style_child *out, int *n)
{
    dt_module *proj = dt_module_child(m, "out_proj");
    if (proj == NULL || !dt__module_is(proj, &dt__linear_ops))
        return DT_ERR(DT_ERR_UNSUPPORTED, "'%s' has no Linear 'out_proj'", fqn);
    out[*n] = (dt_style_child){.module = proj};
    DT_CHECK(dt_style_rowwise(&out[*n].style));
    (*n)++;
    return DT_OK;
}
