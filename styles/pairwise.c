/*
 * PairwiseParallel (PyTorch 2.0): a colwise layer followed by a rowwise one
 * inside one block, so the block takes a replicated input and gives a
 * replicated output with one all-reduce: FeedForward (w1 colwise, w2
 * rowwise), Attention (wq, wk, wv colwise on whole heads, wo rowwise), a
 * Sequential MLP whose Linear(-like) children come in colwise/rowwise pairs,
 * and a MultiheadAttention (fused in_proj: pairwise_mha.c). It applies the
 * default colwise / rowwise styles to those children through
 * dt_style_ops.children, the way a program's composite style would.
 */
#include <string.h>

#include "core/error.h"
#include "nn/nn_internal.h"
#include "styles/builtin_styles.h"
#include "styles/pairwise_mha.h"

typedef struct pair_child {
    dt_module *m;
    bool col; /* colwise, else rowwise */
} pair_child;

enum { PAIR_MAX = DT_STYLE_MAX_CHILDREN };

typedef struct named_child {
    const char *name;
    bool col;
} named_child;

static const named_child ffn_children[] = {{"w1", true}, {"w2", false}};
static const named_child attn_children[] = {
    {"wq", true}, {"wk", true}, {"wv", true}, {"wo", false}};

static dt_status named(dt_module *m, const char *fqn, const named_child *names, int n,
                       pair_child *out, int *count)
{
    for (int i = 0; i < n; i++) {
        dt_module *c = dt_module_child(m, names[i].name);
        if (c == NULL || !dt__module_is(c, &dt__linear_ops))
            return DT_ERR(DT_ERR_UNSUPPORTED, "'%s' has no Linear '%s'", fqn, names[i].name);
        out[(*count)++] = (pair_child){c, names[i].col};
    }
    return DT_OK;
}

/* A Sequential's Linear(-like) children in order, colwise and rowwise in
 * turn (an MLP with an even number of layers; activations between them stay
 * as they are). */
static dt_status sequential_pairs(dt_module *m, const char *fqn, pair_child *out, int *count)
{
    for (int i = 0; i < dt_module_num_children(m); i++) {
        dt_module *c = dt_module_child_at(m, i);
        dt_module_tp_kind kind;
        if (dt__module_tp(c, &kind) == NULL || kind != DT_MODULE_TP_LINEAR)
            continue;
        if (*count == PAIR_MAX)
            return DT_ERR(DT_ERR_UNSUPPORTED, "'%s' has over %d Linears", fqn, PAIR_MAX);
        out[*count] = (pair_child){c, *count % 2 == 0};
        (*count)++;
    }
    if (*count == 0 || *count % 2 != 0)
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "'%s' is a Sequential with %d Linear children: it needs an even number "
                      "(colwise/rowwise pairs)",
                      fqn, *count);
    return DT_OK;
}

/* The children pairwise shards, and how: FeedForward (w1, w2), Attention
 * (wq, wk, wv, wo) or a Sequential of Linear pairs. */
static dt_status children_of(dt_module *m, const char *fqn, pair_child *out, int *count)
{
    *count = 0;
    if (dt__module_is(m, &dt__feed_forward_ops))
        return named(m, fqn, ffn_children, 2, out, count);
    if (dt__module_is(m, &dt__attention_ops))
        return named(m, fqn, attn_children, 4, out, count);
    if (dt__module_is(m, &dt__sequential_ops))
        return sequential_pairs(m, fqn, out, count);
    return DT_ERR(DT_ERR_UNSUPPORTED,
                  "it cannot shard a %s (it takes FeedForward, Attention, MultiheadAttention or "
                  "a Sequential of Linear pairs)",
                  dt_module_type_name(m));
}

/* The block's own parameters: a MultiheadAttention's fused in_proj; none
 * otherwise (its children's come from their styles). */
static dt_status pairwise_plan(dt_module *m, const char *fqn, dt_style_param_placement *out, int *n)
{
    if (dt__pairwise_mha_takes(m))
        return dt__pairwise_mha_plan(m, fqn, out, n);
    return DT_OK;
}

/* The block's own input: a MultiheadAttention's is prepared as colwise's;
 * the other blocks' children prepare their own. */
static dt_status pairwise_io(const dt_style *s, dt_module *m, dt_style_io *io)
{
    (void)s;
    if (dt__pairwise_mha_takes(m))
        dt__pairwise_mha_io(io);
    return DT_OK;
}

/* The default colwise or rowwise style on each child children_of names. */
static dt_status pairwise_children(const dt_style *s, dt_module *m, const char *fqn,
                                   dt_style_child *out, int *n)
{
    (void)s;
    if (dt__pairwise_mha_takes(m))
        return dt__pairwise_mha_children(m, fqn, out, n);
    pair_child ch[PAIR_MAX];
    int nc = 0;
    DT_CHECK(children_of(m, fqn, ch, &nc));
    for (int i = 0; i < nc; i++) {
        out[*n] = (dt_style_child){.module = ch[i].m};
        DT_CHECK(ch[i].col ? dt_style_colwise(&out[*n].style) : dt_style_rowwise(&out[*n].style));
        (*n)++;
    }
    return DT_OK;
}

const dt_style_ops dt__style_pairwise = {
    .field_mask = DT_STYLE_OPS_FIELD_PLAN_IO | DT_STYLE_OPS_FIELD_CHILDREN,
    .name = "pairwise",
    .plan_params = pairwise_plan,
    .plan_io = pairwise_io,
    .children = pairwise_children,
};
