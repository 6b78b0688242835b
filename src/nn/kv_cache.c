/*
 * The KV cache of incremental decoding (nn.h, "incremental decoding").
 * dt_gpt_forward_cached binds the cache to the calling thread for one
 * dt_module_forward of the GPT, so the forward keeps its hooks (parallel
 * styles) and signature; the GPT shifts its positions by the cache length
 * and each Attention asks for its layer's keys and values (dt__kv_attend).
 * Each layer's tensors are allocated at its first use, shaped like what the
 * Attention computes on: under colwise wq/wk/wv, its local heads.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "core/error.h"
#include "dtensor/autograd.h"
#include "dtensor/ops.h"
#include "nn/heads.h"
#include "nn/module_impl.h"

struct dt_kv_cache {
    dt_module *gpt;
    int64_t batch, max_len, len;
    int n_layers;
    dt_module **attn;   /* the Attention modules, pre-order */
    dt_tensor **k, **v; /* per layer [batch, heads, max_len, head_dim], NULL until used */
};

static _Thread_local dt_kv_cache *active; /* of the running dt_gpt_forward_cached */

dt_kv_cache *dt__kv_active(void)
{
    return active;
}

int64_t dt__kv_offset(const dt_kv_cache *c)
{
    return c->len;
}

static dt_status count_attention(const char *fqn, dt_module *m, void *user)
{
    (void)fqn;
    dt_kv_cache *c = user;
    if (m->ops == &dt__attention_ops) {
        if (c->attn != NULL)
            c->attn[c->n_layers] = m;
        c->n_layers++;
    }
    return DT_OK;
}

dt_status dt_kv_cache_create(dt_module *gpt, int64_t batch, int64_t max_len, dt_kv_cache **out)
{
    DT_ARG_NOT_NULL(out);
    const dt_gpt_config *cfg = dt_gpt_get_config(gpt);
    if (cfg == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_kv_cache_create: module is a %s, not a GPT",
                      dt_module_type_name(gpt));
    if (batch < 1 || max_len < 1 || max_len > cfg->max_seq_len)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_kv_cache_create: batch %" PRId64 " must be >= 1 and max_len %" PRId64
                      " in [1, max_seq_len %" PRId64 "]",
                      batch, max_len, cfg->max_seq_len);
    dt_kv_cache *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_kv_cache_create: no memory");
    *c = (dt_kv_cache){.gpt = gpt, .batch = batch, .max_len = max_len};
    (void)dt_module_foreach(gpt, count_attention, c); /* first pass: how many */
    int n = c->n_layers;
    c->attn = calloc((size_t)n + 1, sizeof(*c->attn));
    c->k = calloc((size_t)n + 1, sizeof(*c->k));
    c->v = calloc((size_t)n + 1, sizeof(*c->v));
    if (c->attn == NULL || c->k == NULL || c->v == NULL) {
        dt_kv_cache_destroy(c);
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_kv_cache_create: no memory");
    }
    c->n_layers = 0;
    (void)dt_module_foreach(gpt, count_attention, c); /* second pass: record them */
    *out = c;
    return DT_OK;
}

void dt_kv_cache_destroy(dt_kv_cache *c)
{
    if (c == NULL)
        return;
    for (int i = 0; c->k != NULL && c->v != NULL && i < c->n_layers; i++) {
        dt_tensor_release(c->k[i]);
        dt_tensor_release(c->v[i]);
    }
    free(c->attn);
    free(c->k);
    free(c->v);
    free(c);
}

int64_t dt_kv_cache_length(const dt_kv_cache *c)
{
    return c == NULL ? 0 : c->len;
}

int64_t dt_kv_cache_nbytes(const dt_kv_cache *c)
{
    int64_t n = 0;
    for (int i = 0; c != NULL && i < c->n_layers; i++)
        if (c->k[i] != NULL)
            n += (int64_t)(dt_tensor_nbytes(c->k[i]) + dt_tensor_nbytes(c->v[i]));
    return n;
}

void dt_kv_cache_reset(dt_kv_cache *c)
{
    if (c != NULL)
        c->len = 0;
}

/* Layer @p i's keys and values, allocated like @p kh [B, H, T, hd] at first use. */
static dt_status layer_tensors(dt_kv_cache *c, int i, const dt_tensor *kh)
{
    int64_t shape[4] = {c->batch, dt_tensor_dim(kh, 1), c->max_len, dt_tensor_dim(kh, 3)};
    if (c->k[i] == NULL) {
        dt_device dev = dt_tensor_device(kh);
        DT_CHECK(dt_tensor_zeros(4, shape, dt_tensor_dtype(kh), dev, &c->k[i]));
        DT_CHECK(dt_tensor_zeros(4, shape, dt_tensor_dtype(kh), dev, &c->v[i]));
        dt_tensor_set_mem_category(c->k[i], DT_MEM_ACTIVATION);
        dt_tensor_set_mem_category(c->v[i], DT_MEM_ACTIVATION);
    }
    const int64_t *have = dt_tensor_shape(c->k[i]);
    if (dt_tensor_dim(kh, 0) != c->batch || have[1] != shape[1] || have[3] != shape[3])
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "KV cache: layer %d keys are [%" PRId64 ", %" PRId64 ", T, %" PRId64
                      "], the cache holds [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]",
                      i, dt_tensor_dim(kh, 0), shape[1], shape[3], have[0], have[1], have[2],
                      have[3]);
    return DT_OK;
}

/* Write @p x [B, H, T, hd] at positions [at, at+T) of @p cache; *all = positions [0, at+T). */
static dt_status append(dt_tensor *cache, int64_t at, dt_tensor *x, dt_tensor **all)
{
    int64_t t = dt_tensor_dim(x, 2);
    dt_tensor *dst = NULL;
    DT_CHECK(dt_tensor_narrow(cache, 2, at, t, &dst));
    dt_status status = dt_tensor_copy_(dst, x);
    dt_tensor_release(dst);
    DT_CHECK(status);
    return dt_tensor_narrow(cache, 2, 0, at + t, all);
}

static int layer_of(const dt_kv_cache *c, const dt_module *m)
{
    for (int i = 0; i < c->n_layers; i++)
        if (c->attn[i] == m)
            return i;
    return -1;
}

dt_status dt__kv_attend(dt_kv_cache *c, const dt_module *m, dt_tensor *qh, dt_tensor *kh,
                        dt_tensor *vh, dt_tensor **o)
{
    int i = layer_of(c, m);
    if (i < 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "KV cache: Attention '%s' is not in the cached model",
                      m->name);
    if (dt_tensor_is_distributed(kh) || dt_tensor_is_distributed(qh))
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "KV cache: Attention '%s' has distributed q/k/v; the cache needs local "
                      "heads (colwise wq/wk/wv with local outputs, or no parallelism)",
                      m->name);
    DT_CHECK(layer_tensors(c, i, kh));
    dt_tensor *k = NULL, *v = NULL;
    dt_status status;
    DT_CHECK_GOTO(append(c->k[i], c->len, kh, &k), status, out_release);
    DT_CHECK_GOTO(append(c->v[i], c->len, vh, &v), status, out_release);
    /* new query i sees keys 0..len+i: the causal mask aligned to the end */
    status = dt__heads_attend(qh, k, v, true, o);
out_release:
    dt_tensor_release(v);
    dt_tensor_release(k);
    return status;
}

static dt_status check_ids(const dt_kv_cache *c, dt_tensor *ids)
{
    if (dt_tensor_ndim(ids) != 2 || dt_tensor_dim(ids, 0) != c->batch || dt_tensor_dim(ids, 1) < 1)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_gpt_forward_cached: ids must be [%" PRId64 ", T >= 1], got %d dims",
                      c->batch, dt_tensor_ndim(ids));
    int64_t t = dt_tensor_dim(ids, 1);
    if (c->len + t > c->max_len)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_gpt_forward_cached: %" PRId64 " cached + %" PRId64
                      " new positions exceed the cache's max_len %" PRId64,
                      c->len, t, c->max_len);
    return DT_OK;
}

dt_status dt_gpt_forward_cached(dt_module *gpt, dt_kv_cache *c, dt_tensor *ids, dt_tensor **logits)
{
    DT_ARG_NOT_NULL(gpt);
    DT_ARG_NOT_NULL(c);
    DT_ARG_NOT_NULL(ids);
    DT_ARG_NOT_NULL(logits);
    if (c->gpt != gpt)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_gpt_forward_cached: the cache was made for another "
                                          "model");
    if (active != NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_gpt_forward_cached: called inside a cached forward");
    DT_CHECK(check_ids(c, ids));
    bool grad = dt_grad_set_enabled(false);
    active = c;
    dt_status status = dt_module_forward(gpt, 1, &ids, logits);
    active = NULL;
    dt_grad_set_enabled(grad);
    if (status == DT_OK)
        c->len += dt_tensor_dim(ids, 1);
    return status;
}
