/*
 * PairwiseParallel on a fused-QKV multi-head attention (nn.MultiheadAttention
 * layout, styles/pairwise_mha.c); pairwise.c hands such modules over.
 * Not installed.
 */
#ifndef DT_STYLES_PAIRWISE_MHA_H
#define DT_STYLES_PAIRWISE_MHA_H

#include "styles/builtin_styles.h"

/* Whether pairwise shards @p m as a MultiheadAttention. */
bool dt__pairwise_mha_takes(const dt_module *m);
/* Its own parameters: in_proj_weight and in_proj_bias _S(0,sf=3) (each rank
 * the q, k and v rows of its heads). */
dt_status dt__pairwise_mha_plan(dt_module *m, const char *fqn, dt_style_param_placement *out,
                                int *n);
/* Its input: a local tensor wrapped as Replicate, as colwise takes it. */
void dt__pairwise_mha_io(dt_style_io *io);
/* Its child: out_proj rowwise (the one all-reduce). */
dt_status dt__pairwise_mha_children(dt_module *m, const char *fqn, dt_style_child *out, int *n);

#endif
