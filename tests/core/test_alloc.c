/*
 * The caching host allocator and memory accounting. Run twice by ctest: as
 * core_alloc (caching, the default) and as core_alloc_system with
 * DT_ALLOC=system in the environment; the expectations follow the mode.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cmocka.h>

#include "core/alloc.h"
#include "core/tensor_impl.h"
#include "dtensor.h"

#define OK(call) assert_int_equal((call), DT_OK)

static bool caching;

static dt_memory_stats stats(void)
{
    dt_memory_stats s;
    OK(dt_memory_stats_get(dt_device_cpu(), &s));
    return s;
}

static dt_tensor *make(int64_t n_floats)
{
    dt_tensor *t = NULL;
    OK(dt_tensor_empty(1, &n_floats, DT_DTYPE_F32, dt_device_cpu(), &t));
    return t;
}

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

static void test_size_classes(void **state)
{
    (void)state;
    assert_int_equal(dt__alloc_size_class(0), 64);
    assert_int_equal(dt__alloc_size_class(1), 64);
    assert_int_equal(dt__alloc_size_class(64), 64);
    assert_int_equal(dt__alloc_size_class(65), 128);
    assert_int_equal(dt__alloc_size_class(4000), 4096);
    assert_int_equal(dt__alloc_size_class(1 << 20), 1 << 20);
    assert_int_equal(dt__alloc_size_class((1 << 20) + 1), (1 << 20) + (1 << 18));
    assert_int_equal(dt__alloc_size_class(3 << 20), 3 << 20);
    assert_int_equal(dt__alloc_size_class((3 << 20) + 1), (7 << 19));
    assert_int_equal(dt__alloc_size_class((size_t)5 << 30), (size_t)5 << 30);
    assert_int_equal(dt__alloc_size_class(((size_t)7 << 30) + 1), (size_t)8 << 30);
    assert_int_equal(dt__alloc_size_class((size_t)1 << 62), (size_t)1 << 62);
}

static void test_cache_hit_after_free(void **state)
{
    (void)state;
    dt_memory_empty_cache();
    dt_memory_stats s0 = stats();
    assert_int_equal(s0.cached, 0);
    dt_tensor *a = make(1000); /* 4000 bytes: block 4096 */
    void *pa = dt_tensor_data(a);
    dt_tensor_release(a);
    dt_memory_stats s1 = stats();
    assert_int_equal(s1.cached, caching ? 4096 : 0);
    dt_tensor *b = make(900); /* 3600 bytes: the same class */
    dt_memory_stats s2 = stats();
    assert_int_equal(s2.n_allocs, s0.n_allocs + 2);
    assert_int_equal(s2.n_cache_hits, s0.n_cache_hits + (caching ? 1 : 0));
    assert_int_equal(s2.cached, 0);
    if (caching)
        assert_ptr_equal(dt_tensor_data(b), pa);
    dt_tensor *c = make(2000); /* another class: a miss */
    assert_int_equal(stats().n_cache_hits, s2.n_cache_hits);
    dt_tensor_release(c);
    dt_tensor_release(b);

    /* a big (mmap) block is reused too */
    dt_tensor *big = make(3 << 20);
    void *pbig = dt_tensor_data(big);
    assert_true(((uintptr_t)pbig % 64) == 0);
    dt_tensor_release(big);
    assert_int_equal(stats().cached, caching ? (12 << 20) + 4096 + 8192 : 0);
    big = make((3 << 20) - 100);
    if (caching)
        assert_ptr_equal(dt_tensor_data(big), pbig);
    dt_tensor_release(big);

    dt_memory_empty_cache();
    assert_int_equal(stats().cached, 0);
}

/* A request whose class has nothing cached takes a cached block up to 2x bigger. */
static void test_larger_block_reuse(void **state)
{
    (void)state;
    dt_memory_empty_cache();
    dt_tensor *a = make(1 << 19); /* 2 MiB */
    void *pa = dt_tensor_data(a);
    dt_tensor_release(a);
    dt_memory_stats s0 = stats();
    dt_tensor *b = make((1 << 18) + 1000); /* ~1 MiB: class 1.25 MiB, served by the 2 MiB block */
    dt_memory_stats s1 = stats();
    if (caching) {
        assert_ptr_equal(dt_tensor_data(b), pa);
        assert_int_equal(s1.n_cache_hits, s0.n_cache_hits + 1);
        assert_int_equal(s1.cached, s0.cached - (2 << 20));
    }
    dt_tensor_release(b); /* back into the 2 MiB list */
    assert_int_equal(stats().cached, caching ? s0.cached : 0);
    dt_tensor *c = make(1 << 17); /* 512 KiB: 2 MiB is more than twice as big, a miss */
    assert_int_equal(stats().n_cache_hits, s1.n_cache_hits);
    dt_tensor_release(c);
    dt_memory_empty_cache();
}

static void test_accounting(void **state)
{
    (void)state;
    dt_memory_stats s0 = stats();
    dt_mem_category prev = dt_memory_set_default_category(DT_MEM_ACTIVATION);
    dt_tensor *a = make(1000);
    dt_memory_set_default_category(DT_MEM_GRADIENT);
    dt_tensor *g = make(10);
    dt_memory_set_default_category(prev);
    dt_memory_stats s1 = stats();
    assert_int_equal(s1.current[DT_MEM_ACTIVATION], s0.current[DT_MEM_ACTIVATION] + 4000);
    assert_int_equal(s1.current[DT_MEM_GRADIENT], s0.current[DT_MEM_GRADIENT] + 40);
    assert_int_equal(s1.total_current, s0.total_current + 4040);

    /* re-tagging moves the bytes; the new category's peak follows */
    dt_tensor_set_mem_category(a, DT_MEM_PARAMETER);
    dt_memory_stats s2 = stats();
    assert_int_equal(s2.current[DT_MEM_ACTIVATION], s0.current[DT_MEM_ACTIVATION]);
    assert_int_equal(s2.current[DT_MEM_PARAMETER], s0.current[DT_MEM_PARAMETER] + 4000);
    assert_true(s2.peak[DT_MEM_PARAMETER] >= s2.current[DT_MEM_PARAMETER]);
    assert_int_equal(s2.total_current, s1.total_current);
    dt_tensor_release(a);
    dt_tensor_release(g);
    dt_memory_stats s3 = stats();
    for (int c = 0; c < DT_MEM_CATEGORY_COUNT; c++)
        assert_int_equal(s3.current[c], s0.current[c]);
    assert_int_equal(s3.total_current, s0.total_current);

    /* an unknown category is ignored */
    assert_int_equal(dt_memory_set_default_category((dt_mem_category)42), DT_MEM_OTHER);
    assert_int_equal(dt_memory_set_default_category(DT_MEM_OTHER), DT_MEM_OTHER);

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    dt_memory_print(&s1, f);
    fclose(f);
    assert_non_null(strstr(text, "activation"));
    assert_non_null(strstr(text, "cache hits"));
    free(text);
}

static void test_peaks(void **state)
{
    (void)state;
    dt_memory_reset_peak(dt_device_cpu());
    dt_memory_stats s0 = stats();
    assert_int_equal(s0.total_peak, s0.total_current);
    dt_mem_category prev = dt_memory_set_default_category(DT_MEM_OPTIMIZER);
    dt_tensor *a = make(1 << 18); /* 1 MiB */
    dt_tensor *b = make(1 << 17);
    dt_tensor_release(a);
    dt_tensor *c = make(1 << 16);
    dt_memory_set_default_category(prev);
    dt_memory_stats s1 = stats();
    assert_int_equal(s1.peak[DT_MEM_OPTIMIZER], s0.current[DT_MEM_OPTIMIZER] + (3 << 19));
    assert_int_equal(s1.total_peak, s0.total_current + (3 << 19));
    assert_int_equal(s1.current[DT_MEM_OPTIMIZER], s0.current[DT_MEM_OPTIMIZER] + (3 << 18));
    dt_memory_reset_peak(dt_device_cpu());
    assert_int_equal(stats().peak[DT_MEM_OPTIMIZER], s1.current[DT_MEM_OPTIMIZER]);
    dt_tensor_release(b);
    dt_tensor_release(c);
}

/* A steady-state "training step" (same big temporaries each step) maps no new pages. */
static void test_steady_state_page_faults(void **state)
{
    (void)state;
    const int64_t n = 2 << 20; /* 8 MiB of f32 */
    long faults_after_first = 0;
    for (int step = 0; step < 6; step++) {
        long f0 = minor_faults();
        dt_tensor *x = make(n), *y = make(n / 2);
        OK(dt_tensor_fill(x, 1.0));
        OK(dt_tensor_fill(y, 2.0));
        dt_tensor_release(y);
        dt_tensor_release(x);
        if (step > 0)
            faults_after_first += minor_faults() - f0;
    }
    print_message("minor page faults in steps 2-6 (%s): %ld\n", caching ? "caching" : "system",
                  faults_after_first);
    if (caching)
        assert_true(faults_after_first < 50); /* 3072 pages are touched per step */
    dt_memory_empty_cache();
}

static void *thread_main(void *arg)
{
    dt_mem_category cat = (dt_mem_category)(uintptr_t)arg;
    dt_memory_set_default_category(cat); /* thread-local: other threads unaffected */
    for (int i = 0; i < 2000; i++) {
        int64_t n = 1 + (i * 37) % 3000;
        dt_tensor *t = NULL;
        if (dt_tensor_empty(1, &n, DT_DTYPE_F32, dt_device_cpu(), &t) != DT_OK ||
            dt_tensor_mem_category(t) != cat)
            return (void *)1;
        ((float *)dt_tensor_data(t))[n - 1] = 1.0f;
        dt_tensor_release(t);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    dt_memory_stats s0 = stats();
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, thread_main, (void *)(uintptr_t)(i + 1)), 0);
    for (int i = 0; i < 4; i++) {
        void *ret = NULL;
        pthread_join(th[i], &ret);
        assert_null(ret);
    }
    dt_memory_stats s1 = stats();
    assert_int_equal(s1.total_current, s0.total_current);
    assert_int_equal(s1.n_allocs, s0.n_allocs + 8000);
    if (caching)
        assert_true(s1.n_cache_hits > s0.n_cache_hits + 7000);
    assert_int_equal(dt_memory_set_default_category(DT_MEM_OTHER), DT_MEM_OTHER);
}

static void test_bad_input(void **state)
{
    (void)state;
    assert_int_equal(dt_memory_stats_get(dt_device_cpu(), NULL), DT_ERR_INVALID_ARG);
    dt_memory_stats s;
    dt_device bad = {(dt_device_type)7, 0};
    assert_int_equal(dt_memory_stats_get(bad, &s), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "unknown device"));
    /* no CUDA allocator is registered in a CPU build */
    dt_device cuda = {DT_DEVICE_CUDA, 0};
    dt_tensor *t = NULL;
    assert_int_equal(dt_tensor_empty(1, (int64_t[]){4}, DT_DTYPE_F32, cuda, &t),
                     DT_ERR_UNSUPPORTED);
    assert_non_null(strstr(dt_last_error(), "cuda:0"));
    assert_null(t);
    /* too big for the machine: NO_MEMORY, not a crash */
    assert_int_equal(
        dt_tensor_empty(1, (int64_t[]){(int64_t)1 << 60}, DT_DTYPE_F32, dt_device_cpu(), &t),
        DT_ERR_NO_MEMORY);
    assert_null(t);
    assert_int_equal(
        dt_tensor_empty(1, (int64_t[]){((int64_t)1 << 62) + 1}, DT_DTYPE_U8, dt_device_cpu(), &t),
        DT_ERR_NO_MEMORY);
    /* refused by the memory budget (DT_MEMORY_LIMIT=auto) or, without one, the allocator */
    assert_non_null(strstr(dt_last_error(), "4611686018427387905 bytes"));
    assert_null(t);
    dt_memory_print(NULL, stdout);
    assert_string_equal(dt_mem_category_name(DT_MEM_COMM), "comm");
    assert_string_equal(dt_mem_category_name((dt_mem_category)-1), "invalid");
}

int main(void)
{
    const char *mode = getenv("DT_ALLOC");
    caching = !(mode != NULL && strcmp(mode, "system") == 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_classes),
        cmocka_unit_test(test_cache_hit_after_free),
        cmocka_unit_test(test_larger_block_reuse),
        cmocka_unit_test(test_accounting),
        cmocka_unit_test(test_peaks),
        cmocka_unit_test(test_steady_state_page_faults),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
