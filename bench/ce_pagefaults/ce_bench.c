/*
 * ce_bench: the huge-vocabulary cross entropy step (issue 8) with dtensor's
 * public ops: logits = x W^T (W [classes, hidden]), mean cross entropy,
 * backward to W and x. Gradients are cleared to NULL before every step (as
 * PyTorch's zero_grad(set_to_none=True)), so every step allocates its
 * temporaries and the gradients afresh: with the caching allocator the steps
 * after the first reuse the blocks of the first and take no page faults; with
 * DT_ALLOC=system every step maps (and faults in) new memory.
 *
 * Per step it reads the minor page faults (getrusage ru_minflt, whole
 * process) and the wall time; the last line is a RESULT summary that
 * bench/ce_pagefaults/run.sh turns into a table:
 *   RESULT alloc=A kernel=K threads=T step_ms=median(steps 2..N) cpu_ms=(user+sys, median)
 *          fwd_ms=.. bwd_ms=..
 *          faults_first=.. faults_per_step=mean(steps 2..N) peak_mib=.. cache_hits=..
 *
 *   ce_bench [--classes 1048576] [--hidden 512] [--batch 256] [--steps 4]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "dtensor.h"

#include "../common/bench_util.h"

#define CHECK(call)                                                                                \
    do {                                                                                           \
        dt_status ck_s_ = (call);                                                                  \
        if (ck_s_ != DT_OK) {                                                                      \
            fprintf(stderr, "ce_bench: %s: %s\n", dt_status_str(ck_s_), dt_last_error());          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

typedef struct step_result {
    double fwd_s, bwd_s, cpu_s;
    long faults;
    double loss;
} step_result;

/* One step: clear grads, forward, backward; everything it creates is released. */
static step_result run_step(dt_tensor *x, dt_tensor *w, dt_tensor *targets)
{
    step_result r;
    long f0 = minor_faults();
    double c0 = cpu_s(), t0 = now_s();
    CHECK(dt_tensor_set_grad(w, NULL));
    CHECK(dt_tensor_set_grad(x, NULL));
    dt_tensor *logits = NULL, *loss = NULL;
    CHECK(dt_linear(x, w, NULL, &logits));
    CHECK(dt_cross_entropy(logits, targets, -100, &loss));
    dt_tensor_release(logits); /* the graph keeps what backward needs */
    double t1 = now_s();
    CHECK(dt_backward(loss, NULL));
    double t2 = now_s();
    CHECK(dt_tensor_item(loss, &r.loss));
    dt_tensor_release(loss);
    r.fwd_s = t1 - t0;
    r.bwd_s = t2 - t1;
    r.cpu_s = cpu_s() - c0;
    r.faults = minor_faults() - f0;
    return r;
}

int main(int argc, char **argv)
{
    int64_t classes = 1048576, hidden = 512, batch = 256, steps = 4;
    for (int i = 1; i + 1 < argc; i += 2) {
        int64_t v = atoll(argv[i + 1]);
        if (strcmp(argv[i], "--classes") == 0)
            classes = v;
        else if (strcmp(argv[i], "--hidden") == 0)
            hidden = v;
        else if (strcmp(argv[i], "--batch") == 0)
            batch = v;
        else if (strcmp(argv[i], "--steps") == 0)
            steps = v;
        else {
            fprintf(stderr, "usage: %s [--classes C] [--hidden H] [--batch B] [--steps S]\n",
                    argv[0]);
            return 2;
        }
    }
    if (argc % 2 == 0 || classes < 1 || hidden < 1 || batch < 1 || steps < 2 || steps > 100) {
        fprintf(stderr, "ce_bench: sizes must be positive and 2 <= steps <= 100\n");
        return 2;
    }
    dt_runtime *rt = NULL;
    CHECK(dt_init(NULL, &rt));
    dt_runtime_info info;
    CHECK(dt_runtime_info_get(&info));
    const char *alloc =
        getenv("DT_ALLOC") && strcmp(getenv("DT_ALLOC"), "system") == 0 ? "system" : "caching";

    dt_tensor *w = NULL, *x = NULL, *targets = NULL;
    int64_t wshape[2] = {classes, hidden}, xshape[2] = {batch, hidden};
    dt_mem_category prev = dt_memory_set_default_category(DT_MEM_PARAMETER);
    CHECK(dt_tensor_empty(2, wshape, DT_DTYPE_F32, dt_device_cpu(), &w));
    CHECK(dt_tensor_fill_normal(w, 0.0, 0.02, 42, NULL, NULL));
    CHECK(dt_tensor_empty(2, xshape, DT_DTYPE_F32, dt_device_cpu(), &x));
    CHECK(dt_tensor_fill_normal(x, 0.0, 1.0, 7, NULL, NULL));
    dt_memory_set_default_category(prev);
    int64_t *ids = malloc((size_t)batch * sizeof *ids);
    if (!ids)
        return 1;
    for (int64_t i = 0; i < batch; i++)
        ids[i] = (i * 2654435761LL) % classes;
    CHECK(dt_tensor_from_buffer(1, &batch, DT_DTYPE_I64, ids, &targets));
    free(ids);
    CHECK(dt_tensor_set_requires_grad(w, true));
    CHECK(dt_tensor_set_requires_grad(x, true));

    printf("dtensor ce: classes %lld hidden %lld batch %lld, alloc %s, blas %s kernel %s, %d "
           "thread(s)\n",
           (long long)classes, (long long)hidden, (long long)batch, alloc, info.blas_library,
           info.blas_kernel, info.num_threads);
    double *step_s = malloc(2 * (size_t)steps * sizeof *step_s), *step_cpu = step_s + steps;
    if (!step_s)
        return 1;
    double fwd = 0, bwd = 0;
    long faults_first = 0, faults_rest = 0;
    for (int64_t s = 0; s < steps; s++) {
        step_result r = run_step(x, w, targets);
        step_s[s] = r.fwd_s + r.bwd_s;
        step_cpu[s] = r.cpu_s;
        printf("step %lld: %.1f ms (forward %.1f, backward %.1f), cpu %.1f ms, %ld minor faults, "
               "loss %.6f\n",
               (long long)s + 1, 1e3 * step_s[s], 1e3 * r.fwd_s, 1e3 * r.bwd_s, 1e3 * r.cpu_s,
               r.faults, r.loss);
        fflush(stdout);
        if (s == 0) {
            faults_first = r.faults;
        } else {
            faults_rest += r.faults;
            fwd += r.fwd_s;
            bwd += r.bwd_s;
        }
    }
    int64_t n = steps - 1;
    double median = median_after_first(step_s, steps), cpu = median_after_first(step_cpu, steps);
    dt_memory_stats ms;
    CHECK(dt_memory_stats_get(dt_device_cpu(), &ms));
    printf("RESULT alloc=%s kernel=%s threads=%d step_ms=%.1f cpu_ms=%.1f fwd_ms=%.1f bwd_ms=%.1f "
           "faults_first=%ld faults_per_step=%.1f peak_mib=%.0f cache_hits=%lld/%lld\n",
           alloc, info.blas_kernel, info.num_threads, 1e3 * median, 1e3 * cpu,
           1e3 * fwd / (double)n, 1e3 * bwd / (double)n, faults_first,
           (double)faults_rest / (double)n, (double)ms.total_peak / 1048576.0,
           (long long)ms.n_cache_hits, (long long)ms.n_allocs);
    free(step_s);
    dt_tensor_release(targets);
    dt_tensor_release(x);
    dt_tensor_release(w);
    dt_runtime_destroy(rt);
    return 0;
}
