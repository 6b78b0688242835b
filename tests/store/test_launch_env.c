/* store_launch_env: dt__launch_env_read for each launcher, and its refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "comm/launch_env.h"

static const char *all_vars[] = {
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "DT_JOB_TOKEN",
    "TORCHELASTIC_RUN_ID",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "OMPI_MCA_ess_base_jobid",
    "PMIX_NAMESPACE",
    "PMI_RANK",
    "PMI_SIZE",
    "PMI_JOBID",
    "MPI_LOCALRANKID",
    "MPI_LOCALNRANKS",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_TASKS_PER_NODE",
    "SLURM_JOB_ID",
    "SLURM_JOBID",
    "SLURM_STEP_ID",
    "SLURM_STEPID",
    "SLURM_STEP_NODELIST",
    "SLURM_JOB_NODELIST",
    "SLURM_NODELIST",
};

static int clear_env(void **state)
{
    for (size_t i = 0; i < sizeof(all_vars) / sizeof(all_vars[0]); i++)
        unsetenv(all_vars[i]);
    return 0;
}

static void set(const char *k, const char *v)
{
    setenv(k, v, 1);
}

static void expect_error(const char *needle)
{
    dt_launch_env e;
    memset(&e, 0x5a, sizeof(e));
    assert_int_equal(dt__launch_env_read(&e), DT_ERR_INVALID_ARG);
    if (strstr(dt_last_error(), needle) == NULL)
        fail_msg("error '%s' does not name '%s'", dt_last_error(), needle);
    assert_int_equal(e.rank, 0x5a5a5a5a); /* untouched */
}

static void test_single(void **state)
{
    dt_launch_env e;
    assert_int_equal(dt__launch_env_read(&e), DT_OK);
    assert_string_equal(e.source, "single");
    assert_int_equal(e.rank, 0);
    assert_int_equal(e.size, 1);
    assert_int_equal(e.local_rank, 0);
    assert_int_equal(e.local_size, 1);
    assert_int_equal(e.master_port, 0);
    assert_string_equal(e.master_addr, "127.0.0.1");
}

static void test_torchrun_vars(void **state)
{
    set("RANK", "5");
    set("WORLD_SIZE", "8");
    set("LOCAL_RANK", "1");
    set("LOCAL_WORLD_SIZE", "4");
    set("MASTER_ADDR", "node0.example");
    set("MASTER_PORT", "29500");
    set("DT_JOB_TOKEN", "abc123");
    set("OMPI_COMM_WORLD_RANK", "0"); /* torchrun variables win */
    set("OMPI_COMM_WORLD_SIZE", "2");
    dt_launch_env e;
    assert_int_equal(dt__launch_env_read(&e), DT_OK);
    assert_string_equal(e.source, "env");
    assert_int_equal(e.rank, 5);
    assert_int_equal(e.size, 8);
    assert_int_equal(e.local_rank, 1);
    assert_int_equal(e.local_size, 4);
    assert_string_equal(e.master_addr, "node0.example");
    assert_int_equal(e.master_port, 29500);
    assert_string_equal(e.token, "abc123");
}

static void test_torchrun_errors(void **state)
{
    set("RANK", "abc");
    set("WORLD_SIZE", "4");
    set("MASTER_PORT", "1234");
    expect_error("RANK='abc'");
    set("RANK", "4");
    expect_error("RANK=4");
    set("RANK", "-1");
    expect_error("RANK=-1");
    set("RANK", "1");
    set("WORLD_SIZE", "0");
    expect_error("WORLD_SIZE=0");
    set("WORLD_SIZE", "4x");
    expect_error("WORLD_SIZE='4x'");
    unsetenv("WORLD_SIZE");
    expect_error("WORLD_SIZE");
    set("WORLD_SIZE", "4");
    set("MASTER_PORT", "70000");
    expect_error("MASTER_PORT=70000");
    unsetenv("MASTER_PORT");
    expect_error("MASTER_PORT");
    set("MASTER_PORT", "1234");
    set("LOCAL_WORLD_SIZE", "2");
    set("LOCAL_RANK", "2");
    expect_error("LOCAL_RANK=2");
    set("LOCAL_RANK", "1");
    expect_error("MASTER_ADDR"); /* ranks span nodes: loopback cannot be right */
    unsetenv("LOCAL_WORLD_SIZE");
    unsetenv("LOCAL_RANK");
    dt_launch_env e;
    assert_int_equal(dt__launch_env_read(&e), DT_OK);
    assert_int_equal(e.local_rank, 1); /* defaults: every rank on this node */
    assert_int_equal(e.local_size, 4);
    assert_string_equal(e.master_addr, "127.0.0.1");
    assert_string_not_equal(e.token, ""); /* derived from MASTER_ADDR:MASTER_PORT */
}

static void test_ompi(void **state)
{
    set("OMPI_COMM_WORLD_RANK", "1");
    set("OMPI_COMM_WORLD_SIZE", "2");
    set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
    set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
    set("OMPI_MCA_ess_base_jobid", "1373241345");
    dt_launch_env a, b;
    assert_int_equal(dt__launch_env_read(&a), DT_OK);
    assert_string_equal(a.source, "ompi");
    assert_int_equal(a.rank, 1);
    assert_int_equal(a.size, 2);
    assert_string_equal(a.master_addr, "127.0.0.1");
    assert_true(a.master_port >= 10000 && a.master_port < 30000);
    assert_true(strncmp(a.token, "dtjob-", 6) == 0);
    /* rank 0 of the same job derives the same rendezvous */
    set("OMPI_COMM_WORLD_RANK", "0");
    set("OMPI_COMM_WORLD_LOCAL_RANK", "0");
    assert_int_equal(dt__launch_env_read(&b), DT_OK);
    assert_int_equal(b.master_port, a.master_port);
    assert_string_equal(b.token, a.token);
    /* another job: another token (and almost surely another port) */
    set("OMPI_MCA_ess_base_jobid", "1373241346");
    assert_int_equal(dt__launch_env_read(&b), DT_OK);
    assert_string_not_equal(b.token, a.token);
    /* exported values win over derived ones */
    set("MASTER_PORT", "4242");
    set("DT_JOB_TOKEN", "mine");
    assert_int_equal(dt__launch_env_read(&b), DT_OK);
    assert_int_equal(b.master_port, 4242);
    assert_string_equal(b.token, "mine");
    /* several nodes without MASTER_ADDR: say what to export */
    set("OMPI_COMM_WORLD_SIZE", "4");
    expect_error("MASTER_ADDR");
    set("OMPI_COMM_WORLD_RANK", "x1");
    expect_error("OMPI_COMM_WORLD_RANK='x1'");
}

static void test_pmi(void **state)
{
    set("PMI_RANK", "2");
    set("PMI_SIZE", "3");
    dt_launch_env e;
    assert_int_equal(dt__launch_env_read(&e), DT_OK);
    assert_string_equal(e.source, "pmi");
    assert_int_equal(e.rank, 2);
    assert_int_equal(e.local_size, 3);
    assert_true(e.master_port >= 10000 && e.master_port < 30000); /* from the parent pid */
    set("PMI_SIZE", "2");
    expect_error("PMI_RANK=2");
}

static void test_slurm(void **state)
{
    set("SLURM_PROCID", "7");
    set("SLURM_NTASKS", "8");
    set("SLURM_LOCALID", "0");
    set("SLURM_NODEID", "3");
    set("SLURM_TASKS_PER_NODE", "2(x3),1,1");
    set("SLURM_JOB_ID", "4711");
    set("SLURM_STEP_ID", "2");
    set("SLURM_STEP_NODELIST", "gpu[03-05,9],cpu1");
    dt_launch_env e;
    assert_int_equal(dt__launch_env_read(&e), DT_OK);
    assert_string_equal(e.source, "slurm");
    assert_int_equal(e.rank, 7);
    assert_int_equal(e.size, 8);
    assert_int_equal(e.local_rank, 0);
    assert_int_equal(e.local_size, 1); /* node 3 is the first after 2(x3) */
    assert_string_equal(e.master_addr, "gpu03");
    assert_true(e.master_port >= 10000 && e.master_port < 30000);
    int port = e.master_port;
    set("SLURM_STEP_ID", "3"); /* the next step of the job meets elsewhere */
    assert_int_equal(dt__launch_env_read(&e), DT_OK);
    assert_string_not_equal(e.token, "");
    set("SLURM_STEP_ID", "2");
    set("SLURM_STEP_NODELIST", "single-host");
    assert_int_equal(dt__launch_env_read(&e), DT_OK);
    assert_string_equal(e.master_addr, "single-host");
    assert_int_equal(e.master_port, port);
    set("SLURM_NODEID", "1");
    assert_int_equal(dt__launch_env_read(&e), DT_OK);
    assert_int_equal(e.local_size, 2);
    set("SLURM_TASKS_PER_NODE", "2(x");
    expect_error("SLURM_TASKS_PER_NODE='2(x'");
    set("SLURM_TASKS_PER_NODE", "2(x3),1,1");
    set("SLURM_LOCALID", "2");
    expect_error("SLURM_LOCALID");
    set("SLURM_LOCALID", "0");
    set("SLURM_STEP_NODELIST", "gpu[03-05");
    expect_error("SLURM_STEP_NODELIST");
    set("SLURM_NTASKS", "many");
    expect_error("SLURM_NTASKS='many'");
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, clear_env, clear_env)
    const struct CMUnitTest tests[] = {
        T(test_single), T(test_torchrun_vars), T(test_torchrun_errors),
        T(test_ompi),   T(test_pmi),           T(test_slurm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
