/*
 * Optimizers and gradient clipping on distributed parameters, over real dtrun
 * ranks: a model whose parameter slots hold shards (what a parallel style
 * will do) must train exactly like the same model with full parameters.
 * Every rank builds the full reference model too and compares the gathered
 * shards with it after clipping and a few optimizer steps.
 */
#include "common/multirank.h"
#include "nn_test_util.h"

/* Linear(5 -> 7) then Linear(7 -> 3): 4 parameters, odd sizes for uneven shards. */
static dt_module *make_model(uint64_t rng)
{
    dt_module *seq = NULL, *l = NULL;
    NN_OK(dt_sequential_create(&seq));
    NN_OK(dt_linear_create(5, 7, true, &l));
    NN_OK(dt_sequential_append(seq, l));
    NN_OK(dt_linear_create(7, 3, true, &l));
    NN_OK(dt_sequential_append(seq, l));
    nn_rng_state = rng; /* the same values on every rank */
    for (int i = 0; i < 2; i++)
        for (int p = 0; p < 2; p++)
            nn_fill_rand(dt_module_param_at(dt_module_child_at(seq, i), p), -1, 1);
    return seq;
}

typedef struct layout {
    int ndim;
    int shape[2];
    dt_placement pl[4][2]; /* per parameter: 0.weight, 0.bias, 1.weight, 1.bias */
} layout;

static dt_tensor *slot(dt_module *m, int i)
{
    return dt_module_param_at(dt_module_child_at(m, i / 2), i % 2);
}

/* Replace every slot of @p m with its shard on @p mesh. */
static void shard_model(dt_module *m, dt_mesh *mesh, const layout *lay)
{
    for (int i = 0; i < 4; i++) {
        dt_tensor *d = NULL;
        NN_OK(dt_distribute(slot(m, i), mesh, lay->ndim, lay->pl[i], &d));
        NN_OK(dt_module_param_set(dt_module_child_at(m, i / 2), i % 2 ? "bias" : "weight", d));
        dt_tensor_release(d);
    }
}

/*
 * The same random full gradients on every rank: set on @p ref as they are and
 * on @p dist sharded like its parameters (through the distributed handle, and
 * for parameter 2 directly on its local shard, where autograd keeps it).
 */
static void set_grads(dt_module *ref, dt_module *dist, dt_mesh *mesh, const layout *lay,
                      uint64_t rng)
{
    nn_rng_state = rng;
    for (int i = 0; i < 4; i++) {
        dt_tensor *p = slot(ref, i), *g = NULL, *d = NULL;
        NN_OK(dt_tensor_empty(dt_tensor_ndim(p), dt_tensor_shape(p), DT_DTYPE_F32, dt_device_cpu(),
                              &g));
        nn_fill_rand(g, -1, 1);
        NN_OK(dt_tensor_set_grad(p, g));
        NN_OK(dt_distribute(g, mesh, lay->ndim, lay->pl[i], &d));
        if (i == 2)
            NN_OK(dt_tensor_set_grad(dt_to_local(slot(dist, i)), dt_to_local(d)));
        else
            NN_OK(dt_tensor_set_grad(slot(dist, i), d));
        dt_tensor_release(d);
        dt_tensor_release(g);
    }
}

static void expect_same_weights(dt_module *ref, dt_module *dist, const char *what)
{
    for (int i = 0; i < 4; i++) {
        dt_tensor *full = NULL;
        NN_OK(dt_full_tensor(slot(dist, i), &full));
        double *want = nn_vals(slot(ref, i));
        char msg[96];
        snprintf(msg, sizeof(msg), "%s: parameter %d", what, i);
        nn_expect_close(msg, want, full, 1e-6, 1e-7);
        free(want);
        dt_tensor_release(full);
    }
}

static void run_layout(const layout *lay, bool adamw)
{
    dt_mesh *mesh = NULL;
    NN_OK(dt_mesh_create(mr_rt, lay->ndim, lay->shape, NULL, &mesh));
    dt_module *ref = make_model(11), *dist = make_model(11);
    shard_model(dist, mesh, lay);
    dt_optim *oref = NULL, *odist = NULL;
    if (adamw) {
        dt_adamw_params p = {.field_mask = DT_ADAMW_PARAM_FIELD_LR, .lr = 0.05};
        NN_OK(dt_optim_adamw_create(ref, &p, &oref));
        NN_OK(dt_optim_adamw_create(dist, &p, &odist));
    } else {
        dt_sgd_params p = {.field_mask = DT_SGD_PARAM_FIELD_LR | DT_SGD_PARAM_FIELD_MOMENTUM |
                                         DT_SGD_PARAM_FIELD_WEIGHT_DECAY,
                           .lr = 0.1,
                           .momentum = 0.9,
                           .weight_decay = 0.01};
        NN_OK(dt_optim_sgd_create(ref, &p, &oref));
        NN_OK(dt_optim_sgd_create(dist, &p, &odist));
    }
    for (int step = 0; step < 3; step++) {
        set_grads(ref, dist, mesh, lay, 100 + (uint64_t)step);
        double nref = 0.0, ndist = 0.0;
        NN_OK(dt_clip_grad_norm(ref, 1.5, &nref));
        NN_OK(dt_clip_grad_norm(dist, 1.5, &ndist));
        assert_true(nref > 1.5); /* the clipping is active */
        assert_float_equal(ndist, nref, 1e-9 * nref);
        NN_OK(dt_optim_step(oref));
        NN_OK(dt_optim_step(odist));
        expect_same_weights(ref, dist, adamw ? "adamw" : "sgd");
        dt_optim_zero_grad(odist);
        assert_null(dt_tensor_grad(dt_to_local(slot(dist, 2))));
        assert_null(dt_tensor_grad(slot(dist, 0)));
    }
    /* the optimizer state is shard-sized */
    dt_tensor *st = dt_optim_param_state(odist, 0, adamw ? "exp_avg" : "momentum_buffer");
    assert_int_equal(dt_tensor_numel(st), dt_tensor_numel(dt_to_local(slot(dist, 0))));
    dt_optim_destroy(oref);
    dt_optim_destroy(odist);
    dt_module_destroy(ref);
    dt_module_destroy(dist);
    dt_mesh_release(mesh);
}

static void test_sharded_training_matches_full(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt);
    layout one = {.ndim = 1,
                  .shape = {w, 0},
                  .pl = {{dt_shard(0)}, {dt_shard(0)}, {dt_shard(1)}, {dt_replicate()}}};
    run_layout(&one, true);
    run_layout(&one, false);
    if (w == 4) {
        layout two = {.ndim = 2,
                      .shape = {2, 2},
                      .pl = {{dt_shard(0), dt_shard(1)},
                             {dt_replicate(), dt_shard(0)},
                             {dt_shard(1), dt_replicate()},
                             {dt_shard(0), dt_shard(0)}}};
        run_layout(&two, true);
        run_layout(&two, false);
    }
}

/* A Partial parameter (a share of a sum, not a value) is refused by both. */
static void test_partial_parameter_refused(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt);
    dt_mesh *mesh = NULL;
    NN_OK(dt_mesh_create(mr_rt, 1, &w, NULL, &mesh));
    layout lay = {
        .ndim = 1,
        .shape = {w, 0},
        .pl = {{dt_shard(0)}, {dt_partial(DT_REDUCE_OP_SUM)}, {dt_replicate()}, {dt_replicate()}}};
    dt_module *m = make_model(5);
    shard_model(m, mesh, &lay);
    dt_optim *o = NULL;
    NN_FAILS(dt_optim_sgd_create(m, NULL, &o), DT_ERR_INVALID_ARG, "'0.bias' has a Partial");
    dt_tensor *p = slot(m, 1), *g = NULL;
    NN_OK(dt_tensor_zeros(1, dt_tensor_shape(p), DT_DTYPE_F32, dt_device_cpu(), &g));
    NN_OK(dt_tensor_set_grad(dt_to_local(p), g));
    NN_FAILS(dt_clip_grad_norm(m, 1.0, NULL), DT_ERR_UNSUPPORTED, "'0.bias' is Partial");
    dt_tensor_release(g);
    dt_module_destroy(m);
    dt_mesh_release(mesh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sharded_training_matches_full),
        cmocka_unit_test(test_partial_parameter_refused),
    };
    return cmocka_run_group_tests(tests, mr_setup, mr_teardown);
}
