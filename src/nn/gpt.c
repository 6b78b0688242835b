/* The reference GPT of the spec (shared spec gpt.md): build, forward, initialise. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "dtensor/ops.h"
#include "nn/module_impl.h"

#define GPT_LN_EPS 1e-5

typedef struct gpt_impl {
    dt_gpt_config cfg;
} gpt_impl;

dt_status dt_gpt_config_preset(const char *name, dt_gpt_config *out)
{
    DT_ARG_NOT_NULL(name);
    DT_ARG_NOT_NULL(out);
    if (strcmp(name, "tiny") == 0) {
        *out = (dt_gpt_config){.vocab_size = 256,
                               .max_seq_len = 64,
                               .dim = 64,
                               .n_layers = 2,
                               .n_heads = 4,
                               .ffn_dim = 256};
        return DT_OK;
    }
    if (strcmp(name, "small") == 0) {
        *out = (dt_gpt_config){.vocab_size = 4096,
                               .max_seq_len = 256,
                               .dim = 512,
                               .n_layers = 6,
                               .n_heads = 8,
                               .ffn_dim = 2048};
        return DT_OK;
    }
    return DT_ERR(DT_ERR_NOT_FOUND, "dt_gpt_config_preset: no preset '%s' (tiny, small)", name);
}

static dt_status check_config(const dt_gpt_config *c)
{
    const struct {
        const char *name;
        int64_t v;
    } f[] = {
        {"vocab_size", c->vocab_size}, {"max_seq_len", c->max_seq_len}, {"dim", c->dim},
        {"n_layers", c->n_layers},     {"n_heads", c->n_heads},         {"ffn_dim", c->ffn_dim}};
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
        if (f[i].v <= 0)
            return DT_ERR(DT_ERR_INVALID_ARG, "dt_gpt_create: %s must be positive, got %" PRId64,
                          f[i].name, f[i].v);
    if (c->dim % c->n_heads != 0)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_gpt_create: n_heads %" PRId64 " does not divide dim %" PRId64, c->n_heads,
                      c->dim);
    return DT_OK;
}

/* Positions first..first+t-1 as i64 on the host. */
static dt_status positions(int64_t first, int64_t t, dt_tensor **out)
{
    DT_CHECK(dt_tensor_arange(first + t, DT_DTYPE_I64, out));
    if (first == 0)
        return DT_OK;
    dt_tensor *all = *out;
    dt_status status = dt_tensor_narrow(all, 0, first, t, out);
    dt_tensor_release(all);
    return status;
}

/* h = tok_embeddings(ids) + pos_embeddings(first..first+T-1); first = 0 but
 * under a KV cache (the cached length) */
static dt_status embed(dt_module *m, dt_tensor *ids, int64_t first, dt_tensor **out)
{
    int64_t t = dt_tensor_dim(ids, 1);
    dt_tensor *tok = NULL, *pos_host = NULL, *pos_ids = NULL, *pos = NULL;
    dt_status status;
    DT_CHECK(dt__module_call_child(m, "tok_embeddings", ids, &tok));
    /* positions live where the ids do (arange builds them on the host) */
    DT_CHECK_GOTO(positions(first, t, &pos_host), status, out_release);
    DT_CHECK_GOTO(dt_tensor_to_device(pos_host, dt_tensor_device(ids), &pos_ids), status,
                  out_release);
    DT_CHECK_GOTO(dt__module_call_child(m, "pos_embeddings", pos_ids, &pos), status, out_release);
    status = dt_add(tok, pos, out);
out_release:
    dt_tensor_release(pos);
    dt_tensor_release(pos_ids);
    dt_tensor_release(pos_host);
    dt_tensor_release(tok);
    return status;
}

static dt_status gpt_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    DT_CHECK(dt__module_check_inputs(m, n_in, in, 1));
    const gpt_impl *impl = m->impl;
    dt_tensor *ids = in[0];
    if (dt_tensor_ndim(ids) != 2)
        return DT_ERR(DT_ERR_INVALID_ARG, "GPT: ids must be [B, T], got %d dims",
                      dt_tensor_ndim(ids));
    dt_kv_cache *cache = dt__kv_active();
    int64_t first = cache != NULL ? dt__kv_offset(cache) : 0;
    if (first + dt_tensor_dim(ids, 1) > impl->cfg.max_seq_len)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "GPT: sequence length %" PRId64 " exceeds max_seq_len %" PRId64,
                      first + dt_tensor_dim(ids, 1), impl->cfg.max_seq_len);
    dt_tensor *h = NULL, *hl = NULL, *n = NULL;
    dt_status status;
    DT_CHECK(embed(m, ids, first, &h));
    DT_CHECK_GOTO(dt__module_call_child(m, "layers", h, &hl), status, out_release);
    DT_CHECK_GOTO(dt__module_call_child(m, "norm", hl, &n), status, out_release);
    status = dt__module_call_child(m, "output", n, out);
out_release:
    dt_tensor_release(n);
    dt_tensor_release(hl);
    dt_tensor_release(h);
    return status;
}

static const dt_module_ops gpt_ops = {
    .type_name = "GPT", .forward = gpt_forward, .destroy_impl = free};

static dt_status build_children(dt_module *m, const dt_gpt_config *c)
{
    dt_module *x = NULL, *layers = NULL;
    DT_CHECK(dt_embedding_create(c->vocab_size, c->dim, &x));
    DT_CHECK(dt__module_adopt(m, "tok_embeddings", x));
    DT_CHECK(dt_embedding_create(c->max_seq_len, c->dim, &x));
    DT_CHECK(dt__module_adopt(m, "pos_embeddings", x));
    DT_CHECK(dt_sequential_create(&layers));
    DT_CHECK(dt__module_adopt(m, "layers", layers));
    for (int64_t i = 0; i < c->n_layers; i++) {
        DT_CHECK(dt_block_create(c->dim, c->n_heads, c->ffn_dim, GPT_LN_EPS, &x));
        dt_status status = dt_sequential_append(layers, x);
        if (status != DT_OK) {
            dt_module_destroy(x);
            return status;
        }
    }
    DT_CHECK(dt_layer_norm_create(c->dim, GPT_LN_EPS, &x));
    DT_CHECK(dt__module_adopt(m, "norm", x));
    DT_CHECK(dt_linear_create(c->dim, c->vocab_size, false, &x));
    DT_CHECK(dt__module_adopt(m, "output", x));
    return DT_OK;
}

dt_status dt_gpt_create(const dt_gpt_config *cfg, uint64_t seed, dt_module **out)
{
    DT_ARG_NOT_NULL(cfg);
    DT_ARG_NOT_NULL(out);
    DT_CHECK(check_config(cfg));
    gpt_impl *impl = malloc(sizeof(*impl));
    if (impl == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_gpt_create: no memory");
    impl->cfg = *cfg;
    dt_module *m = NULL;
    dt_status status;
    DT_CHECK(dt_module_create(&gpt_ops, impl, &m));
    DT_CHECK_GOTO(build_children(m, cfg), status, err_destroy);
    DT_CHECK_GOTO(dt_gpt_init(m, seed), status, err_destroy);
    *out = m;
    return DT_OK;

err_destroy:
    dt_module_destroy(m);
    return status;
}

const dt_gpt_config *dt_gpt_get_config(const dt_module *gpt)
{
    if (gpt == NULL || gpt->ops != &gpt_ops)
        return NULL;
    return &((const gpt_impl *)gpt->impl)->cfg;
}

typedef struct init_ctx {
    uint64_t seed;
    double std, std_proj; /* the residual projections (wo, w2) get std_proj */
} init_ctx;

/* Through the slot: a deferred parameter keeps the rule for dt_module_materialize. */
static dt_status init_one(const char *fqn, dt_module *owner, const char *name, dt_tensor *p,
                          void *user)
{
    (void)p;
    const init_ctx *c = user;
    const char *type = dt_module_type_name(owner);
    if (strcmp(type, "LayerNorm") == 0)
        return dt_module_param_init(owner, name, fqn, c->seed, 0.0,
                                    strcmp(name, "weight") == 0 ? 1.0 : 0.0);
    if (strcmp(name, "bias") == 0)
        return dt_module_param_init(owner, name, fqn, c->seed, 0.0, 0.0);
    const char *local = dt_module_name(owner);
    bool proj = strcmp(local, "wo") == 0 || strcmp(local, "w2") == 0;
    return dt_module_param_init(owner, name, fqn, c->seed, proj ? c->std_proj : c->std, 0.0);
}

dt_status dt_gpt_init(dt_module *gpt, uint64_t seed)
{
    const dt_gpt_config *cfg = dt_gpt_get_config(gpt);
    if (cfg == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_gpt_init: module is a %s, not a GPT",
                      dt_module_type_name(gpt));
    init_ctx c = {.seed = seed, .std = 0.02, .std_proj = 0.02 / sqrt(2.0 * (double)cfg->n_layers)};
    return dt_module_foreach_param(gpt, init_one, &c);
}
