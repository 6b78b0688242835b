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

static dt_status out_proj_of(dt_module *m, const char *fqn, dt_module **out)
{
    *out = dt_module_child(m, "out_proj");
    if (*out == NULL || !dt__module_is(*out, &dt__linear_ops))
        return DT_ERR(DT_ERR_UNSUPPORTED, "parallelize: pairwise on '%s': no Linear 'out_proj'",
                      fqn);
    return DT_OK;
}

dt_status dt__pairwise_mha_plan(const dt_style *s, dt_module *m, const char *fqn,
                                dt_style_param_plan *out, int *n)
{
    dt_module *proj = NULL;
    DT_CHECK(out_proj_of(m, fqn, &proj));
    dt_placement qkv = dt_strided_shard_split(0, 3); /* q, k and v rows of this rank's heads */
    out[(*n)++] = (dt_style_param_plan){m, "in_proj_weight", qkv};
    out[(*n)++] = (dt_style_param_plan){m, "in_proj_bias", qkv};
    return dt__style_rowwise_ops.param_plan(s, proj, fqn, out, n);
}

dt_status dt__pairwise_mha_hooks(const dt_style *s, dt_module *m, dt_mesh *tp)
{
    dt_module *proj = NULL;
    dt__hook_ctx *c = NULL;
    dt_style *row = NULL;
    DT_CHECK(out_proj_of(m, dt_module_name(m), &proj));
    /* the input as colwise takes it: a local tensor wrapped as Replicate, so
     * the q, k and v products' input gradients are summed over the ranks */
    DT_CHECK(dt__hook_ctx_new(s, DT_STYLE_COLWISE, tp, &c));
    c->n_in = 1;
    c->in[0] = dt_layout_of(dt_replicate());
    c->desired[0] = dt_layout_of(dt_replicate());
    DT_CHECK(dt__hook_add(m, c, true, false));
    DT_CHECK(dt_style_rowwise(&row));
    dt_status status = dt__style_rowwise_ops.add_hooks(row, proj, tp);
    dt_style_release(row);
    return status;
}
