/*
 * custom_module: how to write your own module types, the pattern every model
 * needs beyond the built-in layers (PyTorch's `class Block(nn.Module)`).
 *
 *   ResidualMLP   y = x + gate * fc2(gelu(fc1(norm(x))))
 *                 children "norm" (LayerNorm), "fc1", "fc2" (Linear), its own
 *                 parameter "gate" [dim], private data (its width) in impl
 *   Classifier    head(blocks(x)); children "blocks" (a Sequential of
 *                 ResidualMLPs "0", "1", ...) and "head" (Linear)
 *
 * It prints the tree (fully qualified names: blocks.1.fc2.weight), trains a
 * few SGD steps on a fixed problem and exits 1 if the loss did not fall. On
 * several ranks (dtrun -n 2) the same plan text a GPT would use shards the
 * user-defined blocks by FQN: blocks.*.fc1 colwise, blocks.*.fc2 rowwise.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <dtensor.h>

enum { BATCH = 32, DIM = 16, HIDDEN = 64, BLOCKS = 2, CLASSES = 4, STEPS = 12 };

/* ---------------------------------------------------------------- ResidualMLP */

typedef struct residual_impl {
    int64_t dim; /* the width it checks its input against */
} residual_impl;

static dt_status residual_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    const residual_impl *impl = dt_module_impl(m);
    if (n_in != 1 || dt_tensor_dim(in[0], -1) != impl->dim) /* report it as the library would */
        return dt_set_error(DT_ERR_INVALID_ARG,
                            "ResidualMLP: want 1 input of width %" PRId64
                            ", got %d of width %" PRId64,
                            impl->dim, n_in, n_in > 0 ? dt_tensor_dim(in[0], -1) : -1);
    /* a scope for the temporaries; every path out goes through dt_scope_end */
    DT_TRY_RETURN(dt_scope_begin());
    dt_status s = DT_OK;
    dt_tensor *n, *h, *a, *f, *g;
    DT_TRY_GOTO(dt_module_call(dt_module_child(m, "norm"), in[0], &n), s, end);
    DT_TRY_GOTO(dt_module_call(dt_module_child(m, "fc1"), dt_scope_add(n), &h), s, end);
    DT_TRY_GOTO(dt_gelu_tanh(dt_scope_add(h), &a), s, end);
    DT_TRY_GOTO(dt_module_call(dt_module_child(m, "fc2"), dt_scope_add(a), &f), s, end);
    /* parameters are read from their slot at every call: a style may have replaced them */
    DT_TRY_GOTO(dt_mul(dt_scope_add(f), dt_module_param(m, "gate"), &g), s, end);
    DT_TRY_GOTO(dt_add(in[0], dt_scope_add(g), out), s, end); /* *out: the caller's reference */
end:
    dt_scope_end();
    return s;
}

static const dt_module_ops residual_ops = {
    .type_name = "ResidualMLP", .forward = residual_forward, .destroy_impl = free};

static dt_status residual_create(int64_t dim, int64_t hidden, dt_module **out)
{
    residual_impl *impl = malloc(sizeof(*impl));
    if (impl == NULL)
        return dt_set_error(DT_ERR_NO_MEMORY, "residual_create: no memory for its impl");
    impl->dim = dim;
    dt_module *m = NULL, *kid[3] = {NULL, NULL, NULL};
    static const char *kid_name[3] = {"norm", "fc1", "fc2"};
    dt_tensor *gate = NULL;
    /* the module owns impl from here on, also when dt_module_create fails */
    DT_TRY_RETURN(dt_module_create(&residual_ops, impl, &m));
    dt_status s = dt_layer_norm_create(dim, 1e-5, &kid[0]);
    if (s == DT_OK)
        s = dt_linear_create(dim, hidden, true, &kid[1]);
    if (s == DT_OK)
        s = dt_linear_create(hidden, dim, true, &kid[2]);
    for (int i = 0; i < 3 && s == DT_OK; i++)
        if ((s = dt_module_add_child(m, kid_name[i], kid[i])) == DT_OK)
            kid[i] = NULL; /* its parent's now: destroyed with it */
    if (s == DT_OK)
        s = dt_tensor_full(1, &dim, DT_DTYPE_F32, dt_device_cpu(), 0.5, &gate);
    if (s == DT_OK)
        s = dt_module_param_add(m, "gate", gate); /* the slot takes its own reference */
    dt_tensor_release(gate);
    for (int i = 0; i < 3; i++)
        dt_module_destroy(kid[i]); /* the children not attached (NULL-safe) */
    if (s != DT_OK) {
        dt_module_destroy(m);
        return s;
    }
    *out = m;
    return DT_OK;
}

/* ---------------------------------------------------------------- Classifier */

static dt_status classifier_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    dt_tensor *h = NULL;
    /* dt_module_call, not the child's forward: the child's hooks (styles, ZeRO) must run */
    DT_TRY_RETURN(dt_module_call(dt_module_child(m, "blocks"), in[0], &h));
    dt_status s = dt_module_call(dt_module_child(m, "head"), h, out);
    dt_tensor_release(h);
    return s;
}

static const dt_module_ops classifier_ops = {.type_name = "Classifier",
                                             .forward = classifier_forward};

static dt_status classifier_create(dt_module **out)
{
    dt_module *m = NULL, *blocks = NULL, *head = NULL;
    DT_TRY_RETURN(dt_module_create(&classifier_ops, NULL, &m));
    dt_status s = dt_sequential_create(&blocks);
    if (s == DT_OK && (s = dt_module_add_child(m, "blocks", blocks)) != DT_OK)
        dt_module_destroy(blocks);
    for (int i = 0; i < BLOCKS && s == DT_OK; i++) {
        dt_module *b = NULL;
        if ((s = residual_create(DIM, HIDDEN, &b)) == DT_OK &&
            (s = dt_sequential_append(blocks, b)) != DT_OK) /* named "0", "1", ... */
            dt_module_destroy(b);
    }
    if (s == DT_OK && (s = dt_linear_create(DIM, CLASSES, true, &head)) == DT_OK &&
        (s = dt_module_add_child(m, "head", head)) != DT_OK)
        dt_module_destroy(head);
    if (s != DT_OK) {
        dt_module_destroy(m);
        return s;
    }
    *out = m;
    return DT_OK;
}

/* Every matrix initialised by its FQN, as dt_gpt_init does: the values no
 * longer depend on the order the layers were created in (the default init's). */
static dt_status init_weight(const char *fqn, dt_module *owner, const char *name, dt_tensor *param,
                             void *user)
{
    (void)owner, (void)name, (void)user;
    if (dt_tensor_ndim(param) != 2)
        return DT_OK; /* norms, biases and gates keep their values */
    return dt_param_init(param, fqn, 1234, 1.0 / 8.0, 0.0);
}

/* ---------------------------------------------------------------- training */

int main(void)
{
    dt_runtime *rt;
    DT_TRY(dt_init(NULL, &rt));
    int rank = dt_runtime_rank(rt), world = dt_runtime_size(rt);
    dt_module *model;
    DT_TRY(classifier_create(&model));
    DT_TRY(dt_module_foreach_param(model, init_weight, NULL));
    dt_mesh *mesh = NULL;
    if (world > 1) { /* tensor parallel over every rank */
        const char *names[1] = {"tp"};
        dt_plan *plan;
        DT_TRY(dt_mesh_create(rt, 1, &world, names, &mesh));
        DT_TRY(dt_plan_parse("blocks.*.fc1 = colwise; blocks.*.fc2 = rowwise", &plan));
        DT_TRY(dt_parallelize_module(model, mesh, plan, "tp"));
        dt_plan_destroy(plan);
    }
    if (rank == 0)
        DT_TRY(dt_module_print(model, stdout));
    dt_sgd_params sp = {.field_mask = DT_SGD_PARAM_FIELD_LR | DT_SGD_PARAM_FIELD_MOMENTUM,
                        .lr = 0.1,
                        .momentum = 0.9};
    dt_optim *opt;
    DT_TRY(dt_optim_sgd_create(model, &sp, &opt));

    /* a fixed problem, the same on every rank: the class is the largest of x's first 4 features */
    int64_t xshape[2] = {BATCH, DIM}, labels[BATCH], n = BATCH;
    dt_tensor *x, *y;
    DT_TRY(dt_tensor_empty(2, xshape, DT_DTYPE_F32, dt_device_cpu(), &x));
    DT_TRY(dt_tensor_fill_normal(x, 0.0, 1.0, 7, NULL, NULL));
    const float *xv = dt_tensor_data(x);
    for (int i = 0; i < BATCH; i++) {
        labels[i] = 0;
        for (int c = 1; c < CLASSES; c++)
            if (xv[i * DIM + c] > xv[i * DIM + labels[i]])
                labels[i] = c;
    }
    DT_TRY(dt_tensor_from_buffer(1, &n, DT_DTYPE_I64, labels, &y));

    double first = 0.0, last = 0.0;
    for (int step = 0; step < STEPS; step++) {
        dt_tensor *logits, *loss;
        DT_TRY(dt_scope_begin());
        DT_TRY(dt_module_call(model, x, &logits));
        DT_TRY(dt_nn_cross_entropy(dt_scope_add(logits), y, &loss));
        DT_TRY(dt_item(dt_scope_add(loss), &last));
        DT_TRY(dt_backward(loss, NULL));
        DT_TRY(dt_optim_step(opt));
        dt_optim_zero_grad(opt);
        dt_scope_end();
        first = step == 0 ? last : first;
        if (rank == 0)
            printf("step %2d  loss %.6f\n", step, last);
    }
    dt_tensor_release(y);
    dt_tensor_release(x);
    dt_optim_destroy(opt);
    dt_module_destroy(model);
    dt_comm_barrier(dt_runtime_world(rt), NULL); /* no rank leaves while others still talk */
    dt_mesh_release(mesh);
    dt_runtime_destroy(rt);
    if (!(last < first)) {
        fprintf(stderr, "custom_module: the loss did not fall (%f -> %f)\n", first, last);
        return 1;
    }
    return 0;
}
