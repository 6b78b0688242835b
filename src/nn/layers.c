/* The leaf layers: Linear, Embedding, LayerNorm. Each reads its slots at every forward. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "dtensor/autograd.h"
#include "dtensor/ops.h"
#include "nn/module_impl.h"
#include "nn/nn_internal.h"

/* ---------------------------------------------------------------- Linear */

static dt_status linear_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    DT_CHECK(dt__module_check_inputs(m, n_in, in, 1));
    dt_tensor *w = dt_module_param(m, "weight");
    if (w == NULL)
        return DT_ERR(DT_ERR_INTERNAL, "Linear '%s': weight slot is empty", m->name);
    return dt_linear(in[0], w, dt_module_param(m, "bias"), out);
}

static const dt_module_tp_param linear_tp[] = {
    {"weight", 0, 1}, {"bias", 0, -1}, {NULL, 0, 0}}; /* [out, in], [out] */
const dt_module_ops dt__linear_ops = {.type_name = "Linear",
                                      .forward = linear_forward,
                                      .tp_kind = DT_MODULE_TP_LINEAR,
                                      .tp_params = linear_tp};

dt_status dt_linear_create(int64_t in_features, int64_t out_features, bool bias, dt_module **out)
{
    DT_ARG_NOT_NULL(out);
    if (in_features <= 0 || out_features <= 0)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_linear_create: features must be positive, got in %" PRId64
                      " out %" PRId64,
                      in_features, out_features);
    dt_module *m = NULL;
    dt_status status;
    DT_CHECK(dt_module_create(&dt__linear_ops, NULL, &m));
    int64_t wshape[2] = {out_features, in_features};
    /* PyTorch's nn.Linear: kaiming_uniform(a = sqrt(5)) gives 1/sqrt(fan_in), as does the bias */
    double bound = 1.0 / sqrt((double)in_features);
    char key[64]; /* type and sizes: the default init's key (nn.h) */
    snprintf(key, sizeof(key), "Linear(%" PRId64 ",%" PRId64 ")", in_features, out_features);
    DT_CHECK_GOTO(dt__module_new_param(m, "weight", 2, wshape, 0.0), status, err_destroy);
    if (bias)
        DT_CHECK_GOTO(dt__module_new_param(m, "bias", 1, &out_features, 0.0), status, err_destroy);
    static const char *const names[2] = {"weight", "bias"};
    DT_CHECK_GOTO(dt__nn_default_init(m, key, bias ? 2 : 1, names, bound), status, err_destroy);
    *out = m;
    return DT_OK;

err_destroy:
    dt_module_destroy(m);
    return status;
}

/* ---------------------------------------------------------------- Embedding */

static dt_status embedding_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    DT_CHECK(dt__module_check_inputs(m, n_in, in, 1));
    dt_tensor *w = dt_module_param(m, "weight");
    if (w == NULL)
        return DT_ERR(DT_ERR_INTERNAL, "Embedding '%s': weight slot is empty", m->name);
    return dt_embedding(w, in[0], out);
}

static const dt_module_tp_param embedding_tp[] = {{"weight", 1, 0}, {NULL, 0, 0}}; /* [n, dim] */
const dt_module_ops dt__embedding_ops = {.type_name = "Embedding",
                                         .forward = embedding_forward,
                                         .tp_kind = DT_MODULE_TP_EMBEDDING,
                                         .tp_params = embedding_tp};

dt_status dt_embedding_create(int64_t num_embeddings, int64_t dim, dt_module **out)
{
    DT_ARG_NOT_NULL(out);
    if (num_embeddings <= 0 || dim <= 0)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_embedding_create: sizes must be positive, got %" PRId64 " x %" PRId64,
                      num_embeddings, dim);
    dt_module *m = NULL;
    dt_status status;
    DT_CHECK(dt_module_create(&dt__embedding_ops, NULL, &m));
    int64_t shape[2] = {num_embeddings, dim};
    char key[64]; /* type and sizes: the default init's key (nn.h) */
    snprintf(key, sizeof(key), "Embedding(%" PRId64 ",%" PRId64 ")", num_embeddings, dim);
    DT_CHECK_GOTO(dt__module_new_param(m, "weight", 2, shape, 0.0), status, err_destroy);
    /* nn.Embedding: N(0, 1) */
    static const char *const names[1] = {"weight"};
    DT_CHECK_GOTO(dt__nn_default_init(m, key, 1, names, 0.0), status, err_destroy);
    *out = m;
    return DT_OK;

err_destroy:
    dt_module_destroy(m);
    return status;
}

/* ---------------------------------------------------------------- LayerNorm */

typedef struct layer_norm_impl {
    double eps;
} layer_norm_impl;

static dt_status layer_norm_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    DT_CHECK(dt__module_check_inputs(m, n_in, in, 1));
    const layer_norm_impl *impl = m->impl;
    return dt_layer_norm(in[0], dt_module_param(m, "weight"), dt_module_param(m, "bias"), impl->eps,
                         out);
}

const dt_module_ops dt__layer_norm_ops = {
    .type_name = "LayerNorm", .forward = layer_norm_forward, .destroy_impl = free};

dt_status dt_layer_norm_create(int64_t dim, double eps, dt_module **out)
{
    DT_ARG_NOT_NULL(out);
    if (dim <= 0 || !(eps > 0.0))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_layer_norm_create: need dim > 0 and eps > 0, got %" PRId64 " and %g", dim,
                      eps);
    layer_norm_impl *impl = malloc(sizeof(*impl));
    if (impl == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_layer_norm_create: no memory");
    impl->eps = eps;
    dt_module *m = NULL;
    dt_status status;
    DT_CHECK(dt_module_create(&dt__layer_norm_ops, impl, &m));
    DT_CHECK_GOTO(dt__module_new_param(m, "weight", 1, &dim, 1.0), status, err_destroy);
    DT_CHECK_GOTO(dt__module_new_param(m, "bias", 1, &dim, 0.0), status, err_destroy);
    *out = m;
    return DT_OK;

err_destroy:
    dt_module_destroy(m);
    return status;
}
