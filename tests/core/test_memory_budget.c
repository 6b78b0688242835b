/*
 * The allocator gives memory back and the per-rank budget holds. Run by
 * ctest as core_memory_budget (no budget variables: the auto budget, trims)
 * and as core_memory_budget_limited with DT_MEMORY_LIMIT=8M and
 * DT_ALLOC_CACHE_MAX=3M: a tensor past the budget fails with DT_ERR_NO_MEMORY
 * naming the category and the bytes, nothing is half made, the cache is
 * emptied before a mapping that would pass the budget, and it never holds
 * more than its maximum.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/alloc.h"
#include "core/memory_budget.h"
#include "dtensor.h"

#define OK(call) assert_int_equal((call), DT_OK)
#define MIB      ((int64_t)1 << 20)

static bool limited; /* DT_MEMORY_LIMIT is set */

static dt_memory_stats stats(void)
{
    dt_memory_stats s;
    OK(dt_memory_stats_get(dt_device_cpu(), &s));
    return s;
}

static dt_status make(int64_t bytes, dt_tensor **t)
{
    int64_t n = bytes / 4;
    return dt_tensor_empty(1, &n, DT_DTYPE_F32, dt_device_cpu(), t);
}

static void test_parse_bytes(void **state)
{
    (void)state;
    uint64_t b = 0;
    assert_true(dt__parse_bytes("123", &b) && b == 123);
    assert_true(dt__parse_bytes("512M", &b) && b == 512ull << 20);
    assert_true(dt__parse_bytes("1.5G", &b) && b == 3ull << 29);
    assert_true(dt__parse_bytes("2GiB", &b) && b == 2ull << 30);
    assert_true(dt__parse_bytes("64KB", &b) && b == 64ull << 10);
    const char *bad[] = {"", "abc", "-1", "1.5x", "nan", "inf", "1e30", "12 M", "5MM"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (dt__parse_bytes(bad[i], &b))
            fail_msg("'%s' parsed as %llu bytes", bad[i], (unsigned long long)b);
}

/* A mapped block freed and not reused during one whole step goes back at the
 * end of the next; one reused every step stays cached. */
static void test_trim(void **state)
{
    (void)state;
    if (limited)
        skip();
    dt_memory_empty_cache();
    dt_tensor *once = NULL, *steady = NULL;
    OK(make(4 * MIB, &once));
    OK(make(2 * MIB, &steady));
    dt_tensor_release(once);
    dt_tensor_release(steady);
    assert_true(stats().cached >= 6 * MIB);
    for (int step = 0; step < 3; step++) {
        OK(make(2 * MIB, &steady)); /* the steady-state block: reused */
        dt_tensor_release(steady);
        dt__memory_step_end();
    }
    int64_t cached = stats().cached;
    if (!(cached >= 2 * MIB && cached < 4 * MIB))
        fail_msg("cached %lld bytes after the trims: want the 2 MiB block only", (long long)cached);
}

/* Past the budget: DT_ERR_NO_MEMORY naming the category, the bytes and the
 * variable; the accounting is unchanged and a smaller tensor still fits. */
static void test_budget_refuses(void **state)
{
    (void)state;
    const char *how = NULL;
    int64_t budget = dt__memory_budget(&how);
    if (!limited) { /* auto: a share of the host, named */
        assert_true(budget > 0);
        assert_non_null(strstr(how, "DT_MEMORY_LIMIT=auto"));
        return;
    }
    assert_int_equal(budget, 8 * MIB);
    dt_tensor *a = NULL, *b = NULL;
    dt_mem_category prev = dt_memory_set_default_category(DT_MEM_ACTIVATION);
    OK(make(5 * MIB, &a));
    dt_memory_stats before = stats();
    assert_int_equal(make(4 * MIB, &b), DT_ERR_NO_MEMORY);
    assert_null(b);
    const char *e = dt_last_error();
    const char *needles[] = {"4194304 bytes of activation", "DT_MEMORY_LIMIT=8M",
                             "live: activation 5.000 MiB"};
    for (size_t i = 0; i < sizeof(needles) / sizeof(needles[0]); i++)
        if (strstr(e, needles[i]) == NULL)
            fail_msg("message '%s' does not name '%s'", e, needles[i]);
    assert_int_equal(stats().total_current, before.total_current);
    OK(make(2 * MIB, &b)); /* what fits still does */
    dt_tensor_release(b);
    dt_tensor_release(a);
    dt_memory_set_default_category(prev);
}

/* The cache keeps at most DT_ALLOC_CACHE_MAX, and a mapping that would take
 * the blocks in use plus cached past the budget empties the cache first. */
static void test_cache_bounds(void **state)
{
    (void)state;
    if (!limited)
        skip();
    dt_memory_empty_cache();
    dt_tensor *t[3] = {NULL};
    for (int i = 0; i < 3; i++)
        OK(make(2 * MIB, &t[i]));
    for (int i = 0; i < 3; i++)
        dt_tensor_release(t[i]);
    int64_t cached = stats().cached;
    if (cached > 3 * MIB)
        fail_msg("cache holds %lld bytes, past DT_ALLOC_CACHE_MAX=3M", (long long)cached);
    assert_true(cached >= 2 * MIB); /* one 2 MiB block kept */
    dt_tensor *big = NULL;          /* 6.5 MiB in use + 2 cached > 8: the cache goes first */
    OK(make(6 * MIB + MIB / 2, &big));
    assert_int_equal(stats().cached, 0);
    dt_tensor_release(big);
}

int main(void)
{
    limited = getenv("DT_MEMORY_LIMIT") != NULL;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_bytes),
        cmocka_unit_test(test_trim),
        cmocka_unit_test(test_budget_refuses),
        cmocka_unit_test(test_cache_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
