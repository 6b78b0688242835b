/*
 * Logging: a warning every rank of a host would print the same (the BLAS
 * fallback kernel, say) is printed by the host's first rank only, going by
 * the launcher's local-rank variable; a process launched alone prints it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/log.h"

static int lines;

static void count_lines(dt_log_level level, const char *subsys, const char *line, void *user)
{
    (void)level, (void)subsys, (void)line, (void)user;
    lines++;
}

static void warn_once(void)
{
    DT_LOG_WARN_HOST("test", "the same on every rank of this host");
}

static void test_warning_once_per_host(void **state)
{
    (void)state;
    static const char *const vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                       "MPI_LOCALRANKID", "SLURM_LOCALID"};
    dt_log_set(count_lines, NULL);
    dt_log_set_level(DT_LOG_LEVEL_WARN);
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
    lines = 0;
    warn_once(); /* launched alone */
    assert_int_equal(lines, 1);
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        setenv(vars[i], "2", 1);
        lines = 0;
        warn_once();
        assert_int_equal(lines, 0);
        assert_false(dt__log_host_leader());
        setenv(vars[i], "0", 1);
        warn_once();
        assert_int_equal(lines, 1);
        unsetenv(vars[i]);
    }
    dt_log_set(NULL, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_warning_once_per_host)};
    return cmocka_run_group_tests_name("log", tests, NULL, NULL);
}
