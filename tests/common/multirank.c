/* Scaffolding of the multi-rank tests: see multirank.h. */
#include "common/multirank.h"

dt_runtime *mr_rt;

int mr_setup(void **state)
{
    (void)state;
    dt_status s = dt_init(NULL, &mr_rt);
    if (s != DT_OK) {
        fprintf(stderr, "dt_init: %s: %s\n", dt_status_str(s), dt_last_error());
        return -1;
    }
    return 0;
}

int mr_teardown(void **state)
{
    (void)state;
    if (mr_rt != NULL)
        dt_comm_barrier(dt_runtime_world(mr_rt), NULL);
    dt_runtime_destroy(mr_rt);
    mr_rt = NULL;
    return 0;
}

int mr_setup_gpt(void **state, int64_t seq, dt_token_data **data, dt_gpt_config *cfg)
{
    if (mr_setup(state) != 0)
        return -1;
    *data = mr_learnable_tokens();
    if (*data == NULL || dt_gpt_config_preset("tiny", cfg) != DT_OK)
        return -1;
    cfg->max_seq_len = seq;
    return 0;
}

void mr_barrier(void)
{
    MR_OK(dt_comm_barrier(dt_runtime_world(mr_rt), NULL));
}

dt_token_data *mr_learnable_tokens(void)
{
    enum { N = 4096 };
    uint16_t t[N];
    for (int i = 0; i < N; i++)
        t[i] = (uint16_t)((3 * i + i / 5) % 50);
    dt_token_data *d = NULL;
    return dt_token_data_from_buffer(t, N, &d) == DT_OK ? d : NULL;
}

dt_mesh *mr_world_mesh(const char *dim)
{
    int w = dt_runtime_size(mr_rt);
    const char *names[1] = {dim};
    dt_mesh *m = NULL;
    MR_OK(dt_mesh_create(mr_rt, 1, &w, names, &m));
    return m;
}

dt_mesh *mr_dp_tp_mesh(int dp, int tp)
{
    int shape[2] = {dp, tp};
    const char *names[2] = {"dp", "tp"};
    dt_mesh *m = NULL;
    MR_OK(dt_mesh_create(mr_rt, 2, shape, names, &m));
    return m;
}

dt_tensor *mr_param_at(dt_module *root, const char *fqn)
{
    char mod[256];
    const char *dot = strrchr(fqn, '.');
    snprintf(mod, sizeof(mod), "%.*s", dot != NULL ? (int)(dot - fqn) : 0, fqn);
    dt_module *m = NULL;
    MR_OK(dt_module_find(root, mod, &m));
    return dt_module_param(m, dot != NULL ? dot + 1 : fqn);
}

typedef struct init_ctx {
    uint64_t seed;
    double std;
} init_ctx;

static dt_status init_one(const char *fqn, dt_module *o, const char *name, dt_tensor *p, void *u)
{
    (void)o, (void)name;
    const init_ctx *c = u;
    return dt_param_init(p, fqn, c->seed, c->std, 0.0);
}

void mr_init_params(dt_module *m, uint64_t seed, double std)
{
    init_ctx c = {seed, std};
    MR_OK(dt_module_foreach_param(m, init_one, &c));
}

dt_tensor *mr_randn(int ndim, const int64_t *shape, uint64_t seed, bool grad)
{
    dt_tensor *x = NULL;
    MR_OK(dt_tensor_empty(ndim, shape, DT_DTYPE_F32, dt_device_cpu(), &x));
    MR_OK(dt_tensor_fill_normal(x, 0.0, 1.0, seed, NULL, NULL));
    MR_OK(dt_tensor_set_requires_grad(x, grad));
    return x;
}

dt_tensor *mr_square_sum(dt_tensor *y)
{
    dt_tensor *yy = NULL, *l = NULL;
    MR_OK(dt_mul(y, y, &yy));
    MR_OK(dt_sum_all(yy, &l));
    dt_tensor_release(yy);
    return l;
}

dt_tensor *mr_full(dt_tensor *t)
{
    dt_tensor *f = NULL;
    if (dt_tensor_is_distributed(t))
        MR_OK(dt_full_tensor(t, &f));
    else
        f = dt_tensor_retain(t);
    return f;
}

dt_tensor *mr_full_grad(dt_tensor *p)
{
    dt_tensor *g = dt_tensor_grad(p), *d = NULL, *f = NULL; /* local, also for a DTensor */
    assert_non_null(g);
    if (!dt_tensor_is_distributed(p))
        return dt_tensor_retain(g);
    dt_mesh *m = dt_tensor_mesh(p);
    MR_OK(dt_from_local(g, m, dt_mesh_ndim(m), dt_tensor_placements(p), dt_tensor_shape(p), &d));
    MR_OK(dt_full_tensor(d, &f));
    dt_tensor_release(d);
    return f;
}

void mr_assert_close(const char *what, dt_tensor *a, dt_tensor *b, double tol)
{
    assert_int_equal(dt_tensor_numel(a), dt_tensor_numel(b));
    double worst = 0.0, scale = 1e-6;
    for (int64_t i = 0; i < dt_tensor_numel(b); i++) {
        worst = fmax(worst, fabs(dt_tensor_item_at(a, i) - dt_tensor_item_at(b, i)));
        scale = fmax(scale, fabs(dt_tensor_item_at(b, i)));
    }
    if (worst > tol * scale)
        fail_msg("%s: differs by %g (scale %g)", what, worst, scale);
}

dt_tensor *mr_on_device(dt_tensor *t)
{
    dt_tensor *d = NULL;
    MR_OK(dt_tensor_to_device(t, dt_runtime_device(mr_rt), &d));
    dt_tensor_release(t);
    return d;
}

dt_tensor *mr_host(dt_tensor *t)
{
    dt_tensor *h = NULL, *c = NULL;
    MR_OK(dt_tensor_to_device(t, dt_device_cpu(), &h));
    MR_OK(dt_tensor_contiguous(h, &c));
    dt_tensor_release(h);
    return c;
}

void mr_gpt_create(const dt_gpt_config *cfg, uint64_t seed, dt_module **out)
{
    MR_OK(dt_gpt_create(cfg, seed, out));
    MR_OK(dt_module_to(*out, dt_runtime_device(mr_rt)));
}

static double loss_value(dt_tensor *loss)
{
    double v = 0.0;
    MR_OK(dt_tensor_item(dt_tensor_is_distributed(loss) ? dt_to_local(loss) : loss, &v));
    return v;
}

static dt_optim *make_optim(dt_module *model, mr_optim which)
{
    dt_optim *opt = NULL;
    if (which == MR_SGD) {
        dt_sgd_params p = {.field_mask = DT_SGD_PARAM_FIELD_LR, .lr = 0.5};
        MR_OK(dt_optim_sgd_create(model, &p, &opt));
    } else {
        dt_adamw_params p = {.field_mask = DT_ADAMW_PARAM_FIELD_LR, .lr = 3e-3};
        MR_OK(dt_optim_adamw_create(model, &p, &opt));
    }
    return opt;
}

void mr_train(dt_module *model, mr_optim which, dt_comm *dp, double clip, const dt_token_data *data,
              int steps, int64_t batch, int64_t seq, double *losses, dt_memory_stats *end)
{
    int R = dp != NULL ? dt_comm_size(dp) : 1, r = dp != NULL ? dt_comm_rank(dp) : 0;
    int64_t lo = r * batch / R, hi = (r + 1) * batch / R;
    dt_optim *opt = make_optim(model, which);
    for (int s = 0; s < steps; s++) {
        dt_tensor *x = NULL, *y = NULL, *logits = NULL, *loss = NULL;
        dt_optim_zero_grad(opt);
        MR_OK(dt_token_data_batch(data, s, batch, seq, lo, hi, &x, &y));
        x = mr_on_device(x);
        y = mr_on_device(y);
        MR_OK(dt_module_call(model, x, &logits));
        MR_OK(dt_nn_cross_entropy(logits, y, &loss));
        dt_tensor_release(logits);
        double l = loss_value(loss) * (double)(hi - lo) / (double)batch;
        if (dp != NULL)
            MR_OK(dt_comm_allreduce(dp, &l, &l, 1, DT_DTYPE_F64, DT_REDUCE_OP_SUM, NULL));
        losses[s] = l;
        MR_OK(dt_backward(loss, NULL));
        if (clip > 0.0)
            MR_OK(dt_clip_grad_norm(model, clip, NULL));
        MR_OK(dt_optim_step(opt));
        dt_tensor_release(loss);
        dt_tensor_release(x);
        dt_tensor_release(y);
    }
    if (end != NULL)
        MR_OK(dt_memory_stats_get(dt_runtime_device(mr_rt), end));
    dt_optim_destroy(opt);
}

typedef struct cmp_ctx {
    dt_module *ref;
    double noise_bound;
    mr_cmp out;
} cmp_ctx;

static bool zero_grad_param(const char *fqn)
{
    size_t n = strlen(fqn), k = strlen("attention.wk.bias");
    return n >= k && strcmp(fqn + n - k, "attention.wk.bias") == 0;
}

static dt_status cmp_param(const char *fqn, dt_module *owner, const char *name, dt_tensor *p,
                           void *user)
{
    (void)owner, (void)name;
    cmp_ctx *c = user;
    dt_tensor *full = mr_full(p);
    dt_tensor *r = mr_param_at(c->ref, fqn);
    assert_int_equal(dt_tensor_numel(full), dt_tensor_numel(r));
    assert_int_equal(dt_tensor_ndim(full), dt_tensor_ndim(r));
    dt_tensor *fh = mr_host(full), *rh = mr_host(r);
    const float *a = dt_tensor_data(fh), *b = dt_tensor_data(rh);
    double diff = 0.0, norm = 0.0, maxabs = 0.0;
    for (int64_t i = 0; i < dt_tensor_numel(r); i++) {
        double d = (double)a[i] - (double)b[i];
        diff += d * d;
        norm += (double)b[i] * (double)b[i];
        maxabs = fmax(maxabs, fabs((double)b[i]));
    }
    double rel = norm > 0.0 ? sqrt(diff / norm) : sqrt(diff);
    c->out.diff2 += diff;
    c->out.norm2 += norm;
    if (zero_grad_param(fqn)) {
        if (c->noise_bound > 0.0 && maxabs > c->noise_bound)
            fail_msg("%s (zero true gradient) moved to %g, beyond noise %g", fqn, maxabs,
                     c->noise_bound);
        rel = 0.0;
    }
    if (rel > c->out.worst) {
        c->out.worst = rel;
        snprintf(c->out.worst_fqn, sizeof(c->out.worst_fqn), "%s", fqn);
    }
    dt_tensor_release(full);
    dt_tensor_release(fh);
    dt_tensor_release(rh);
    return DT_OK;
}

mr_cmp mr_compare_weights(dt_module *m, dt_module *ref, double noise_bound)
{
    cmp_ctx c = {.ref = ref, .noise_bound = noise_bound};
    MR_OK(dt_module_foreach_param(m, cmp_param, &c));
    c.out.rel = sqrt(c.out.diff2 / c.out.norm2);
    return c.out;
}

void mr_expect_same_run(const char *what, const double *loss, const double *ref_loss, int steps,
                        const mr_cmp *c, double tol, double param_tol)
{
    for (int s = 0; s < steps; s++) {
        double rel = fabs(loss[s] - ref_loss[s]) / fabs(ref_loss[s]);
        if (rel > tol)
            fail_msg("%s step %d: loss %.9g, single rank %.9g (rel %.3g)", what, s, loss[s],
                     ref_loss[s], rel);
    }
    if (!(ref_loss[steps - 1] < ref_loss[0]))
        fail_msg("%s: the single-rank run does not learn (loss %.9g -> %.9g)", what, ref_loss[0],
                 ref_loss[steps - 1]);
    if (c->rel > tol)
        fail_msg("%s: weights differ from the single-rank run: rel %.3g", what, c->rel);
    if (c->worst > param_tol)
        fail_msg("%s: weights differ from the single-rank run: %s rel %.3g", what, c->worst_fqn,
                 c->worst);
}
