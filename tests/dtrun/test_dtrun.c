/*
 * dtrun_*: the launcher, driven as a user would: environment per rank,
 * --tag-output, failure reporting and teardown, signal forwarding, multi-node.
 * Arguments: DTRUN DTRUN_PROBE STORE_RANKS
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

static const char *dtrun, *probe, *store_ranks;

typedef struct run {
    pid_t pid;
    int out_fd, err_fd;
    char out_path[64], err_path[64];
    char *out, *err; /* captured, once finished */
    int status;
    double elapsed;
    double t0;
} run;

/* Start dtrun with @p args (NULL-terminated), stdout/stderr to temp files. */
static void run_start(run *r, const char *const *args, const char *const *env)
{
    memset(r, 0, sizeof(*r));
    snprintf(r->out_path, sizeof(r->out_path), "/tmp/dtrun_test_out_XXXXXX");
    snprintf(r->err_path, sizeof(r->err_path), "/tmp/dtrun_test_err_XXXXXX");
    r->out_fd = mkstemp(r->out_path);
    r->err_fd = mkstemp(r->err_path);
    assert_true(r->out_fd >= 0 && r->err_fd >= 0);
    const char *argv[32];
    int n = 0;
    argv[n++] = dtrun;
    for (int i = 0; args[i] != NULL && n < 31; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    r->t0 = dt__clock_now();
    r->pid = fork();
    assert_true(r->pid >= 0);
    if (r->pid == 0) {
        for (int i = 0; env != NULL && env[i] != NULL; i += 2)
            setenv(env[i], env[i + 1], 1);
        dup2(r->out_fd, 1);
        dup2(r->err_fd, 2);
        execv(dtrun, (char *const *)argv);
        _exit(127);
    }
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Wait for dtrun (killing it after @p max_s) and collect its output. */
static void run_finish(run *r, double max_s)
{
    for (;;) {
        pid_t p = waitpid(r->pid, &r->status, WNOHANG);
        if (p == r->pid)
            break;
        if (dt__clock_now() - r->t0 > max_s) {
            kill(r->pid, SIGKILL);
            waitpid(r->pid, &r->status, 0);
            break;
        }
        usleep(10000);
    }
    r->elapsed = dt__clock_now() - r->t0;
    r->out = slurp(r->out_path);
    r->err = slurp(r->err_path);
    close(r->out_fd);
    close(r->err_fd);
    unlink(r->out_path);
    unlink(r->err_path);
}

static void run_free(run *r)
{
    free(r->out);
    free(r->err);
}

static int exit_code(const run *r)
{
    return WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1;
}

/* Every "pid R P" line the probes printed: those processes must be gone. */
static void assert_pids_gone(const char *out)
{
    const char *p = out;
    int seen = 0;
    while ((p = strstr(p, "pid ")) != NULL) {
        int rk, pid;
        if (sscanf(p, "pid %d %d", &rk, &pid) == 2) {
            seen++;
            if (kill(pid, 0) == 0 || errno != ESRCH) {
                kill(pid, SIGKILL);
                fail_msg("rank %d (pid %d) outlived dtrun", rk, pid);
            }
        }
        p += 4;
    }
    assert_true(seen > 0);
}

static void test_env_per_rank(void **state)
{
    run a, b;
    const char *args[] = {"-n", "3", "--tag-output", probe, "env", NULL};
    run_start(&a, args, NULL);
    run_finish(&a, 20);
    run_start(&b, args, NULL);
    run_finish(&b, 20);
    assert_int_equal(exit_code(&a), 0);
    char port0[16] = "", tok0[80] = "";
    for (int rk = 0; rk < 3; rk++) {
        char tag[8];
        snprintf(tag, sizeof(tag), "[%d] ", rk);
        const char *line = strstr(a.out, tag);
        assert_non_null(line);
        int r, ws, lr, lws;
        char addr[64], port[16], tok[80];
        assert_int_equal(sscanf(line + strlen(tag),
                                "RANK=%d WORLD_SIZE=%d LOCAL_RANK=%d LOCAL_WORLD_SIZE=%d "
                                "MASTER_ADDR=%63s MASTER_PORT=%15s DT_JOB_TOKEN=%79s",
                                &r, &ws, &lr, &lws, addr, port, tok),
                         7);
        assert_int_equal(r, rk);
        assert_int_equal(ws, 3);
        assert_int_equal(lr, rk);
        assert_int_equal(lws, 3);
        assert_string_equal(addr, "127.0.0.1");
        assert_true(atoi(port) > 0 && atoi(port) < 65536);
        assert_int_equal(strlen(tok), 64); /* 32 random bytes in hex */
        if (rk == 0) {
            snprintf(port0, sizeof(port0), "%s", port);
            snprintf(tok0, sizeof(tok0), "%s", tok);
        }
        assert_string_equal(port, port0); /* one rendezvous per job */
        assert_string_equal(tok, tok0);
    }
    assert_null(strstr(b.out, tok0)); /* a new token per job */
    run_free(&a);
    run_free(&b);
}

static void test_tag_output_lines_whole(void **state)
{
    run a;
    const char *args[] = {"-n", "4", "--tag-output", probe, "lines", "300", NULL};
    run_start(&a, args, NULL);
    run_finish(&a, 30);
    assert_int_equal(exit_code(&a), 0);
    int count[4] = {0}, tails = 0;
    char *save = NULL;
    for (char *line = strtok_r(a.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        int tag, rk, i, end = 0;
        assert_int_equal(sscanf(line, "[%d] ", &tag), 1);
        assert_true(tag >= 0 && tag < 4);
        if (strstr(line, "no newline at the end") != NULL) { /* flushed at exit, tagged */
            tails++;
            continue;
        }
        if (sscanf(line, "[%*d] rank=%d line=%d %*s end%n", &rk, &i, &end) != 2 || end == 0)
            fail_msg("mangled line: '%s'", line);
        assert_int_equal(rk, tag);
        char want = (char)('a' + rk);
        const char *pad = strchr(strchr(line, '=') + 1, ' ') + 1;
        pad = strchr(pad, ' ') + 1;
        for (int k = 0; k < 200; k++)
            assert_int_equal(pad[k], want);
        assert_int_equal(i, count[rk]); /* in order, none lost */
        count[rk]++;
    }
    for (int rk = 0; rk < 4; rk++)
        assert_int_equal(count[rk], 300);
    assert_int_equal(tails, 4);
    run_free(&a);
}

static void test_rank_exit_code(void **state)
{
    run a;
    const char *args[] = {"-n", "3", "--tag-output", probe, "exit", "3", "1", NULL};
    run_start(&a, args, NULL);
    run_finish(&a, 20);
    assert_int_not_equal(exit_code(&a), 0);
    assert_non_null(strstr(a.err, "dtrun: rank 1 exited with status 3"));
    assert_true(a.elapsed < 5.0);
    assert_pids_gone(a.out);
    run_free(&a);
}

/* A rank SIGKILLs itself; the others sleep forever and ignore SIGTERM. */
static void test_rank_killed_tears_down(void **state)
{
    run a;
    const char *args[] = {"-n", "3", "--tag-output", probe, "selfkill", "2", "ignore-term", NULL};
    run_start(&a, args, NULL);
    run_finish(&a, 20);
    assert_int_not_equal(exit_code(&a), 0);
    assert_non_null(strstr(a.err, "dtrun: rank 2 killed by signal SIGKILL"));
    assert_true(a.elapsed < 5.0 + 0.5); /* 0.5 s of it is the probe's own delay */
    assert_pids_gone(a.out);
    run_free(&a);
}

static void test_sigint_forwarded(void **state)
{
    run a;
    const char *args[] = {"-n", "2", "--tag-output", probe, "trapint", NULL};
    run_start(&a, args, NULL);
    /* wait until both ranks installed their handler */
    for (int i = 0; i < 500; i++) {
        char *o = slurp(a.out_path);
        bool ready = strstr(o, "[0] ready") && strstr(o, "[1] ready");
        free(o);
        if (ready)
            break;
        usleep(10000);
    }
    kill(a.pid, SIGINT);
    run_finish(&a, 20);
    assert_non_null(strstr(a.out, "[0] got SIGINT"));
    assert_non_null(strstr(a.out, "[1] got SIGINT"));
    assert_int_equal(exit_code(&a), 130);
    run_free(&a);
}

/* Alive and not a zombie (an orphan's zombie may wait for a lazy init to reap it). */
static bool proc_alive(int pid)
{
    if (kill(pid, 0) != 0)
        return false;
    char path[64], buf[256] = "";
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp == NULL || rp[2] != 'Z';
}

/* dtrun dies by SIGKILL (say, a harness timeout): its ranks must not live on. */
static void test_dtrun_killed_ranks_follow(void **state)
{
    run a;
    const char *args[] = {"-n", "3", probe, "exit", "0", "99", NULL}; /* all sleep forever */
    run_start(&a, args, NULL);
    int pids[3] = {0}, seen = 0;
    for (int i = 0; i < 500 && seen < 3; i++) {
        usleep(10000);
        char *o = slurp(a.out_path);
        seen = 0;
        for (const char *p = o; (p = strstr(p, "pid ")) != NULL; p += 4) {
            int rk, pid;
            if (sscanf(p, "pid %d %d", &rk, &pid) == 2 && rk >= 0 && rk < 3 && seen < 3)
                pids[seen++] = pid;
        }
        free(o);
    }
    assert_int_equal(seen, 3);
    kill(a.pid, SIGKILL);
    run_finish(&a, 10);
    int alive = 3;
    for (int i = 0; i < 200 && alive > 0; i++) {
        usleep(10000);
        alive = 0;
        for (int k = 0; k < 3; k++)
            alive += proc_alive(pids[k]);
    }
    for (int k = 0; k < 3; k++)
        if (proc_alive(pids[k]))
            kill(pids[k], SIGKILL);
    assert_int_equal(alive, 0);
    run_free(&a);
}

/* Whether @p pid is a zombie (ended, not reaped yet). */
static bool proc_zombie(int pid)
{
    char path[64], buf[256] = "";
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp != NULL && rp[2] == 'Z';
}

/*
 * Rank 2 is SIGKILLed, then rank 0 exits 1 (as its reaction would), both
 * while dtrun is stopped (a busy machine): dtrun reaps them together, rank 0
 * first (the kernel's order), and must still name rank 2.
 */
static void test_killed_rank_named_before_reactions(void **state)
{
    run a;
    const char *args[] = {"-n", "3", probe, "exit", "0", "99", NULL}; /* all sleep forever */
    run_start(&a, args, NULL);
    int pids[3] = {0}, seen = 0;
    for (int i = 0; i < 500 && seen < 3; i++) {
        usleep(10000);
        char *o = slurp(a.out_path);
        seen = 0;
        for (const char *p = o; (p = strstr(p, "pid ")) != NULL; p += 4) {
            int rk, pid;
            if (sscanf(p, "pid %d %d", &rk, &pid) == 2 && rk >= 0 && rk < 3) {
                pids[rk] = pid;
                seen++;
            }
        }
        free(o);
    }
    assert_int_equal(seen, 3);
    kill(a.pid, SIGSTOP);
    kill(pids[2], SIGKILL);
    for (int i = 0; i < 500 && !proc_zombie(pids[2]); i++)
        usleep(10000);
    kill(pids[0], SIGUSR1);
    for (int i = 0; i < 500 && !proc_zombie(pids[0]); i++)
        usleep(10000);
    bool both = proc_zombie(pids[2]) && proc_zombie(pids[0]);
    kill(a.pid, SIGCONT);
    run_finish(&a, 20);
    assert_true(both);
    assert_int_equal(exit_code(&a), 128 + SIGKILL);
    assert_non_null(strstr(a.err, "dtrun: rank 2 killed by signal SIGKILL"));
    assert_null(strstr(a.err, "dtrun: rank 0 exited"));
    assert_pids_gone(a.out);
    run_free(&a);
}

static void test_bad_arguments(void **state)
{
    const char *cases[][8] = {
        {"-n", "0", probe, NULL},
        {"-n", "2", NULL},
        {"-n", "x", probe, NULL},
        {"--bogus", "-n", "2", probe, NULL},
        {"-n", "2", "--nnodes", "2", probe, NULL},                     /* no --master */
        {"-n", "2", "--nnodes", "2", "--node-rank", "2", probe, NULL}, /* out of range */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        run a;
        run_start(&a, cases[i], NULL);
        run_finish(&a, 10);
        assert_int_equal(exit_code(&a), 2);
        assert_non_null(strstr(a.err, "dtrun: "));
        run_free(&a);
    }
    run a;
    const char *missing[] = {"-n", "1", "/nonexistent/program", NULL};
    run_start(&a, missing, NULL);
    run_finish(&a, 10);
    assert_int_equal(exit_code(&a), 127);
    assert_non_null(strstr(a.err, "/nonexistent/program"));
    run_free(&a);
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof(sa);
    bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    close(fd);
    return ntohs(sa.sin_port);
}

/* Two "nodes" (two dtruns) of 2 ranks form one job of 4 that meets in the store. */
static void test_multinode(void **state)
{
    char master[32];
    snprintf(master, sizeof(master), "127.0.0.1:%d", free_port());
    const char *env[] = {"DT_JOB_TOKEN", "shared-secret", NULL};
    run a, b;
    const char *a0[] = {"-n",       "2",    "--nnodes",     "2",   "--node-rank", "0",
                        "--master", master, "--tag-output", probe, "env",         NULL};
    const char *a1[] = {"-n",       "2",    "--nnodes",     "2",   "--node-rank", "1",
                        "--master", master, "--tag-output", probe, "env",         NULL};
    run_start(&a, a0, env);
    run_start(&b, a1, env);
    run_finish(&a, 20);
    run_finish(&b, 20);
    assert_int_equal(exit_code(&a), 0);
    assert_int_equal(exit_code(&b), 0);
    assert_non_null(strstr(b.out, "[3] RANK=3 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 "
                                  "MASTER_ADDR=127.0.0.1"));
    assert_non_null(strstr(b.out, "[2] RANK=2 WORLD_SIZE=4 LOCAL_RANK=0"));
    assert_non_null(strstr(a.out, "[1] RANK=1 WORLD_SIZE=4 LOCAL_RANK=1"));
    assert_non_null(strstr(a.out, "DT_JOB_TOKEN=shared-secret DT_STORE_BIND=127.0.0.1"));
    run_free(&a);
    run_free(&b);

    /* and a real program meets across both through the store */
    snprintf(master, sizeof(master), "127.0.0.1:%d", free_port());
    const char *s0[] = {"-n",       "2",    "--nnodes",  "2",   "--node-rank", "0",
                        "--master", master, store_ranks, "env", NULL};
    const char *s1[] = {"-n",       "2",    "--nnodes",  "2",   "--node-rank", "1",
                        "--master", master, store_ranks, "env", NULL};
    run_start(&a, s0, env);
    run_start(&b, s1, env);
    run_finish(&a, 40);
    run_finish(&b, 40);
    if (exit_code(&a) != 0 || exit_code(&b) != 0)
        fail_msg("store_ranks over 2 nodes failed:\n%s%s\n%s%s", a.out, a.err, b.out, b.err);
    run_free(&a);
    run_free(&b);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s DTRUN DTRUN_PROBE STORE_RANKS\n", argv[0]);
        return 2;
    }
    dtrun = argv[1];
    probe = argv[2];
    store_ranks = argv[3];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_per_rank),
        cmocka_unit_test(test_tag_output_lines_whole),
        cmocka_unit_test(test_rank_exit_code),
        cmocka_unit_test(test_rank_killed_tears_down),
        cmocka_unit_test(test_sigint_forwarded),
        cmocka_unit_test(test_dtrun_killed_ranks_follow),
        cmocka_unit_test(test_killed_rank_named_before_reactions),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_multinode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
