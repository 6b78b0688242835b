/*
 * Self-attention in PyTorch's nn.MultiheadAttention layout (batch_first,
 * query = key = value = x): one fused input projection in_proj_weight [3E, E]
 * and in_proj_bias [3E] (rows: q, then k, then v), child out_proj Linear(E, E).
 * The state dict is PyTorch's. The forward runs each of q, k, v as a linear
 * on its third of the rows; a third of a tensor parallel in_proj (pairwise:
 * _S(0,sf=3), every rank the q, k and v rows of its heads) is a plain S(0)
 * tensor, so each projection computes as a colwise Linear and is handed on as
 * its local columns: this rank's heads (heads = local width / head_dim).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "dtensor/ops.h"
#include "dtensor/placement.h"
#include "nn/heads.h"
#include "nn/module_impl.h"
#include "nn/nn_internal.h"

typedef struct mha_impl {
    int64_t dim, n_heads, head_dim;
    bool causal;
} mha_impl;

/* Where in_proj lives when distributed: the mesh dim of its _S(0,sf=3), the
 * others Replicate; DT_ERR_UNSUPPORTED for any other layout. */
static dt_status check_layout(const dt_module *m, const char *name, dt_tensor *p, int *split)
{
    const dt_placement *pl = dt_tensor_placements(p);
    int n = dt_mesh_ndim(dt_tensor_mesh(p));
    *split = -1;
    for (int k = 0; k < n; k++) {
        if (pl[k].kind == DT_PLACEMENT_SHARD && pl[k].dim == 0 && pl[k].split_factor == 3 &&
            *split < 0)
            *split = k;
        else if (pl[k].kind != DT_PLACEMENT_REPLICATE)
            *split = -2;
    }
    if (*split >= 0)
        return DT_OK;
    char txt[128];
    dt_placements_format(n, pl, ",", txt, sizeof(txt));
    return DT_ERR(DT_ERR_UNSUPPORTED,
                  "MultiheadAttention '%s': %s is placed %s; it computes on a local one, or one "
                  "placed _S(0,sf=3) on one mesh dim and R on the others (the pairwise style)",
                  m->name, name, txt);
}

/* Part @p i (q, k, v) of in_proj parameter @p p: rows [i*E, (i+1)*E). A
 * local parameter gives a view; a distributed one the same third of its
 * shard, wrapped as S(0) of the [E, ...] part (no communication). */
static dt_status proj_part(const dt_module *m, const char *name, dt_tensor *p, int i,
                           dt_tensor **out)
{
    if (!dt_tensor_is_distributed(p))
        return dt_narrow(p, 0, i * (dt_tensor_dim(p, 0) / 3), dt_tensor_dim(p, 0) / 3, out);
    int split = -1;
    DT_CHECK(check_layout(m, name, p, &split));
    dt_tensor *local = dt_to_local(p), *part = NULL;
    int64_t rows = dt_tensor_dim(local, 0) / 3;
    DT_CHECK(dt_narrow(local, 0, i * rows, rows, &part));
    dt_placement pl[DT_MESH_MAX_DIMS];
    int64_t shape[DT_MAX_DIMS];
    int n = dt_mesh_ndim(dt_tensor_mesh(p)), nd = dt_tensor_ndim(p);
    for (int k = 0; k < n; k++)
        pl[k] = k == split ? dt_shard(0) : dt_replicate();
    for (int d = 0; d < nd; d++)
        shape[d] = dt_tensor_dim(p, d);
    shape[0] /= 3;
    dt_status s = dt_from_local(part, dt_tensor_mesh(p), n, pl, shape, out);
    dt_tensor_release(part);
    return s;
}

/* Projection @p i of @p x: [B, S, E] -> [B, S, heads here * head_dim], local. */
static dt_status project(dt_module *m, dt_tensor *x, int i, dt_tensor **out)
{
    dt_tensor *w = dt_module_param(m, "in_proj_weight"), *b = dt_module_param(m, "in_proj_bias");
    dt_tensor *wi = NULL, *bi = NULL, *y = NULL;
    dt_status s;
    if (w == NULL || b == NULL)
        return DT_ERR(DT_ERR_INTERNAL, "MultiheadAttention '%s': in_proj slots are empty", m->name);
    if (dt_tensor_is_distributed(w) && !dt_tensor_is_distributed(x))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "MultiheadAttention '%s': in_proj_weight is distributed but the input is "
                      "a local tensor (parallelize the module with the pairwise style, whose "
                      "hook makes the input a Replicate tensor)",
                      m->name);
    DT_CHECK_GOTO(proj_part(m, "in_proj_weight", w, i, &wi), s, out_release);
    DT_CHECK_GOTO(proj_part(m, "in_proj_bias", b, i, &bi), s, out_release);
    DT_CHECK_GOTO(dt_linear(x, wi, bi, &y), s, out_release);
    if (dt_tensor_is_distributed(y)) { /* colwise: its local columns are this rank's heads */
        *out = dt_tensor_retain(dt_to_local(y));
        dt_tensor_release(y);
    } else {
        *out = y;
    }
out_release:
    dt_tensor_release(bi);
    dt_tensor_release(wi);
    return s;
}

static dt_status mha_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    DT_CHECK(dt__module_check_inputs(m, n_in, in, 1));
    const mha_impl *impl = m->impl;
    if (dt_tensor_ndim(in[0]) != 3 || dt_tensor_dim(in[0], 2) != impl->dim)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "MultiheadAttention '%s': input must be [B, S, %" PRId64
                      "] (batch_first), got %d dims, last %" PRId64,
                      m->name, impl->dim, dt_tensor_ndim(in[0]), dt_tensor_dim(in[0], -1));
    enum { Q, K, V, QH, KH, VH, O, OM, N_TMP };
    dt_tensor *t[N_TMP] = {NULL};
    static const char *const what[3] = {"q", "k", "v"};
    dt_status s = DT_OK;
    for (int i = 0; i < 3; i++) {
        DT_CHECK_GOTO(project(m, in[0], i, &t[Q + i]), s, out_release);
        DT_CHECK_GOTO(dt__heads_split(m, what[i], t[Q + i], impl->head_dim, &t[QH + i]), s,
                      out_release);
    }
    DT_CHECK_GOTO(dt__heads_attend(t[QH], t[KH], t[VH], impl->causal, &t[O]), s, out_release);
    DT_CHECK_GOTO(dt__heads_merge(t[O], &t[OM]), s, out_release);
    s = dt__module_call_child(m, "out_proj", t[OM], out);
out_release:
    for (int i = 0; i < N_TMP; i++)
        dt_tensor_release(t[i]);
    return s;
}

const dt_module_ops dt__mha_ops = {
    .type_name = "MultiheadAttention", .forward = mha_forward, .destroy_impl = free};

/* PyTorch's _reset_parameters: xavier_uniform_ in_proj_weight, zero biases;
 * out_proj.weight keeps the Linear default. */
static dt_status mha_init(dt_module *m, int64_t dim, int64_t n_heads)
{
    int64_t wshape[2] = {3 * dim, dim}, bshape = 3 * dim;
    char key[64];
    snprintf(key, sizeof(key), "MultiheadAttention(%" PRId64 ",%" PRId64 ")", dim, n_heads);
    DT_CHECK(dt__module_new_param(m, "in_proj_weight", 2, wshape, 0.0));
    DT_CHECK(dt__module_new_param(m, "in_proj_bias", 1, &bshape, 0.0));
    static const char *const names[1] = {"in_proj_weight"};
    double bound = sqrt(6.0 / (double)(dim + 3 * dim)); /* fan_in E, fan_out 3E */
    DT_CHECK(dt__nn_default_init(m, key, 1, names, bound));
    dt_module *proj = NULL;
    DT_CHECK(dt_linear_create(dim, dim, true, &proj));
    DT_CHECK(dt__module_adopt(m, "out_proj", proj));
    dt__init_rule zero = {.kind = DT__INIT_CONST, .a = 0.0};
    return dt__param_init_slot(dt_module_child(m, "out_proj"), "bias", "out_proj.bias", &zero);
}

dt_status dt_multihead_attention_create(int64_t embed_dim, int64_t num_heads, bool causal,
                                        dt_module **out)
{
    DT_ARG_NOT_NULL(out);
    if (embed_dim <= 0 || num_heads <= 0 || embed_dim % num_heads != 0)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_multihead_attention_create: num_heads %" PRId64
                      " must be positive and divide embed_dim %" PRId64,
                      num_heads, embed_dim);
    mha_impl *impl = malloc(sizeof(*impl));
    if (impl == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_multihead_attention_create: no memory");
    *impl = (mha_impl){.dim = embed_dim,
                       .n_heads = num_heads,
                       .head_dim = embed_dim / num_heads,
                       .causal = causal};
    dt_module *m = NULL;
    DT_CHECK(dt_module_create(&dt__mha_ops, impl, &m));
    dt_status s = mha_init(m, embed_dim, num_heads);
    if (s != DT_OK) {
        dt_module_destroy(m);
        return s;
    }
    *out = m;
    return DT_OK;
}

dt_status dt_multihead_attention_config(const dt_module *m, int64_t *num_heads, int64_t *head_dim,
                                        bool *causal)
{
    DT_ARG_NOT_NULL(m);
    if (m->ops != &dt__mha_ops)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_multihead_attention_config: '%s' is a %s, not a MultiheadAttention",
                      m->name, m->ops->type_name);
    const mha_impl *impl = m->impl;
    if (num_heads != NULL)
        *num_heads = impl->n_heads;
    if (head_dim != NULL)
        *head_dim = impl->head_dim;
    if (causal != NULL)
        *causal = impl->causal;
    return DT_OK;
}
