/*
 * dtrun -n N [--nnodes M --node-rank R --master HOST:PORT] [--tag-output]
 *       [--grace SECONDS] [--stop-timeout SECONDS] PROGRAM ARGS...
 *
 * Starts N local ranks of PROGRAM. Each gets RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and DT_JOB_TOKEN (the torchrun
 * convention plus the store's secret). Each rank runs in its own process group,
 * so signals reach whatever the rank started too.
 *
 * Supervision: SIGINT/SIGTERM/SIGHUP/SIGQUIT to dtrun are forwarded to every
 * rank (a second one sends SIGKILL). When a rank exits non-zero or dies by a
 * signal, dtrun says which and how, sends SIGTERM to the others (after an
 * error exit, up to 1 s later: the library tells the other ranks of the failure
 * itself, and this lets them end with their own messages), SIGKILL after
 * the grace period (default 2 s), and exits
 * non-zero: the failing rank's exit status, or 128 + its signal number.
 * A rank stopped (SIGSTOP) for --stop-timeout seconds fails the job the same
 * way (exit 1). Exit 0 only when every rank exited 0. Whatever a rank leaves running in its
 * process group is killed when the rank exits, and every rank is killed if
 * dtrun itself dies (PR_SET_PDEATHSIG), so no job outlives its launcher.
 *
 * Multi-node: one dtrun per node with the same --nnodes/--master and the same
 * exported DT_JOB_TOKEN; node 0's store binds the --master host (DT_STORE_BIND,
 * unless set). Each dtrun supervises only its own node's ranks: a failure on
 * another node reaches this one through the ranks' own errors (DT_ERR_PEER_LOST).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dtrun.h"

/* A port nobody listens on now: bind port 0 on every address and ask which. */
static int pick_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t sl = sizeof(sa);
    int port = -1;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

/* 32 random bytes from /dev/urandom as 64 hex characters. */
static bool make_token(char *out, size_t cap)
{
    unsigned char raw[32];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    size_t got = 0;
    while (got < sizeof(raw)) {
        ssize_t n = read(fd, raw + got, sizeof(raw) - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (got != sizeof(raw) || cap < 2 * sizeof(raw) + 1)
        return false;
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    return true;
}

static void setenv_int(const char *name, int v)
{
    char b[32];
    snprintf(b, sizeof(b), "%d", v);
    setenv(name, b, 1);
}

/* In the child: environment, own process group, pipes, exec. Never returns. */
/*
 * With more local ranks than CPUs, rank l runs on the (l mod n)-th CPU dtrun
 * may use: measured on 2 cores with 4 ranks, unpinned ranks spend their first
 * ~100 ms migrating (8 B all-reduce 5.5 us, then 3.1 us), pinned ones run at
 * 3.1 us from the start. With enough CPUs the scheduler is left alone.
 */
static void bind_rank(const dtrun_opts *o, int local)
{
    cpu_set_t allowed;
    if (!o->bind || sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
        return;
    int n = CPU_COUNT(&allowed);
    if (n == 0 || o->nproc <= n)
        return;
    int want = local % n;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed) || want-- > 0)
            continue;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        sched_setaffinity(0, sizeof(one), &one); /* best effort: unpinned still works */
        return;
    }
}

static void exec_rank(const dtrun_opts *o, int local, const char *token, const char *bind,
                      int out_w, int err_w, pid_t dtrun_pid)
{
    setpgid(0, 0);
    /* If dtrun itself is killed (SIGKILL, a test harness timeout), the ranks go too. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != dtrun_pid)
        _exit(128 + SIGKILL); /* dtrun died before the line above took effect */
    setenv_int("RANK", o->node_rank * o->nproc + local);
    setenv_int("WORLD_SIZE", o->nnodes * o->nproc);
    setenv_int("LOCAL_RANK", local);
    setenv_int("LOCAL_WORLD_SIZE", o->nproc);
    setenv_int("NODE_RANK", o->node_rank);
    setenv("MASTER_ADDR", o->master_addr, 1);
    setenv_int("MASTER_PORT", o->master_port);
    setenv("DT_JOB_TOKEN", token, 1);
    if (bind != NULL)
        setenv("DT_STORE_BIND", bind, 1);
    /* Ranks in their own group must not read the terminal (SIGTTIN would stop them). */
    if (local != 0 || isatty(0)) {
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) {
            dup2(nul, 0);
            close(nul);
        }
    }
    if (out_w >= 0)
        dup2(out_w, 1);
    if (err_w >= 0)
        dup2(err_w, 2);
    signal(SIGPIPE, SIG_DFL);
    bind_rank(o, local);
    execvp(o->argv[0], o->argv);
    fprintf(stderr, "dtrun: cannot start '%s': %s\n", o->argv[0], strerror(errno));
    _exit(127);
}

static int make_pipe(int p[2])
{
    return pipe2(p, O_CLOEXEC);
}

/* Start every local rank; on failure kill those already started. */
static bool spawn_all(const dtrun_opts *o, dtrun_rank *ranks, const char *token, const char *bind)
{
    for (int l = 0; l < o->nproc; l++) {
        int po[2] = {-1, -1}, pe[2] = {-1, -1};
        int grank = o->node_rank * o->nproc + l;
        if (o->tag_output && (make_pipe(po) != 0 || make_pipe(pe) != 0)) {
            fprintf(stderr, "dtrun: pipe: %s\n", strerror(errno));
            return false;
        }
        pid_t self = getpid();
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "dtrun: fork: %s\n", strerror(errno));
            return false;
        }
        if (pid == 0)
            exec_rank(o, l, token, bind, po[1], pe[1], self);
        setpgid(pid, pid); /* also here: no race with the signals we may send at once */
        ranks[l].pid = pid;
        ranks[l].out = (dtrun_stream){.fd = po[0], .out_fd = 1, .rank = grank};
        ranks[l].err = (dtrun_stream){.fd = pe[0], .out_fd = 2, .rank = grank};
        if (o->tag_output) {
            close(po[1]);
            close(pe[1]);
            fcntl(po[0], F_SETFL, O_NONBLOCK);
            fcntl(pe[0], F_SETFL, O_NONBLOCK);
        }
    }
    return true;
}

int main(int argc, char **argv)
{
    dtrun_opts o;
    int rc = dtrun_parse_args(argc, argv, &o);
    if (rc != 0)
        return rc;
    char token[128];
    const char *bind = NULL;
    if (o.nnodes > 1) {
        /* Every node must agree on the token, so it cannot be made up here. */
        const char *t = getenv("DT_JOB_TOKEN");
        if (t == NULL || t[0] == '\0' || strlen(t) >= sizeof(token)) {
            fprintf(stderr,
                    "dtrun: --nnodes %d: export the same DT_JOB_TOKEN (1..127 chars) "
                    "on every node\n",
                    o.nnodes);
            return 2;
        }
        snprintf(token, sizeof(token), "%s", t);
        /* The store on node 0 must be reachable from the other nodes. */
        if (getenv("DT_STORE_BIND") == NULL)
            bind = o.master_addr;
    } else if (!make_token(token, sizeof(token))) {
        fprintf(stderr, "dtrun: cannot read /dev/urandom for the job token\n");
        return 1;
    }
    if (o.master_port == 0) {
        snprintf(o.master_addr, sizeof(o.master_addr), "127.0.0.1");
        o.master_port = pick_free_port();
        if (o.master_port <= 0) {
            fprintf(stderr, "dtrun: cannot find a free TCP port: %s\n", strerror(errno));
            return 1;
        }
    }
    dtrun_rank *ranks = calloc((size_t)o.nproc, sizeof(*ranks));
    if (ranks == NULL || !dtrun_install_handlers()) {
        fprintf(stderr, "dtrun: setup failed: %s\n", strerror(errno));
        return 1;
    }
    for (int l = 0; l < o.nproc; l++)
        ranks[l].out.fd = ranks[l].err.fd = -1;
    dtrun_state st = {0};
    bool ok = spawn_all(&o, ranks, token, bind);
    for (int l = 0; l < o.nproc; l++)
        st.live += ranks[l].pid > 0;
    if (!ok) {
        st.fail_code = 1;
        dtrun_start_teardown(&st, ranks, o.nproc, SIGKILL, 0);
    }
    dtrun_supervise(&o, ranks, &st);
    free(ranks);
    if (st.fail_code != 0)
        return st.fail_code;
    if (st.got_signal != 0)
        return 128 + st.got_signal;
    return 0;
}
