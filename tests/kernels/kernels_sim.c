/*
 * The sim device is strict, and these tests prove it can catch what it is
 * for: a host read or write of its memory crashes (death tests in child
 * processes, which also hold under ASan); a host read of an asynchronous
 * copy's destination without dt_device_synchronize sees poison, not the
 * value; work really goes to the stream; a kernel's failure surfaces at the
 * next synchronisation, once, naming the entry; frees wait for queued
 * kernels; fresh device memory reads as NaN, not zeros.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/sim/sim.h"
#include "kernels_test_util.h"

#define S_OK(call) assert_int_equal((call), DT_OK)

static const dt_device sim = {DT_DEVICE_SIM, 0};

static dt_tensor *sim_full(int64_t n, double v)
{
    dt_tensor *t = NULL;
    S_OK(dt_tensor_full(1, &n, DT_DTYPE_F32, sim, v, &t));
    return t;
}

/* Run @p body in a child; true when the child died instead of returning. */
static bool child_crashes(void (*body)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* cmocka catches SIGSEGV to report a failing test: die of it instead */
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        body();
        _exit(0); /* the host access went through: not strict */
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    /* the fault itself, or AddressSanitizer's report of it (its exit code 1) */
    return (WIFSIGNALED(st) && (WTERMSIG(st) == SIGSEGV || WTERMSIG(st) == SIGBUS)) ||
           (WIFEXITED(st) && WEXITSTATUS(st) == 1);
}

static volatile float sink;

/* The data of a fresh sim tensor; exits 3 (not a crash) if it is not a sim address. */
static float *sim_data(int64_t n)
{
    dt_tensor *t = sim_full(n, 1.0);
    if (dt_device_synchronize(sim) != DT_OK || !dt__sim_is_tagged(dt_tensor_data(t)))
        _exit(3);
    return dt_tensor_data(t);
}

static void host_reads_sim_memory(void)
{
    sink = sim_data(16)[3];
}

static void host_writes_sim_memory(void)
{
    sim_data(16)[3] = 2.0f;
}

static void host_memcpy_from_sim_memory(void)
{
    float buf[1024];
    memcpy(buf, sim_data(1024), sizeof(buf));
    sink = buf[7];
}

static void test_host_access_crashes(void **state)
{
    (void)state;
    assert_true(child_crashes(host_reads_sim_memory));
    assert_true(child_crashes(host_writes_sim_memory));
    assert_true(child_crashes(host_memcpy_from_sim_memory));
    /* and the same calls through the copy entry points are fine */
    dt_tensor *t = sim_full(16, 1.5), *one = sim_full(1, 1.5);
    double v = 0;
    S_OK(dt_tensor_item(one, &v));
    assert_true(v == 1.5);
    assert_true(dt_tensor_item_at(t, 15) == 1.5);
    dt_tensor_release(t);
    dt_tensor_release(one);
}

/* DT_SIM_DELAY_US (set in main) holds each job back, so the race is not lost by luck. */
static void test_unsynchronised_read_is_caught(void **state)
{
    (void)state;
    dt_tensor *d = sim_full(64, 2.5), *h = NULL;
    int64_t n = 64;
    S_OK(dt_tensor_zeros(1, &n, DT_DTYPE_F32, dt_device_cpu(), &h));
    S_OK(dt_tensor_copy_async_(h, d));
    const float *hp = dt_tensor_data(h);
    /* forgot to synchronise: poison (NaN), not 2.5 and not the zeros it held */
    assert_true(isnan(hp[0]) && isnan(hp[63]));
    S_OK(dt_device_synchronize(sim));
    assert_true(hp[0] == 2.5f && hp[63] == 2.5f);
    /* the blocking copy waits by itself */
    S_OK(dt_tensor_fill(d, -1.0));
    S_OK(dt_tensor_copy_(h, d));
    assert_true(hp[0] == -1.0f);
    dt_tensor_release(d);
    dt_tensor_release(h);
}

static void test_work_goes_to_the_stream(void **state)
{
    (void)state;
    uint64_t before = dt__sim_jobs_submitted();
    dt_tensor *a = sim_full(8, 1.0), *b = sim_full(8, 2.0), *c = NULL;
    S_OK(dt_add(a, b, &c));
    assert_true(dt__sim_jobs_submitted() >= before + 3); /* two fills and the add */
    assert_int_equal(dt_tensor_device(c).type, DT_DEVICE_SIM);
    assert_true(dt_tensor_item_at(c, 7) == 3.0);
    dt_tensor_release(a);
    dt_tensor_release(b);
    dt_tensor_release(c);
}

static void test_async_error_is_sticky_then_reported_once(void **state)
{
    (void)state;
    int64_t ls[2] = {2, 3}, n = 2, tv[2] = {1, 7}; /* target 7 is outside [0, 3) */
    dt_tensor *logits = NULL, *th = NULL, *tg = NULL, *loss = NULL, *lse = NULL;
    S_OK(dt_tensor_zeros(2, ls, DT_DTYPE_F32, sim, &logits));
    S_OK(dt_tensor_from_buffer(1, &n, DT_DTYPE_I64, tv, &th));
    S_OK(dt_tensor_to_device(th, sim, &tg));
    S_OK(dt_tensor_empty(1, &n, DT_DTYPE_F32, sim, &loss));
    S_OK(dt_tensor_empty(1, &n, DT_DTYPE_F32, sim, &lse));
    const dt_kernel_ops *k = dt__kernels_for(sim);
    /* queued: the kernel has not run, so the call cannot know yet */
    S_OK(k->cross_entropy(logits, tg, -100, loss, lse));
    assert_int_equal(dt_device_synchronize(sim), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "cross_entropy"));
    assert_non_null(strstr(dt_last_error(), "target 7"));
    S_OK(dt_device_synchronize(sim)); /* reported once */
    dt_tensor *ts[] = {logits, th, tg, loss, lse};
    for (int i = 0; i < 5; i++)
        dt_tensor_release(ts[i]);
}

static void test_free_waits_for_queued_kernels(void **state)
{
    (void)state;
    /* released while its fill is still queued: the block must outlive the
     * kernel (ASan would see the write into freed memory otherwise) */
    for (int i = 0; i < 4; i++) {
        dt_tensor *t = sim_full(1 << 16, (double)i);
        dt_tensor_release(t);
    }
    S_OK(dt_device_synchronize(sim));
}

static void test_fresh_memory_is_poisoned(void **state)
{
    (void)state;
    int64_t n = 5;
    dt_tensor *t = NULL;
    S_OK(dt_tensor_empty(1, &n, DT_DTYPE_F32, sim, &t));
    assert_true(isnan(dt_tensor_item_at(t, 4)));
    dt_tensor_release(t);
}

static void test_devices_named(void **state)
{
    (void)state;
    dt_device d;
    S_OK(dt_device_parse("sim", &d));
    assert_int_equal(d.type, DT_DEVICE_SIM);
    S_OK(dt_device_parse("cuda:3", &d));
    assert_int_equal(d.type, DT_DEVICE_CUDA);
    assert_int_equal(d.index, 3);
    assert_int_equal(dt_device_parse("tpu", &d), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "'tpu'"));
    assert_string_equal(dt_device_type_name(DT_DEVICE_SIM), "sim");
    S_OK(dt_device_synchronize(dt_device_cpu()));
    /* a sim tensor mixed with a host one in a kernel is refused, naming both */
    dt_tensor *a = sim_full(4, 1.0), *h = NULL, *o = sim_full(4, 0.0);
    int64_t n = 4;
    S_OK(dt_tensor_ones(1, &n, DT_DTYPE_F32, dt_device_cpu(), &h));
    assert_int_equal(dt__kernels_for(sim)->binary(DT_BINARY_ADD, a, h, o), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "cpu:0, not on the sim device"));
    dt_tensor_release(a);
    dt_tensor_release(h);
    dt_tensor_release(o);
}

/* The counter-based random fills give a device tensor the CPU's values. */
static void test_random_fills_match_the_cpu(void **state)
{
    (void)state;
    int64_t shape[2] = {9, 13}, global[2] = {20, 13}, off[2] = {4, 0};
    dt_tensor *c = NULL, *d = NULL;
    S_OK(dt_tensor_empty(2, shape, DT_DTYPE_F32, dt_device_cpu(), &c));
    S_OK(dt_tensor_empty(2, shape, DT_DTYPE_F32, sim, &d));
    S_OK(dt_tensor_fill_normal(c, 0.5, 2.0, 77, global, off));
    S_OK(dt_tensor_fill_normal(d, 0.5, 2.0, 77, global, off));
    assert_true(dt_tensor_equal(c, d));
    S_OK(dt_tensor_fill_uniform(c, -1.0, 3.0, 78, NULL, NULL));
    S_OK(dt_tensor_fill_uniform(d, -1.0, 3.0, 78, NULL, NULL));
    assert_true(dt_tensor_equal(c, d));
    dt_tensor_release(c);
    dt_tensor_release(d);
}

int main(void)
{
    setenv("DT_SIM_DELAY_US", "20000", 1); /* read when the stream starts */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_access_crashes),
        cmocka_unit_test(test_unsynchronised_read_is_caught),
        cmocka_unit_test(test_work_goes_to_the_stream),
        cmocka_unit_test(test_async_error_is_sticky_then_reported_once),
        cmocka_unit_test(test_free_waits_for_queued_kernels),
        cmocka_unit_test(test_fresh_memory_is_poisoned),
        cmocka_unit_test(test_devices_named),
        cmocka_unit_test(test_random_fills_match_the_cpu),
    };
    return cmocka_run_group_tests_name("sim_device", tests, NULL, NULL);
}
