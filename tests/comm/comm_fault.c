/*
 * Faults: one rank SIGKILLs itself in the middle of a collective; every
 * other rank must get DT_ERR_PEER_LOST or DT_ERR_TIMEOUT within 10 s (with
 * DT_TIMEOUT_S=5) and still be able to destroy its runtime. Collectives of
 * 1 Mi elements travel through the same-host shared-memory windows (the
 * victim dies mid-stream); "-small" ones (16 elements) through the rings;
 * "-tiny" ones (2 elements, blocking: the tiny path of comm_tiny.c) with
 * the victim gone before its third call.
 *
 * The test starts its ranks itself (fork + exec of this program with the
 * launcher's variables) instead of going through dtrun, which would tear the
 * survivors down as soon as the victim dies.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "comm_test_util.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- a rank */

/* Runs collectives; the victim kills itself inside the third one. 0 = as expected. */
static int rank_main(int victim, const char *coll)
{
    dt_runtime *rt = NULL;
    if (dt_init(NULL, &rt) != DT_OK) {
        fprintf(stderr, "dt_init: %s\n", dt_last_error());
        return 10;
    }
    dt_comm *w = dt_runtime_world(rt);
    const int me = dt_comm_rank(w);
    const bool tiny = strstr(coll, "tiny") != NULL;
    const size_t n = tiny ? 2 : strstr(coll, "small") ? 16 : 1 << 20;
    float *buf = calloc(n, sizeof(float)),
          *out = calloc(n * (size_t)dt_comm_size(w), sizeof(float));
    dt_status st = DT_OK;
    double t_fail = 0;
    for (int it = 0; it < 1000 && st == DT_OK; it++) {
        if (tiny) { /* blocking: the victim is gone before the call */
            if (it == 2 && me == victim)
                raise(strstr(coll, "stop") ? SIGSTOP : SIGKILL);
            double t0 = now_s();
            if (strstr(coll, "allgather"))
                st = dt_comm_allgather(w, buf, out, n, DT_DTYPE_F32, NULL);
            else
                st = dt_comm_allreduce(w, buf, buf, n, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL);
            t_fail = now_s() - t0;
            continue;
        }
        dt_work *work = NULL;
        if (strcmp(coll, "allgather") == 0)
            st = dt_comm_allgather(w, buf, out, n, DT_DTYPE_F32, &work);
        else
            st = dt_comm_allreduce(w, buf, buf, n, DT_DTYPE_F32, DT_REDUCE_OP_SUM, &work);
        if (st != DT_OK)
            break;
        if (it == 2 && me == victim) {
            bool done = false;
            dt_work_test(work, &done); /* some of it is on the wire */
            raise(strstr(coll, "stop") ? SIGSTOP : SIGKILL);
        }
        double t0 = now_s();
        st = dt_work_wait(work, -1);
        t_fail = now_s() - t0;
        dt_work_release(work);
    }
    int rc = 0;
    if (st != DT_ERR_PEER_LOST && st != DT_ERR_TIMEOUT) {
        fprintf(stderr, "rank %d: expected PEER_LOST or TIMEOUT, got %s\n", me, dt_status_str(st));
        rc = 1;
    } else if (strstr(coll, "stop") &&
               (st != DT_ERR_TIMEOUT ||
                strstr(dt_last_error(), "waiting for world rank") == NULL)) {
        fprintf(stderr,
                "rank %d: a hung (stopped) peer must give a timeout naming the rank "
                "waited for; got %s: %s\n",
                me, dt_status_str(st), dt_last_error());
        rc = 4;
    } else if (t_fail > 10.0) {
        fprintf(stderr, "rank %d: the failure took %.1f s to report\n", me, t_fail);
        rc = 2;
    } else {
        printf("rank %d: %s after %.2f s: %s\n", me, dt_status_str(st), t_fail, dt_last_error());
    }
    double t0 = now_s();
    dt_runtime_destroy(rt);
    if (now_s() - t0 > 10.0) {
        fprintf(stderr, "rank %d: dt_runtime_destroy took %.1f s\n", me, now_s() - t0);
        rc = 3;
    }
    free(buf);
    free(out);
    return rc;
}

/* ---------------------------------------------------------------- the job */

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    close(fd);
    return ntohs(a.sin_port);
}

static const char *self_exe;

/* Start @p n ranks; the victim must die by SIGKILL, the others exit 0. */
static void run_job(int n, int victim, const char *coll)
{
    int port = free_port();
    assert_true(port > 0);
    pid_t pids[16];
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0) {
            char v[32];
            snprintf(v, sizeof(v), "%d", r);
            setenv("RANK", v, 1);
            setenv("LOCAL_RANK", v, 1);
            snprintf(v, sizeof(v), "%d", n);
            setenv("WORLD_SIZE", v, 1);
            setenv("LOCAL_WORLD_SIZE", v, 1);
            snprintf(v, sizeof(v), "%d", port);
            setenv("MASTER_PORT", v, 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            setenv("DT_JOB_TOKEN", "comm-fault-test", 1);
            setenv("DT_TIMEOUT_S", strstr(coll, "stop") ? "2" : "5", 1);
            snprintf(v, sizeof(v), "%d", victim);
            execl(self_exe, self_exe, "rank", v, coll, (char *)NULL);
            _exit(127);
        }
    }
    double deadline = now_s() + 40;
    int left = n, bad = 0;
    while (left > 0 && now_s() < deadline) {
        if (left == 1 && pids[victim] > 0 && strstr(coll, "stop"))
            kill(pids[victim], SIGKILL); /* the survivors are done with the hung rank */
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0) {
            usleep(20000);
            continue;
        }
        int r = 0;
        while (r < n && pids[r] != pid)
            r++;
        left--;
        pids[r] = 0;
        if (r == victim) {
            if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
                fprintf(stderr, "victim rank %d did not die by SIGKILL (status 0x%x)\n", r, status);
                bad++;
            }
        } else if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
            fprintf(stderr, "rank %d ended with status 0x%x\n", r, status);
            bad++;
        }
    }
    for (int r = 0; r < n; r++) {
        if (pids[r] > 0) {
            fprintf(stderr, "rank %d still running after 40 s: killing it\n", r);
            kill(pids[r], SIGKILL);
            waitpid(pids[r], NULL, 0);
            bad++;
        }
    }
    if (bad != 0)
        fail_msg("%d rank(s) misbehaved (%d ranks, victim %d, %s)", bad, n, victim, coll);
}

static void test_kill_last_rank_allreduce_2(void **state)
{
    (void)state;
    run_job(2, 1, "allreduce");
}

static void test_kill_rank0_allreduce_4(void **state)
{
    (void)state;
    run_job(4, 0, "allreduce");
}

/* A rank that hangs (alive, stopped) gives DT_ERR_TIMEOUT naming the rank. */
static void test_stopped_rank_times_out_3(void **state)
{
    (void)state;
    run_job(3, 2, "allreduce-stop");
}

static void test_kill_middle_allgather_3(void **state)
{
    (void)state;
    run_job(3, 1, "allgather");
}

static void test_kill_middle_small_allreduce_3(void **state)
{
    (void)state;
    run_job(3, 1, "allreduce-small");
}

static void test_stopped_rank_small_times_out_2(void **state)
{
    (void)state;
    run_job(2, 0, "allreduce-small-stop");
}

static void test_kill_middle_tiny_allgather_3(void **state)
{
    (void)state;
    run_job(3, 1, "allgather-tiny");
}

static void test_kill_rank0_tiny_allreduce_4(void **state)
{
    (void)state;
    run_job(4, 0, "allreduce-tiny");
}

static void test_stopped_rank_tiny_times_out_2(void **state)
{
    (void)state;
    run_job(2, 1, "allreduce-tiny-stop");
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "rank") == 0)
        return rank_main(atoi(argv[2]), argv[3]);
    self_exe = argv[0];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill_last_rank_allreduce_2),
        cmocka_unit_test(test_kill_rank0_allreduce_4),
        cmocka_unit_test(test_kill_middle_allgather_3),
        cmocka_unit_test(test_stopped_rank_times_out_3),
        cmocka_unit_test(test_kill_middle_small_allreduce_3),
        cmocka_unit_test(test_stopped_rank_small_times_out_2),
        cmocka_unit_test(test_kill_middle_tiny_allgather_3),
        cmocka_unit_test(test_kill_rank0_tiny_allreduce_4),
        cmocka_unit_test(test_stopped_rank_tiny_times_out_2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
