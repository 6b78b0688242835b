/*
 * huge_classes - TorchShard's showcase: a linear classifier head (hidden 512)
 * over N classes (default 1,048,576) trained with SGD on random features,
 * its weight [N, hidden] sharded by class over the tp ranks (each rank's
 * Linear computes its classes' logits, wrapped as one Shard(-1) distributed
 * tensor) and the loss computed by the parallel cross entropy, so no rank
 * ever holds the full weight, its gradient or the full logits.
 *
 *   dtrun -n 4 huge_classes --classes 1048576 --steps 5
 *
 * Prints the loss per step, then one line (rank 0) that bench/huge_classes
 * parses:
 *   result classes N tp K batch B step_ms T peak_mib_max P peak_mib_rank0 Q loss L
 * step_ms is the mean over the steps after the first; peak_mib_max the
 * largest total peak over the ranks (dt_memory_stats).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dtensor.h>

/* Seconds on a monotonic clock. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct hc_args {
    int64_t classes, hidden, batch, steps;
    double lr;
    uint64_t seed;
} hc_args;

static int parse(int argc, char **argv, hc_args *a)
{
    *a = (hc_args){
        .classes = 1048576, .hidden = 512, .batch = 32, .steps = 5, .lr = 0.1, .seed = 1234};
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(k, "--help") == 0) {
            printf("usage: %s [--classes N] [--hidden H] [--batch B] [--steps S] [--lr LR] "
                   "[--seed S]\nruns on every rank of the launcher as tp = world size\n",
                   argv[0]);
            exit(0);
        }
        if (v == NULL) {
            fprintf(stderr, "huge_classes: %s needs a value\n", k);
            return -1;
        }
        char *end = NULL;
        double x = strtod(v, &end);
        if (end == v || *end != '\0' || x <= 0) {
            fprintf(stderr, "huge_classes: %s: bad value '%s'\n", k, v);
            return -1;
        }
        if (strcmp(k, "--classes") == 0)
            a->classes = (int64_t)x;
        else if (strcmp(k, "--hidden") == 0)
            a->hidden = (int64_t)x;
        else if (strcmp(k, "--batch") == 0)
            a->batch = (int64_t)x;
        else if (strcmp(k, "--steps") == 0)
            a->steps = (int64_t)x;
        else if (strcmp(k, "--lr") == 0)
            a->lr = x;
        else if (strcmp(k, "--seed") == 0)
            a->seed = (uint64_t)x;
        else {
            fprintf(stderr, "huge_classes: unknown option '%s' (see --help)\n", k);
            return -1;
        }
        i++;
    }
    return 0;
}

/* Random features [B, H] and class ids [B], the same on every rank for @p step. */
static dt_status make_batch(const hc_args *a, int64_t step, dt_tensor **x, dt_tensor **y)
{
    int64_t xs[2] = {a->batch, a->hidden};
    DT_TRY_RETURN(dt_tensor_empty(2, xs, DT_DTYPE_F32, dt_device_cpu(), x));
    DT_TRY_RETURN(
        dt_tensor_fill_normal(*x, 0.0, 1.0, a->seed + 7919 * (uint64_t)(step + 1), NULL, NULL));
    DT_TRY_RETURN(dt_tensor_empty(1, &a->batch, DT_DTYPE_I64, dt_device_cpu(), y));
    int64_t *ids = dt_tensor_data(*y);
    uint64_t s = a->seed * 2654435761u + (uint64_t)step;
    for (int64_t b = 0; b < a->batch; b++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        ids[b] = (int64_t)(s % (uint64_t)a->classes);
    }
    return DT_OK;
}

/* One step; *loss gets its value. */
static dt_status step(const hc_args *a, dt_module *head, dt_mesh *mesh, dt_optim *opt, int64_t s,
                      double *loss_out)
{
    dt_tensor *x = NULL, *y = NULL, *local = NULL, *logits = NULL, *loss = NULL;
    dt_placement pl = dt_shard(-1);
    int64_t gshape[2] = {a->batch, a->classes};
    dt_status st = make_batch(a, s, &x, &y);
    dt_optim_zero_grad(opt);
    if (st == DT_OK)
        st = dt_module_call(head, x, &local); /* this rank's classes: [B, N_local] */
    if (st == DT_OK) /* the class-sharded logits as one distributed tensor, no gather */
        st = dt_from_local(local, mesh, 1, &pl, gshape, &logits);
    if (st == DT_OK)
        st = dt_parallel_cross_entropy(logits, y, &loss);
    dt_tensor_release(local);
    dt_tensor_release(logits);
    if (st == DT_OK)
        st = dt_tensor_item(dt_to_local(loss), loss_out);
    if (st == DT_OK)
        st = dt_backward(loss, NULL);
    if (st == DT_OK)
        st = dt_optim_step(opt);
    dt_tensor_release(loss);
    dt_tensor_release(x);
    dt_tensor_release(y);
    return st;
}

/*
 * The head holds only this rank's classes: a Linear H -> N_local whose weight
 * is the S(0) shard of the full [N, H] weight (torch.chunk rows), initialised
 * by global index through a distributed view of it (@p wview), so any tp gives
 * the same full weight and no rank ever allocates the full one (a parallel
 * linear built full and then sharded would, for a moment).
 */
static dt_status make_head(const hc_args *a, dt_mesh *mesh, dt_module **head, dt_tensor **wview)
{
    int64_t n_local = 0, off = 0, wshape[2] = {a->classes, a->hidden};
    dt_shard_chunk(a->classes, dt_mesh_size(mesh), dt_mesh_rank(mesh), &n_local, &off);
    DT_TRY_RETURN(dt_linear_create(a->hidden, n_local, false, head));
    dt_placement s0 = dt_shard(0);
    DT_TRY_RETURN(dt_from_local(dt_module_param(*head, "weight"), mesh, 1, &s0, wshape, wview));
    return dt_param_init(*wview, "weight", a->seed, 0.02, 0.0);
}

int main(int argc, char **argv)
{
    hc_args a;
    if (parse(argc, argv, &a) != 0)
        return 2;
    dt_status st = DT_OK;
    bool finite = false;
    dt_runtime *rt = NULL;
    dt_mesh *mesh = NULL;
    dt_module *head = NULL;
    dt_tensor *wview = NULL;
    dt_optim *opt = NULL;
    DT_TRY_GOTO(dt_init(NULL, &rt), st, out);
    int tp = dt_runtime_size(rt), rank = dt_runtime_rank(rt);
    const char *names[1] = {"tp"};
    DT_TRY_GOTO(dt_mesh_create(rt, 1, &tp, names, &mesh), st, out);
    DT_TRY_GOTO(make_head(&a, mesh, &head, &wview), st, out);
    dt_sgd_params sp = {.field_mask = DT_SGD_PARAM_FIELD_LR, .lr = a.lr};
    DT_TRY_GOTO(dt_optim_sgd_create(head, &sp, &opt), st, out);
    if (rank == 0)
        printf("huge_classes: %" PRId64 " classes x hidden %" PRId64 " on tp=%d (%.1f MiB of "
               "weight per rank), batch %" PRId64 "\n",
               a.classes, a.hidden, tp, (double)dt_module_param_bytes_local(head) / 1048576.0,
               a.batch);
    double total = 0.0, loss = 0.0;
    for (int64_t s = 0; s < a.steps; s++) {
        double t0 = now();
        DT_TRY_GOTO(step(&a, head, mesh, opt, s, &loss), st, out);
        double dt = now() - t0;
        if (s > 0 || a.steps == 1)
            total += dt;
        if (rank == 0)
            printf("step %" PRId64 "  loss %.6f  (%.1f ms)\n", s, loss, 1e3 * dt);
    }
    dt_memory_stats ms;
    DT_TRY_GOTO(dt_memory_stats_get(dt_device_cpu(), &ms), st, out);
    double peak = (double)ms.total_peak / 1048576.0, peak_max = peak;
    DT_TRY_GOTO(dt_comm_allreduce(dt_runtime_world(rt), &peak_max, &peak_max, 1, DT_DTYPE_F64,
                                  DT_REDUCE_OP_MAX, NULL),
                st, out);
    if (rank == 0)
        printf("result classes %" PRId64 " tp %d batch %" PRId64 " step_ms %.3f peak_mib_max "
               "%.3f peak_mib_rank0 %.3f loss %.6f\n",
               a.classes, tp, a.batch, 1e3 * total / (double)(a.steps > 1 ? a.steps - 1 : 1),
               peak_max, peak, loss);
    if (getenv("HC_MEMORY") != NULL)
        DT_TRY_GOTO(dt_memory_report(dt_runtime_world(rt), "huge_classes memory", stdout, NULL), st,
                    out);
    finite = isfinite(loss);
    if (!finite)
        fprintf(stderr, "huge_classes: the loss is %f\n", loss);
out:
    dt_optim_destroy(opt);
    dt_tensor_release(wview);
    dt_module_destroy(head);
    if (rt != NULL)
        dt_comm_barrier(dt_runtime_world(rt), NULL);
    dt_mesh_release(mesh);
    dt_runtime_destroy(rt);
    return st == DT_OK && finite ? 0 : 1;
}
