/*
 * expert_parallel: your own parallel style, the way PyTorch users subclass
 * ParallelStyle. The library ships Colwise, Rowwise, Sequence and Pairwise;
 * this program adds expert parallelism for a mixture of experts:
 *
 *   Experts    y = sum_e softmax(x router^T)[:, e] * (gelu(x w_in[e]^T) w_out[e]^T)
 *              parameters router [E, D], w_in [E, H, D], w_out [E, D, H]
 *              (dense routing: every expert sees every row, weighted)
 *   Net        head(x + moe(x)), children "moe" (Experts) and "head" (Linear)
 *
 * The style "expert_parallel" gives each rank E/tp whole experts (w_in and
 * w_out Shard(0), the router replicated), takes the input as replicated and
 * hands on the replicated sum of every rank's experts. It is registered under
 * its name, so plan text uses it like a built-in: "moe = expert_parallel".
 * The sharding rules of the ops do the rest: the batched matmuls run on the
 * local experts, the sum over the expert dim becomes a Partial sum, and the
 * prepare_output helper all-reduces it. Experts E = 4 over 3 ranks is 2, 2, 0:
 * a rank may hold no expert at all.
 *
 * It trains a few SGD steps and prints the loss; tests/examples runs it on
 * 1 rank and on 2, 3 and 4 and requires the same losses.
 */
#include <stdio.h>
#include <stdlib.h>

#include <dtensor.h>

enum { BATCH = 24, DIM = 8, HIDDEN = 16, EXPERTS = 4, CLASSES = 3, STEPS = 10 };

/* ---------------------------------------------------------------- Experts */

static dt_status experts_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    (void)n_in;
    dt_tensor *x = in[0], *r, *p, *pt, *h, *a, *o, *w;
    DT_TRY_RETURN(dt_scope_begin());
    dt_status s = DT_OK;
    /* routing weights [B, E] -> [E, B, 1] */
    DT_TRY_GOTO(dt_matmul(x, dt_module_param(m, "router"), false, true, &r), s, end);
    DT_TRY_GOTO(dt_softmax(dt_scope_add(r), 1, &p), s, end);
    DT_TRY_GOTO(dt_transpose(dt_scope_add(p), 0, 1, &pt), s, end);
    int64_t e_b_1[3] = {EXPERTS, dt_tensor_dim(x, 0), 1};
    DT_TRY_GOTO(dt_reshape(dt_scope_add(pt), 3, e_b_1, &w), s, end);
    /* every expert on every row: [B, D] x [E, H, D]^T -> [E, B, H] -> [E, B, D] */
    DT_TRY_GOTO(dt_matmul(x, dt_module_param(m, "w_in"), false, true, &h), s, end);
    DT_TRY_GOTO(dt_gelu_tanh(dt_scope_add(h), &a), s, end);
    DT_TRY_GOTO(dt_matmul(dt_scope_add(a), dt_module_param(m, "w_out"), false, true, &o), s, end);
    DT_TRY_GOTO(dt_mul(dt_scope_add(o), dt_scope_add(w), &h), s, end);
    DT_TRY_GOTO(dt_sum(dt_scope_add(h), 0, false, out), s, end); /* over the experts */
end:
    dt_scope_end();
    return s;
}

static const dt_module_ops experts_ops = {.type_name = "Experts", .forward = experts_forward};

static dt_status param(dt_module *m, const char *name, int ndim, const int64_t *shape)
{
    dt_tensor *t = NULL;
    DT_TRY_RETURN(dt_tensor_zeros(ndim, shape, DT_DTYPE_F32, dt_device_cpu(), &t));
    dt_status s = dt_module_param_add(m, name, t); /* the slot takes its own reference */
    dt_tensor_release(t);
    return s;
}

static dt_status net_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    (void)n_in;
    dt_tensor *y = NULL, *z = NULL;
    /* dt_module_call, not the child's forward: the style's hooks must run */
    DT_TRY_RETURN(dt_module_call(dt_module_child(m, "moe"), in[0], &y));
    dt_status s = dt_add(in[0], y, &z);
    if (s == DT_OK)
        s = dt_module_call(dt_module_child(m, "head"), z, out);
    dt_tensor_release(y);
    dt_tensor_release(z);
    return s;
}

static const dt_module_ops net_ops = {.type_name = "Net", .forward = net_forward};

static dt_status net_create(dt_module **out)
{
    dt_module *net = NULL, *moe = NULL, *head = NULL;
    int64_t router[2] = {EXPERTS, DIM}, w_in[3] = {EXPERTS, HIDDEN, DIM},
            w_out[3] = {EXPERTS, DIM, HIDDEN};
    DT_TRY_RETURN(dt_module_create(&net_ops, NULL, &net));
    dt_status s = dt_module_create(&experts_ops, NULL, &moe);
    if (s == DT_OK && (s = dt_module_add_child(net, "moe", moe)) != DT_OK)
        dt_module_destroy(moe);
    if (s == DT_OK)
        s = param(moe, "router", 2, router);
    if (s == DT_OK)
        s = param(moe, "w_in", 3, w_in);
    if (s == DT_OK)
        s = param(moe, "w_out", 3, w_out);
    if (s == DT_OK && (s = dt_linear_create(DIM, CLASSES, true, &head)) == DT_OK &&
        (s = dt_module_add_child(net, "head", head)) != DT_OK)
        dt_module_destroy(head);
    if (s != DT_OK) {
        dt_module_destroy(net);
        return s;
    }
    *out = net;
    return DT_OK;
}

/* Every parameter from its FQN: the same values on every rank and mesh. */
static dt_status init(const char *fqn, dt_module *owner, const char *name, dt_tensor *p, void *u)
{
    (void)owner, (void)name, (void)u;
    return dt_param_init(p, fqn, 99, 0.3, 0.0);
}

/* ---------------------------------------------------------------- the style */

/* Which parameters of a module it shards, and how; it refuses any other module. */
static dt_status expert_plan(dt_module *m, const char *fqn, dt_style_param_placement *out, int *n)
{
    if (dt_module_param(m, "w_in") == NULL || dt_module_param(m, "w_out") == NULL)
        return dt_set_error(DT_ERR_INVALID_ARG, "'%s' has no w_in/w_out experts", fqn);
    out[(*n)++] = (dt_style_param_placement){"w_in", dt_shard(0)};
    out[(*n)++] = (dt_style_param_placement){"w_out", dt_shard(0)};
    return DT_OK;
}

static const dt_style_ops expert_parallel = {
    .name = "expert_parallel",
    .plan_params = expert_plan,
    .prepare_input = dt_make_input_replicate_1d, /* the same rows on every rank */
    .prepare_output = dt_make_output_tensor,     /* sum the experts, hand on a local tensor */
};

/* ---------------------------------------------------------------- training */

int main(void)
{
    dt_runtime *rt;
    DT_TRY(dt_init(NULL, &rt));
    int rank = dt_runtime_rank(rt), world = dt_runtime_size(rt);
    dt_module *net;
    DT_TRY(net_create(&net));
    DT_TRY(dt_module_foreach_param(net, init, NULL));
    dt_mesh *mesh = NULL;
    if (world > 1) {
        const char *names[1] = {"tp"};
        dt_plan *plan;
        DT_TRY(dt_style_register(&expert_parallel));
        DT_TRY(dt_mesh_create(rt, 1, &world, names, &mesh));
        DT_TRY(dt_plan_parse("moe = expert_parallel", &plan));
        DT_TRY(dt_parallelize_module(net, mesh, plan, "tp"));
        dt_plan_destroy(plan);
    }
    if (rank == 0)
        DT_TRY(dt_module_print(net, stdout));
    dt_sgd_params sp = {.field_mask = DT_SGD_PARAM_FIELD_LR, .lr = 0.2};
    dt_optim *opt;
    DT_TRY(dt_optim_sgd_create(net, &sp, &opt));

    /* a fixed problem: the class is the largest of x's first CLASSES features */
    int64_t xshape[2] = {BATCH, DIM}, labels[BATCH], n = BATCH;
    dt_tensor *x, *y;
    DT_TRY(dt_tensor_empty(2, xshape, DT_DTYPE_F32, dt_device_cpu(), &x));
    DT_TRY(dt_tensor_fill_normal(x, 0.0, 1.0, 5, NULL, NULL));
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
        DT_TRY(dt_module_call(net, x, &logits));
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
    dt_module_destroy(net);
    dt_comm_barrier(dt_runtime_world(rt), NULL); /* no rank leaves while others still talk */
    dt_mesh_release(mesh);
    dt_runtime_destroy(rt);
    if (!(last < first)) {
        fprintf(stderr, "expert_parallel: the loss did not fall (%f -> %f)\n", first, last);
        return 1;
    }
    return 0;
}
