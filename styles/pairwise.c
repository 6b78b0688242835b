/*
 * PairwiseParallel (PyTorch 2.0): a colwise layer followed by a rowwise one
 * inside one block, so the block takes a replicated input and gives a
 * replicated output with one all-reduce: FeedForward (w1 colwise, w2
 * rowwise), Attention (wq, wk, wv colwise on whole heads, wo rowwise), a
 * Sequential MLP whose Linear(-like) children come in colwise/rowwise pairs,
 * and a MultiheadAttention (fused in_proj: pairwise_mha.c).
 * It applies the default colwise / rowwise styles to those children.
 */
#include <string.h>

#include "core/error.h"
#include "nn/nn_internal.h"
#include "styles/pairwise_mha.h"
#include "styles/style_kind.h"

typedef struct pair_child {
    dt_module *m;
    bool col; /* colwise, else rowwise */
} pair_child;

enum { PAIR_MAX = 64 };

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
            return DT_ERR(DT_ERR_UNSUPPORTED, "parallelize: pairwise on '%s': no Linear '%s'", fqn,
                          names[i].name);
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
            return DT_ERR(DT_ERR_UNSUPPORTED, "parallelize: pairwise on '%s': over %d Linears", fqn,
                          PAIR_MAX);
        out[*count] = (pair_child){c, *count % 2 == 0};
        (*count)++;
    }
    if (*count == 0 || *count % 2 != 0)
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "parallelize: pairwise on '%s', a Sequential with %d Linear children: it "
                      "needs an even number (colwise/rowwise pairs)",
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
                  "parallelize: pairwise cannot shard '%s', a %s (it takes FeedForward, "
                  "Attention, MultiheadAttention or a Sequential of Linear pairs)",
                  fqn, dt_module_type_name(m));
}

static void pairwise_defaults(dt_style *s)
{
    (void)s;
}

static dt_status pairwise_plan(const dt_style *s, dt_module *m, const char *fqn,
                               dt_style_param_plan *out, int *n)
{
    if (dt__pairwise_mha_takes(m)) /* fused q/k/v rows: pairwise_mha.c */
        return dt__pairwise_mha_plan(s, m, fqn, out, n);
    pair_child ch[PAIR_MAX];
    int nc = 0;
    DT_CHECK(children_of(m, fqn, ch, &nc));
    for (int i = 0; i < nc; i++) {
        const dt__style_kind_ops *k = ch[i].col ? &dt__style_colwise_ops : &dt__style_rowwise_ops;
        DT_CHECK(k->param_plan(s, ch[i].m, fqn, out, n));
    }
    return DT_OK;
}

static dt_status pairwise_hooks(const dt_style *s, dt_module *m, dt_mesh *tp)
{
    if (dt__pairwise_mha_takes(m))
        return dt__pairwise_mha_hooks(s, m, tp);
    pair_child ch[PAIR_MAX];
    int nc = 0;
    DT_CHECK(children_of(m, "", ch, &nc));
    dt_style *col = NULL, *row = NULL;
    dt_status status;
    DT_CHECK(dt_style_colwise(&col));
    DT_CHECK_GOTO(dt_style_rowwise(&row), status, out_release);
    for (int i = 0; i < nc; i++) {
        const dt_style *st = ch[i].col ? col : row;
        DT_CHECK_GOTO(dt__style_kind_ops_of(st->kind)->add_hooks(st, ch[i].m, tp), status,
                      out_release);
    }
out_release:
    dt_style_release(row);
    dt_style_release(col);
    return status;
}

const dt__style_kind_ops dt__style_pairwise_ops = {
    .name = "pairwise",
    .allowed_fields = 0,
    .defaults = pairwise_defaults,
    .param_plan = pairwise_plan,
    .add_hooks = pairwise_hooks,
};
