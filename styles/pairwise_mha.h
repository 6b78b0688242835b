/*
 * PairwiseParallel on a fused-QKV multi-head attention (nn.MultiheadAttention
 * layout, styles/pairwise_mha.c); pairwise.c hands such modules over.
 * Not installed.
 */
#ifndef DT_STYLES_PAIRWISE_MHA_H
#define DT_STYLES_PAIRWISE_MHA_H

#include "styles/style_kind.h"

/* Whether pairwise shards @p m as a MultiheadAttention. */
bool dt__pairwise_mha_takes(const dt_module *m);
/* Its parameters: in_proj_weight and in_proj_bias _S(0,sf=3) (each rank the
 * q, k and v rows of its heads), out_proj rowwise. */
dt_status dt__pairwise_mha_plan(const dt_style *s, dt_module *m, const char *fqn,
                                dt_style_param_plan *out, int *n);
/* Its hooks: the input wrapped as Replicate (colwise's pre-hook), out_proj's
 * rowwise hooks (the one all-reduce). */
dt_status dt__pairwise_mha_hooks(const dt_style *s, dt_module *m, dt_mesh *tp);

#endif
