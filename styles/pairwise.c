/*
 * PairwiseParallel (PyTorch 2.0): a colwise layer followed by a rowwise one
 * inside one block, so the block takes a replicated input and gives a
 * replicated output with one all-reduce: FeedForward (w1 colwise, w2
 * rowwise) and Attention (wq, wk, wv colwise on whole heads, wo rowwise).
 * It applies the default colwise / rowwise styles to those children.
 */
#include <string.h>

#include "core/error.h"
#include "nn/nn_internal.h"
#include "styles/style_kind.h"

typedef struct pair_child {
    const char *name;
    bool col;
} pair_child;

static const pair_child ffn_children[] = {{"w1", true}, {"w2", false}};
static const pair_child attn_children[] = {{"wq", true}, {"wk", true}, {"wv", true}, {"wo", false}};

static int children_of(const dt_module *m, const pair_child **out)
{
    if (dt__module_is(m, &dt__feed_forward_ops)) {
        *out = ffn_children;
        return 2;
    }
    if (dt__module_is(m, &dt__attention_ops)) {
        *out = attn_children;
        return 4;
    }
    return 0;
}

static void pairwise_defaults(dt_style *s)
{
    (void)s;
}

static dt_status pairwise_plan(const dt_style *s, dt_module *m, const char *fqn,
                               dt_style_param_plan *out, int *n)
{
    (void)s;
    const pair_child *ch = NULL;
    int nc = children_of(m, &ch);
    if (nc == 0)
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "parallelize: pairwise cannot shard '%s', a %s (it takes FeedForward or "
                      "Attention)",
                      fqn, dt_module_type_name(m));
    for (int i = 0; i < nc; i++) {
        dt_module *c = dt_module_child(m, ch[i].name);
        if (c == NULL || !dt__module_is(c, &dt__linear_ops))
            return DT_ERR(DT_ERR_UNSUPPORTED, "parallelize: pairwise on '%s': no Linear '%s'", fqn,
                          ch[i].name);
        const dt__style_kind_ops *k = ch[i].col ? &dt__style_colwise_ops : &dt__style_rowwise_ops;
        DT_CHECK(k->param_plan(s, c, fqn, out, n));
    }
    return DT_OK;
}

static dt_status pairwise_hooks(const dt_style *s, dt_module *m, dt_mesh *tp)
{
    (void)s;
    const pair_child *ch = NULL;
    int nc = children_of(m, &ch);
    dt_style *col = NULL, *row = NULL;
    dt_status status;
    DT_CHECK(dt_style_colwise(&col));
    DT_CHECK_GOTO(dt_style_rowwise(&row), status, out_release);
    for (int i = 0; i < nc; i++) {
        const dt_style *st = ch[i].col ? col : row;
        DT_CHECK_GOTO(
            dt__style_kind_ops_of(st->kind)->add_hooks(st, dt_module_child(m, ch[i].name), tp),
            status, out_release);
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
