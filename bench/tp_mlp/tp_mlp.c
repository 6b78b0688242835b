/*
 * bench_tp_mlp: one training step of the Megatron MLP block on tensor-parallel
 * ranks, the way a user writes it with dtensor: a FeedForward (w1 h->ffn,
 * gelu_tanh, w2 ffn->h, with biases) parallelized by the pairwise style (w1
 * colwise, w2 rowwise: one all-reduce forward), loss = sum(y), backward, SGD.
 * Prints the median step time (slowest rank) and its forward/backward/update
 * split. Run under dtrun (bench/tp_mlp/run.sh runs it next to PyTorch).
 *
 *   dtrun -n 2 bench_tp_mlp [--hidden 1024] [--ffn 4096] [--tokens 2048] [--steps 10]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dtensor.h"

#include "../common/bench_util.h"

#define CHECK(call)                                                                                \
    do {                                                                                           \
        dt_status ck_s_ = (call);                                                                  \
        if (ck_s_ != DT_OK) {                                                                      \
            fprintf(stderr, "bench_tp_mlp: %s: %s\n", dt_status_str(ck_s_), dt_last_error());      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static dt_status init_param(const char *fqn, dt_module *owner, const char *name, dt_tensor *p,
                            void *user)
{
    (void)owner;
    return dt_param_init(p, fqn, *(uint64_t *)user, strcmp(name, "bias") == 0 ? 0.0 : 0.02, 0.0);
}

int main(int argc, char **argv)
{
    int64_t hidden = 1024, ffn = 4096, tokens = 2048, steps = 10, warmup = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        int64_t v = atoll(argv[i + 1]);
        if (strcmp(argv[i], "--hidden") == 0)
            hidden = v;
        else if (strcmp(argv[i], "--ffn") == 0)
            ffn = v;
        else if (strcmp(argv[i], "--tokens") == 0)
            tokens = v;
        else if (strcmp(argv[i], "--steps") == 0)
            steps = v;
        else {
            fprintf(stderr, "usage: %s [--hidden H] [--ffn F] [--tokens N] [--steps S]\n", argv[0]);
            return 2;
        }
    }
    if (steps < 1 || steps > 1000 || hidden < 1 || ffn < 1 || tokens < 1) {
        fprintf(stderr, "bench_tp_mlp: sizes and steps must be positive (steps <= 1000)\n");
        return 2;
    }
    dt_runtime *rt = NULL;
    CHECK(dt_init(NULL, &rt));
    int world = dt_runtime_size(rt), rank = dt_runtime_rank(rt);
    const char *names[1] = {"tp"};
    dt_mesh *mesh = NULL;
    CHECK(dt_mesh_create(rt, 1, &world, names, &mesh));

    dt_module *mlp = NULL;
    uint64_t seed = 42;
    CHECK(dt_feed_forward_create(hidden, ffn, &mlp));
    CHECK(dt_module_foreach_param(mlp, init_param, &seed));
    dt_plan *plan = NULL;
    CHECK(dt_plan_parse("w1 = colwise; w2 = rowwise", &plan)); /* = pairwise on the block */
    CHECK(dt_parallelize_module(mlp, mesh, plan, "tp"));
    dt_optim *opt = NULL;
    dt_sgd_params sp = {.field_mask = DT_SGD_PARAM_FIELD_LR, .lr = 1e-6};
    CHECK(dt_optim_sgd_create(mlp, &sp, &opt));

    int64_t xs[2] = {tokens, hidden};
    dt_tensor *x = NULL;
    CHECK(dt_tensor_empty(2, xs, DT_DTYPE_F32, dt_device_cpu(), &x));
    CHECK(dt_tensor_fill_normal(x, 0.0, 1.0, 7, NULL, NULL));

    double *t_step = calloc((size_t)steps, sizeof(double));
    double t_fwd = 0, t_bwd = 0, t_upd = 0, loss_v = 0;
    for (int64_t s = -warmup; s < steps; s++) {
        dt_tensor *y = NULL, *loss = NULL;
        CHECK(dt_comm_barrier(dt_runtime_world(rt), NULL));
        double t0 = now_s();
        dt_optim_zero_grad(opt);
        CHECK(dt_module_call(mlp, x, &y));
        CHECK(dt_sum_all(y, &loss));
        double t1 = now_s();
        CHECK(dt_backward(loss, NULL));
        double t2 = now_s();
        CHECK(dt_optim_step(opt));
        double t3 = now_s();
        CHECK(dt_tensor_item(loss, &loss_v));
        dt_tensor_release(loss);
        dt_tensor_release(y);
        if (s >= 0) {
            t_step[s] = t3 - t0;
            t_fwd += t1 - t0, t_bwd += t2 - t1, t_upd += t3 - t2;
        }
    }
    qsort(t_step, (size_t)steps, sizeof(double), cmp_double);
    double stats[5] = {t_step[steps / 2], t_fwd / (double)steps, t_bwd / (double)steps,
                       t_upd / (double)steps, t_step[0]};
    CHECK(dt_comm_allreduce(dt_runtime_world(rt), stats, stats, 5, DT_DTYPE_F64, DT_REDUCE_OP_MAX,
                            NULL));
    if (rank == 0)
        printf("dtensor  tp=%d mlp h=%lld ffn=%lld tokens=%lld: step %.2f ms (median of %lld; "
               "forward %.2f, backward %.2f, sgd %.2f ms), min %.2f ms; loss %.6g\n",
               world, (long long)hidden, (long long)ffn, (long long)tokens, 1e3 * stats[0],
               (long long)steps, 1e3 * stats[1], 1e3 * stats[2], 1e3 * stats[3], 1e3 * stats[4],
               loss_v);
    free(t_step);
    dt_tensor_release(x);
    dt_optim_destroy(opt);
    dt_plan_destroy(plan);
    dt_module_destroy(mlp);
    dt_mesh_release(mesh);
    dt_comm_barrier(dt_runtime_world(rt), NULL);
    dt_runtime_destroy(rt);
    return 0;
}
