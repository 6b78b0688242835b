/*
 * gpt_step: the reference GPT's training step (shared spec gpt.md: forward,
 * mean cross entropy, backward, SGD; gradients dropped before every step as
 * PyTorch's zero_grad(set_to_none=True)) as a user writes it with dtensor, on
 * one rank (the plain model) or on tp ranks (the spec's default plan through
 * dt_parallelize_module: vocabulary-parallel embedding and output, parallel
 * cross entropy, column/row-parallel attention and MLP).
 *
 * Per step and rank: wall time, CPU time, minor page faults (getrusage) and
 * the CPU time inside oneDNN's matmuls (dt__onednn_time_gemms: the GEMM
 * share of the step; one compute thread per rank, so that is all of it).
 * Rank 0 prints each step (the largest value of the ranks) and a
 * RESULT line that bench/gpt_step/run.sh turns into a table:
 *   RESULT impl=dtensor alloc=A precision=P world=W step_ms=median(steps 2..N) cpu_ms=..
 * faults_first=.. faults_per_step=mean(steps 2..N) peak_mib=max live bytes of a rank
 *          gemm_ms=median(steps 2..N) gemm_pct=100 gemm_ms / cpu_ms loss=last
 *
 *   dtrun -n W gpt_step --data tokens.bin [--config small] [--batch 8] [--seq 256]
 *                       [--steps 5] [--lr 0.01] [--precision f32|bf16]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "dtensor.h"

#include "../common/bench_util.h"
#include "kernels/cpu/onednn.h"

#define CHECK(call)                                                                                \
    do {                                                                                           \
        dt_status ck_s_ = (call);                                                                  \
        if (ck_s_ != DT_OK) {                                                                      \
            fprintf(stderr, "gpt_step: %s: %s\n", dt_status_str(ck_s_), dt_last_error());          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* per step and rank: wall seconds, faults, CPU seconds, CPU seconds in GEMMs */
enum { MAX_STEPS = 100, NF = 4 };

typedef struct bench_args {
    const char *config, *data, *precision;
    int64_t batch, seq, steps;
    double lr;
} bench_args;

static double minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_minflt;
}

static int parse_args(int argc, char **argv, bench_args *a)
{
    *a = (bench_args){.config = "small", .precision = "f32", .batch = 8, .steps = 5, .lr = 0.01};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (strcmp(k, "--config") == 0)
            a->config = v;
        else if (strcmp(k, "--data") == 0)
            a->data = v;
        else if (strcmp(k, "--batch") == 0)
            a->batch = atoll(v);
        else if (strcmp(k, "--seq") == 0)
            a->seq = atoll(v);
        else if (strcmp(k, "--steps") == 0)
            a->steps = atoll(v);
        else if (strcmp(k, "--lr") == 0)
            a->lr = atof(v);
        else if (strcmp(k, "--precision") == 0)
            a->precision = v;
        else
            return -1;
    }
    if (argc % 2 == 0 || a->data == NULL || a->batch < 1 || a->seq < 0 || a->steps < 2 ||
        a->steps > MAX_STEPS ||
        (strcmp(a->precision, "f32") != 0 && strcmp(a->precision, "bf16") != 0))
        return -1;
    return 0;
}

/* One training step; returns the loss (a replicated scalar on tp ranks). */
static double train_step(const bench_args *a, dt_module *model, dt_optim *opt,
                         const dt_token_data *data, int64_t step, int64_t seq)
{
    dt_tensor *x = NULL, *y = NULL, *logits = NULL, *loss = NULL;
    double value = 0.0;
    dt_optim_zero_grad(opt);
    CHECK(dt_token_data_batch(data, step, a->batch, seq, 0, a->batch, &x, &y));
    CHECK(dt_module_call(model, x, &logits));
    CHECK(dt_nn_cross_entropy(logits, y, &loss));
    dt_tensor_release(logits); /* the graph keeps what backward needs */
    CHECK(dt_tensor_item(dt_tensor_is_distributed(loss) ? dt_to_local(loss) : loss, &value));
    CHECK(dt_backward(loss, NULL));
    CHECK(dt_optim_step(opt));
    dt_tensor_release(loss);
    dt_tensor_release(x);
    dt_tensor_release(y);
    return value;
}

/* Rank 0: each step (the largest value of the ranks) and the RESULT line;
 * gathered holds every rank's [steps][NF] block. */
static void print_report(const char *alloc, const char *precision, int world, int64_t steps,
                         const double *gathered, const double *losses, double peak_bytes)
{
    double all_steps[MAX_STEPS], all_cpu[MAX_STEPS], all_gemm[MAX_STEPS];
    double faults_first = 0.0, faults_rest = 0.0;
    for (int64_t s = 0; s < steps; s++) {
        double t = 0.0, f = 0.0, c = 0.0, g = 0.0;
        for (int r = 0; r < world; r++) {
            const double *v = gathered + (size_t)r * NF * (size_t)steps + NF * (size_t)s;
            t = v[0] > t ? v[0] : t;
            f = v[1] > f ? v[1] : f;
            c = v[2] > c ? v[2] : c;
            g = v[3] > g ? v[3] : g;
        }
        printf("step %lld: %.1f ms, cpu %.1f ms (gemm %.1f), %.0f minor faults (largest of the "
               "ranks), loss %.6f\n",
               (long long)s + 1, 1e3 * t, 1e3 * c, 1e3 * g, f, losses[s]);
        all_steps[s] = t;
        all_cpu[s] = c;
        all_gemm[s] = g;
        if (s == 0)
            faults_first = f;
        else
            faults_rest += f;
    }
    double cpu = median_after_first(all_cpu, steps), gemm = median_after_first(all_gemm, steps);
    printf("RESULT impl=dtensor alloc=%s precision=%s world=%d step_ms=%.1f cpu_ms=%.1f "
           "faults_first=%.0f "
           "faults_per_step=%.1f peak_mib=%.1f gemm_ms=%.1f gemm_pct=%.1f loss=%.6f\n",
           alloc, precision, world, 1e3 * median_after_first(all_steps, steps), 1e3 * cpu,
           faults_first, faults_rest / (double)(steps - 1), peak_bytes / 1048576.0, 1e3 * gemm,
           cpu > 0.0 ? 100.0 * gemm / cpu : 0.0, losses[steps - 1]);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    bench_args a;
    if (parse_args(argc, argv, &a) != 0) {
        fprintf(stderr,
                "usage: %s --data TOKENS.bin [--config tiny|small] [--batch B] [--seq T] "
                "[--steps 2..%d] [--lr LR] [--precision f32|bf16]\n",
                argv[0], MAX_STEPS);
        return 2;
    }
    dt_runtime *rt = NULL;
    CHECK(dt_init(NULL, &rt));
    int world = dt_runtime_size(rt), rank = dt_runtime_rank(rt);
    dt_gpt_config cfg;
    CHECK(dt_gpt_config_preset(a.config, &cfg));
    int64_t seq = a.seq > 0 ? a.seq : cfg.max_seq_len;
    dt_token_data *data = NULL;
    CHECK(dt_token_data_open(a.data, &data));
    dt_module *model = NULL;
    CHECK(dt_gpt_create(&cfg, 1234, &model));
    dt_mesh *mesh = NULL;
    if (world > 1) {
        const char *names[1] = {"tp"};
        dt_plan *plan = NULL;
        CHECK(dt_mesh_create(rt, 1, &world, names, &mesh));
        CHECK(dt_plan_gpt_default(false, &plan));
        CHECK(dt_parallelize_module(model, mesh, plan, "tp"));
        dt_plan_destroy(plan);
    }
    dt_optim *opt = NULL;
    dt_sgd_params sp = {.field_mask = DT_SGD_PARAM_FIELD_LR, .lr = a.lr};
    CHECK(dt_optim_sgd_create(model, &sp, &opt));
    if (strcmp(a.precision, "bf16") == 0) /* matmuls on bf16 operands (train_gpt --precision) */
        CHECK(dt_autocast_set(DT_DTYPE_BF16, NULL));
    const char *env = getenv("DT_ALLOC");
    const char *alloc = env != NULL && strcmp(env, "system") == 0 ? "system" : "caching";
    dt_runtime_info info;
    CHECK(dt_runtime_info_get(&info));
    if (rank == 0)
        printf("dtensor gpt %s: tp=%d, batch %lld x seq %lld, sgd lr %g, alloc %s, precision %s, "
               "gemm %s %s (bf16 %s), %d thread(s) per rank\n",
               a.config, world, (long long)a.batch, (long long)seq, a.lr, alloc, a.precision,
               info.gemm_engine, info.gemm_kernel, info.gemm_kernel_bf16, info.num_threads);

    dt_comm *wc = dt_runtime_world(rt);
    double mine[MAX_STEPS][NF], losses[MAX_STEPS];
    double *gathered = malloc(sizeof(double) * NF * MAX_STEPS * (size_t)world);
    if (gathered == NULL)
        return 1;
    dt__onednn_time_gemms(true);
    for (int64_t s = 0; s < a.steps; s++) {
        CHECK(dt_comm_barrier(wc, NULL)); /* every rank starts the step together */
        double f0 = minor_faults(), c0 = cpu_s(), t0 = now_s(), g0 = dt__onednn_gemm_seconds();
        losses[s] = train_step(&a, model, opt, data, s, seq);
        mine[s][0] = now_s() - t0;
        mine[s][1] = minor_faults() - f0;
        mine[s][2] = cpu_s() - c0;
        mine[s][3] = dt__onednn_gemm_seconds() - g0;
    }
    CHECK(dt_comm_allgather(wc, mine, gathered, NF * (size_t)a.steps, DT_DTYPE_F64, NULL));
    dt_memory_stats ms;
    CHECK(dt_memory_stats_get(dt_device_cpu(), &ms));
    double peak = (double)ms.total_peak, peaks_max = 0.0;
    double *peaks = malloc(sizeof(double) * (size_t)world);
    if (peaks == NULL)
        return 1;
    CHECK(dt_comm_allgather(wc, &peak, peaks, 1, DT_DTYPE_F64, NULL));
    for (int r = 0; r < world; r++)
        peaks_max = peaks[r] > peaks_max ? peaks[r] : peaks_max;
    if (rank == 0)
        print_report(alloc, a.precision, world, a.steps, gathered, losses, peaks_max);
    free(peaks);
    free(gathered);
    CHECK(dt_comm_barrier(wc, NULL));
    dt_optim_destroy(opt);
    dt_module_destroy(model);
    dt_mesh_release(mesh);
    dt_token_data_close(data);
    dt_runtime_destroy(rt);
    return 0;
}
