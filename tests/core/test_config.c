/*
 * The tunables registry parses every DT_* variable strictly: dt_init refuses
 * a bad value naming the variable and the value; code reading a tunable
 * before dt_init takes the default and warns once; a DT_* name dtensor does
 * not read is warned about.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/config.h"
#include "dtensor.h"

static char last_line[1024];
static int warnings;
static bool saw_unknown;

static void capture(dt_log_level level, const char *subsys, const char *line, void *user)
{
    (void)subsys, (void)user;
    if (level == DT_LOG_LEVEL_WARN) {
        warnings++;
        snprintf(last_line, sizeof(last_line), "%s", line);
        if (strstr(line, "DT_TIMOUT_S is set, but dtensor reads no such variable") != NULL)
            saw_unknown = true;
    }
}

/* dt_init with @p var=@p value must fail with DT_ERR_INVALID_ARG and @p text. */
static void init_refuses(const char *var, const char *value, const char *text)
{
    setenv(var, value, 1);
    dt_runtime *rt = NULL;
    dt_status st = dt_init(NULL, &rt);
    if (st != DT_ERR_INVALID_ARG || strstr(dt_last_error(), text) == NULL)
        fail_msg("%s=%s: dt_init -> %s '%s', want invalid argument with \"%s\"", var, value,
                 dt_status_str(st), st != DT_OK ? dt_last_error() : "", text);
    assert_null(rt);
    dt_runtime_destroy(rt);
    unsetenv(var);
}

static void init_accepts(const char *var, const char *value)
{
    setenv(var, value, 1);
    dt_runtime *rt = NULL;
    dt_status st = dt_init(NULL, &rt);
    if (st != DT_OK)
        fail_msg("%s=%s: dt_init -> %s '%s'", var, value, dt_status_str(st), dt_last_error());
    dt_runtime_destroy(rt);
    unsetenv(var);
}

/* First, so the once-per-process warning about unknown names is still to come. */
static void test_unknown_name_warned(void **state)
{
    (void)state;
    setenv("DT_TIMOUT_S", "5", 1);
    init_accepts("DT_LOG", "warn");
    assert_true(saw_unknown);
    unsetenv("DT_TIMOUT_S");
}

static void test_init_refuses_bad_values(void **state)
{
    (void)state;
    init_refuses("DT_TIMEOUT_S", "abc",
                 "dt_init: environment variable DT_TIMEOUT_S='abc' is not a number (want a "
                 "number > 0 and <= 1e+07)");
    init_refuses("DT_TIMEOUT_S", "5s", "DT_TIMEOUT_S='5s' is not a number");
    init_refuses("DT_TIMEOUT_S", "nan", "DT_TIMEOUT_S='nan' is not a number");
    init_refuses("DT_TIMEOUT_S", "0", "DT_TIMEOUT_S='0' is out of range");
    init_refuses("DT_TIMEOUT_S", "-3", "DT_TIMEOUT_S='-3' is out of range");
    init_refuses("DT_TIMEOUT_S", "inf", "DT_TIMEOUT_S='inf' is out of range");
    init_refuses("DT_STORE_STALL_S", "soon", "DT_STORE_STALL_S='soon' is not a number");
    init_refuses("DT_SHM", "maybe",
                 "DT_SHM='maybe' is not a boolean (want 0 or 1, true or false, yes or no, on or "
                 "off)");
    init_refuses("DT_CMA", "2", "DT_CMA='2' is not a boolean");
    init_refuses("DT_NCCL", "nope", "DT_NCCL='nope' is not a boolean");
    init_refuses("DT_BLAS_AUTOSELECT", "auto", "DT_BLAS_AUTOSELECT='auto' is not a boolean");
    init_refuses("DT_LOG", "loud",
                 "DT_LOG='loud' is not an allowed value (want one of none, error, warn, info, "
                 "debug, trace)");
    init_refuses("DT_ALLOC", "pool", "DT_ALLOC='pool' is not an allowed value");
    init_refuses("DT_DEVICE", "gpu", "DT_DEVICE='gpu' is not an allowed value");
    init_refuses("DT_NUM_THREADS", "2.5",
                 "DT_NUM_THREADS='2.5' is not an integer (want an integer in 0..65536)");
    init_refuses("DT_NUM_THREADS", "-1", "DT_NUM_THREADS='-1' is out of range");
    init_refuses("DT_NUM_THREADS", " 4", "DT_NUM_THREADS=' 4' is not an integer");
    init_refuses("DT_RING_SEGMENT_KB", "4294967298000000000000",
                 "DT_RING_SEGMENT_KB='4294967298000000000000' is out of range");
    init_refuses("DT_RING_SEGMENT_KB", "0", "DT_RING_SEGMENT_KB='0' is out of range");
    init_refuses("DT_SPIN_US", "-2", "DT_SPIN_US='-2' is out of range");
    init_refuses("DT_SIM_DELAY_US", "fast", "DT_SIM_DELAY_US='fast' is not an integer");
    init_refuses("DT_ALGO", "allreduc:ring",
                 "DT_ALGO='allreduc:ring' names the collective 'allreduc', not one of");
    init_refuses("DT_ALGO", "allreduce", "DT_ALGO='allreduce' is not a comma list");
    init_refuses("DT_ALGO", "allreduce:ring, broadcast:binomial",
                 "is not a comma list of collective:algorithm");
    init_refuses("DT_LOG_SUBSYS", "comm;mesh",
                 "DT_LOG_SUBSYS='comm;mesh' is not a comma list of subsystem names");
}

static void test_init_accepts_good_values(void **state)
{
    (void)state;
    init_accepts("DT_TIMEOUT_S", "2.5");
    init_accepts("DT_SHM", "yes");
    init_accepts("DT_SHM", "OFF");
    init_accepts("DT_LOG", "ERROR");
    init_accepts("DT_ALLOC", "system");
    init_accepts("DT_NUM_THREADS", "1");
    init_accepts("DT_SPIN_US", "-1");
    init_accepts("DT_ALGO", "allreduce:ring,broadcast:binomial");
    init_accepts("DT_LOG_SUBSYS", "comm,mesh");
    init_accepts("DT_DEVICE", "cpu");
    init_accepts("DT_TIMEOUT_S", ""); /* empty: unset */
}

/* The getters hand on canonical spellings. */
static void test_getters_canonical(void **state)
{
    (void)state;
    setenv("DT_SHM", "yes", 1);
    assert_int_equal(dt__config_int("DT_SHM"), 1);
    assert_string_equal(dt__config_str("DT_SHM"), "1");
    setenv("DT_SHM", "Off", 1);
    assert_int_equal(dt__config_int("DT_SHM"), 0);
    unsetenv("DT_SHM");
    assert_int_equal(dt__config_int("DT_SHM"), 1);
    setenv("DT_ALLOC", "SYSTEM", 1);
    assert_string_equal(dt__config_str("DT_ALLOC"), "system");
    unsetenv("DT_ALLOC");
    setenv("DT_TIMEOUT_S", "7.5", 1);
    assert_true(dt__config_double("DT_TIMEOUT_S") == 7.5);
    unsetenv("DT_TIMEOUT_S");
}

/* Before dt_init: the default, and one warning naming the variable and value. */
static void test_getters_fall_back_once(void **state)
{
    (void)state;
    warnings = 0;
    setenv("DT_RING_SEGMENT_KB", "12x", 1);
    assert_int_equal(dt__config_int("DT_RING_SEGMENT_KB"), 4096);
    assert_int_equal(warnings, 1);
    assert_non_null(strstr(last_line, "DT_RING_SEGMENT_KB='12x' is not an integer"));
    assert_non_null(strstr(last_line, "using the default 4096"));
    assert_int_equal(dt__config_int("DT_RING_SEGMENT_KB"), 4096);
    assert_int_equal(warnings, 1); /* once */
    unsetenv("DT_RING_SEGMENT_KB");

    setenv("DT_SPIN_US", "maybe", 1);
    assert_int_equal(dt__config_int("DT_SPIN_US"), -1);
    assert_int_equal(warnings, 2);
    unsetenv("DT_SPIN_US");

    /* a bool that is not one: the default (on), not "0" read as off */
    setenv("DT_CMA", "maybe", 1);
    assert_int_equal(dt__config_int("DT_CMA"), 1);
    unsetenv("DT_CMA");
    setenv("DT_STORE_STALL_S", "-1", 1);
    assert_true(dt__config_double("DT_STORE_STALL_S") == 10.0);
    unsetenv("DT_STORE_STALL_S");
    /* another program's variable is read as before, never refused */
    setenv("SLURM_NTASKS_PER_NODE", "2(x3)", 1);
    assert_int_equal(dt__config_int("SLURM_NTASKS_PER_NODE"), 2);
    unsetenv("SLURM_NTASKS_PER_NODE");
}

/* "--init": only dt_init, as every rank of a job does first (run under dtrun by ctest). */
static int init_only(void)
{
    dt_runtime *rt = NULL;
    dt_status st = dt_init(NULL, &rt);
    if (st != DT_OK) {
        fprintf(stderr, "core_config: %s\n", dt_last_error());
        return 1;
    }
    dt_runtime_destroy(rt);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--init") == 0)
        return init_only();
    static const char *const launcher[] = {"RANK",
                                           "WORLD_SIZE",
                                           "LOCAL_RANK",
                                           "LOCAL_WORLD_SIZE",
                                           "OMPI_COMM_WORLD_RANK",
                                           "OMPI_COMM_WORLD_SIZE",
                                           "PMI_RANK",
                                           "PMI_SIZE",
                                           "SLURM_PROCID",
                                           "SLURM_NTASKS"};
    for (size_t i = 0; i < sizeof(launcher) / sizeof(launcher[0]); i++)
        unsetenv(launcher[i]); /* a world of one: dt_init needs no store */
    /* the suite's own DT_* settings other than the device would hide cases */
    static const char *const mine[] = {
        "DT_TIMEOUT_S", "DT_SHM",     "DT_CMA",        "DT_LOG",         "DT_ALLOC",
        "DT_ALGO",      "DT_SPIN_US", "DT_LOG_SUBSYS", "DT_NUM_THREADS", "DT_RING_SEGMENT_KB"};
    for (size_t i = 0; i < sizeof(mine) / sizeof(mine[0]); i++)
        unsetenv(mine[i]);
    setenv("DT_DEVICE", "cpu", 1);
    dt_log_set(capture, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_name_warned),
        /* before dt_init refuses the same variables: its error replaces the warning */
        cmocka_unit_test(test_getters_fall_back_once),
        cmocka_unit_test(test_getters_canonical),
        cmocka_unit_test(test_init_refuses_bad_values),
        cmocka_unit_test(test_init_accepts_good_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
