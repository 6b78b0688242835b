/* The default table of sharding rules the ops layer dispatches to, and the
 * hooks autograd takes distributed tensors and gradients through. */
#include "autograd/dist_hooks.h"
#include "placement/rules/rules.h"

static dt_status wrap_like(dt_tensor *like, dt_tensor *local, dt_tensor **out)
{
    DT_CHECK(dt__check_dist("dt_tensor_detach", "t", like));
    return dt__dist_wrap(like->dist, local, out);
}

static const dt_dist_op_table g_rules = {
    .binary = dt__rl_binary,
    .unary = dt__rl_unary,
    .masked_fill = dt__rl_masked_fill,
    .matmul = dt__rl_matmul,
    .linear = dt__rl_linear,
    .softmax = dt__rl_softmax,
    .layer_norm = dt__rl_layer_norm,
    .embedding = dt__rl_embedding,
    .cross_entropy = dt__rl_cross_entropy,
    .reduce = dt__rl_reduce,
    .sum_all = dt__rl_sum_all,
    .reshape = dt__rl_reshape,
    .permute = dt__rl_permute,
    .narrow = dt__rl_narrow,
    .contiguous = dt__rl_contiguous,
    .concat = dt__rl_concat,
    .split = dt__rl_split,
};

static const dt_ag_dist_hooks g_grad_hooks = {
    .wrap_like = wrap_like,
    .grad_add = dt__rl_grad_add,
    .grad_materialize = dt__rl_grad_materialize,
};

void dt__dist_rules_install(void)
{
    dt__ops_offer_dist_table(&g_rules);
    dt__ag_offer_dist_hooks(&g_grad_hooks);
}
