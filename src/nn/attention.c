/*
 * Causal self-attention. The head count comes from the width of wq's output
 * (local heads = width / head_dim), so a column-sharded wq whose output is
 * its local columns runs on its local heads without knowing about sharding.
 * Inside dt_gpt_forward_cached the KV cache (kv_cache.c) does the attending.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "core/error.h"
#include "dtensor/ops.h"
#include "nn/heads.h"
#include "nn/module_impl.h"
#include "nn/nn_internal.h"

typedef struct attention_impl {
    int64_t dim, n_heads, head_dim;
} attention_impl;

static dt_status attention_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    DT_CHECK(dt__module_check_inputs(m, n_in, in, 1));
    const attention_impl *impl = m->impl;
    if (dt_tensor_ndim(in[0]) != 3)
        return DT_ERR(DT_ERR_INVALID_ARG, "Attention '%s': input must be [B, T, dim], got %d dims",
                      m->name, dt_tensor_ndim(in[0]));
    enum { Q, K, V, QH, KH, VH, O, OM, N_TMP };
    dt_tensor *t[N_TMP] = {NULL};
    static const char *const proj[3] = {"wq", "wk", "wv"};
    static const char *const what[3] = {"q", "k", "v"};
    dt_status status = DT_OK;
    for (int i = 0; i < 3; i++) {
        DT_CHECK_GOTO(dt__module_call_child(m, proj[i], in[0], &t[Q + i]), status, out_release);
        DT_CHECK_GOTO(dt__heads_split(m, what[i], t[Q + i], impl->head_dim, &t[QH + i]), status,
                      out_release);
    }
    dt_kv_cache *cache = dt__kv_active();
    if (cache != NULL) { /* incremental decoding: the cache attends over past positions too */
        DT_CHECK_GOTO(dt__kv_attend(cache, m, t[QH], t[KH], t[VH], &t[O]), status, out_release);
    } else {
        DT_CHECK_GOTO(dt__heads_attend(t[QH], t[KH], t[VH], true, &t[O]), status, out_release);
    }
    DT_CHECK_GOTO(dt__heads_merge(t[O], &t[OM]), status, out_release);
    status = dt__module_call_child(m, "wo", t[OM], out);
out_release:
    for (int i = 0; i < N_TMP; i++)
        dt_tensor_release(t[i]);
    return status;
}

const dt_module_ops dt__attention_ops = {
    .type_name = "Attention", .forward = attention_forward, .destroy_impl = free};

dt_status dt_attention_create(int64_t dim, int64_t n_heads, dt_module **out)
{
    DT_ARG_NOT_NULL(out);
    if (dim <= 0 || n_heads <= 0 || dim % n_heads != 0)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_attention_create: n_heads %" PRId64
                      " must be positive and divide dim %" PRId64,
                      n_heads, dim);
    attention_impl *impl = malloc(sizeof(*impl));
    if (impl == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_attention_create: no memory");
    *impl = (attention_impl){.dim = dim, .n_heads = n_heads, .head_dim = dim / n_heads};
    dt_module *m = NULL;
    dt_status status;
    DT_CHECK(dt_module_create(&dt__attention_ops, impl, &m));
    static const char *const names[4] = {"wq", "wk", "wv", "wo"};
    for (int i = 0; i < 4; i++) {
        dt_module *lin = NULL;
        DT_CHECK_GOTO(dt_linear_create(dim, dim, true, &lin), status, err_destroy);
        DT_CHECK_GOTO(dt__module_adopt(m, names[i], lin), status, err_destroy);
    }
    *out = m;
    return DT_OK;

err_destroy:
    dt_module_destroy(m);
    return status;
}

dt_status dt_attention_config(const dt_module *m, int64_t *n_heads, int64_t *head_dim)
{
    DT_ARG_NOT_NULL(m);
    if (m->ops != &dt__attention_ops)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_attention_config: '%s' is a %s, not an Attention",
                      m->name, m->ops->type_name);
    const attention_impl *impl = m->impl;
    if (n_heads != NULL)
        *n_heads = impl->n_heads;
    if (head_dim != NULL)
        *head_dim = impl->head_dim;
    return DT_OK;
}
