/*
 * mlp_short: a two-layer MLP trained with tensor parallelism (fc1 colwise,
 * fc2 rowwise) and ZeRO-3 on a dp x tp mesh, in as few lines as the public
 * API allows. Every rank builds the same full model and global batch; the plan
 * and ZeRO only move parameters, so the losses equal one process's.
 *
 *   dtrun -n 4 mlp_short    dp=2 x tp=2 (any even number of ranks n: dp=n/2)
 *   mlp_short               one process; --unsharded: no mesh on any rank
 */
#include <dtensor.h>
#include <string.h>

enum { BATCH = 32, IN = 16, HIDDEN = 64, CLASSES = 4, STEPS = 8 };

/* fc2(relu(fc1(x))); the temporaries go to the caller's scope (one per step) */
static dt_status mlp_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    dt_tensor *h, *a;
    DT_TRY_RETURN(dt_module_call(dt_module_child(m, "fc1"), in[0], &h));
    DT_TRY_RETURN(dt_relu(dt_scope_add(h), &a));
    return dt_module_call(dt_module_child(m, "fc2"), dt_scope_add(a), out);
}

static const dt_module_ops mlp_ops = {.type_name = "MLP", .forward = mlp_forward};

int main(int argc, char **argv)
{
    dt_runtime *rt;
    dt_module *model, *fc1, *fc2;
    DT_TRY(dt_init(NULL, &rt));
    DT_TRY(dt_module_create(&mlp_ops, NULL, &model));
    DT_TRY(dt_linear_create(IN, HIDDEN, true, &fc1));
    DT_TRY(dt_module_add_child(model, "fc1", fc1));
    DT_TRY(dt_linear_create(HIDDEN, CLASSES, true, &fc2));
    DT_TRY(dt_module_add_child(model, "fc2", fc2));

    dt_mesh *mesh = NULL; /* NULL: this process trains the whole model */
    const char *dp = NULL;
    if (dt_runtime_size(rt) > 1 && !(argc > 1 && strcmp(argv[1], "--unsharded") == 0)) {
        int shape[2] = {dt_runtime_size(rt) / 2, 2};
        const char *names[2] = {"dp", "tp"};
        dt_plan *plan;
        DT_TRY(dt_mesh_create(rt, 2, shape, names, &mesh));
        DT_TRY(dt_plan_parse("fc1 = colwise; fc2 = rowwise", &plan));
        DT_TRY(dt_parallelize_module(model, mesh, plan, "tp"));
        dt_plan_destroy(plan);
        DT_TRY(dt_fully_shard(model, mesh, "dp", NULL)); /* ZeRO-3 over dp */
        dp = "dp";
    }
    dt_adamw_params ap = {.field_mask = DT_ADAMW_PARAM_FIELD_LR, .lr = 1e-2};
    dt_optim *opt;
    DT_TRY(dt_optim_adamw_create(model, &ap, &opt));

    /* the global batch, the same on every rank; the scope releases what dt_scope_add gets */
    DT_TRY(dt_scope_begin());
    int64_t xshape[2] = {BATCH, IN}, labels[BATCH], n = BATCH;
    dt_tensor *X, *Y, *x, *y;
    DT_TRY(dt_tensor_empty(2, xshape, DT_DTYPE_F32, dt_device_cpu(), &X));
    DT_TRY(dt_tensor_fill_normal(dt_scope_add(X), 0.0, 1.0, 1, NULL, NULL));
    const float *xv = dt_tensor_data(X);
    for (int i = 0; i < BATCH; i++) /* the class: the quadrant of (x0, x1) */
        labels[i] = 2 * (xv[i * IN] > 0) + (xv[i * IN + 1] > 0);
    DT_TRY(dt_tensor_from_buffer(1, &n, DT_DTYPE_I64, labels, &Y));
    DT_TRY(dt_dp_batch(X, mesh, dp, &x)); /* this dp rank's rows */
    DT_TRY(dt_dp_batch(dt_scope_add(Y), mesh, dp, &y));
    dt_scope_add(x);
    dt_scope_add(y);

    for (int step = 0; step < STEPS; step++) {
        dt_tensor *logits, *loss;
        double v;
        DT_TRY(dt_scope_begin()); /* everything this step makes */
        DT_TRY(dt_module_call(model, x, &logits));
        DT_TRY(dt_nn_cross_entropy(dt_scope_add(logits), y, &loss));
        DT_TRY(dt_dp_mean_loss(dt_scope_add(loss), mesh, dp, BATCH, &v)); /* global batch's */
        DT_TRY(dt_backward(loss, NULL));
        DT_TRY(dt_optim_step(opt));
        dt_optim_zero_grad(opt);
        dt_scope_end();
        if (dt_runtime_rank(rt) == 0)
            printf("step %d  loss %.7f\n", step, v);
    }
    dt_scope_end();
    dt_optim_destroy(opt);
    dt_module_destroy(model);
    dt_comm_barrier(dt_runtime_world(rt), NULL); /* no rank leaves while others still talk */
    dt_mesh_release(mesh);
    dt_runtime_destroy(rt);
    return 0;
}
