/* The dp_api tests' shared pieces (test_api.c, test_api_mixed_precision.c):
 * the GPT, its token data and a rank's share of a batch. */
#include "dp_api_common.h"

dt_token_data *data;
dt_gpt_config cfg;

const char *const fqns[N_FQNS] = {"layers.1.feed_forward.w2.weight", "tok_embeddings.weight",
                                  "output.weight"};

int setup(void **state)
{
    return mr_setup_gpt(state, SEQ, &data, &cfg);
}

int teardown(void **state)
{
    dt_token_data_close(data);
    return mr_teardown(state);
}

double share(dt_mesh *mesh, int64_t b)
{
    int64_t R = dt_mesh_size(mesh), r = dt_mesh_rank(mesh);
    return (double)((r + 1) * b / R - r * b / R) / (double)b;
}

double fwd_bwd(dt_module *m, dt_mesh *mesh, int64_t step, double clip)
{
    int R = mesh != NULL ? dt_mesh_size(mesh) : 1, r = mesh != NULL ? dt_mesh_rank(mesh) : 0;
    dt_tensor *x = NULL, *y = NULL, *logits = NULL, *loss = NULL;
    DP_OK(dt_token_data_batch(data, step, BATCH, SEQ, r * BATCH / R, (r + 1) * BATCH / R, &x, &y));
    DP_OK(dt_module_call(m, x, &logits));
    DP_OK(dt_nn_cross_entropy(logits, y, &loss));
    DP_OK(dt_backward(loss, NULL));
    double norm = 0.0;
    if (clip > 0.0)
        DP_OK(dt_clip_grad_norm(m, clip, &norm));
    dt_tensor_release(logits);
    dt_tensor_release(loss);
    dt_tensor_release(x);
    dt_tensor_release(y);
    return norm;
}

double grad_diff(dt_module *m, dt_module *ref, const char *fqn)
{
    dt_tensor *full = mr_full_grad(mr_param_at(m, fqn));
    dt_tensor *rg = dt_tensor_grad(mr_param_at(ref, fqn));
    assert_non_null(rg);
    const float *a = dt_tensor_data(full), *b = dt_tensor_data(rg);
    double d = 0.0, n = 0.0;
    for (int64_t i = 0; i < dt_tensor_numel(rg); i++)
        d += (a[i] - b[i]) * (double)(a[i] - b[i]), n += (double)b[i] * b[i];
    dt_tensor_release(full);
    return sqrt(d / n);
}

void dp_and_reference(dt_mesh *mesh, dt_dp_stage stage, dt_dtype reduce, dt_module **m,
                      dt_module **ref)
{
    DP_OK(dt_gpt_create(&cfg, 1234, m));
    DP_OK(dt_gpt_create(&cfg, 1234, ref));
    dt_fsdp_params fp = {.field_mask = DT_FSDP_PARAM_FIELD_STAGE | DT_FSDP_PARAM_FIELD_GRAD_SCALE |
                                       DT_FSDP_PARAM_FIELD_REDUCE_DTYPE,
                         .stage = stage,
                         .grad_scale = share(mesh, BATCH),
                         .reduce_dtype = reduce};
    DP_OK(dt_fully_shard(*m, mesh, "dp", &fp));
}
