/*
 * dtrun -n N [--nnodes M --node-rank R --master HOST:PORT] [--tag-output]
 *       [--grace SECONDS] PROGRAM ARGS...
 *
 * Starts N local ranks of PROGRAM. Each gets RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and DT_JOB_TOKEN (the torchrun
 * convention plus the store's secret). Each rank runs in its own process group,
 * so signals reach whatever the rank started too.
 *
 * Supervision: SIGINT/SIGTERM to dtrun are forwarded to every rank. When a rank
 * exits non-zero or dies by a signal, dtrun says which and how, sends SIGTERM
 * to the others, SIGKILL after the grace period (default 2 s), and exits
 * non-zero: the failing rank's exit status, or 128 + its signal number.
 * Exit 0 only when every rank exited 0. Whatever a rank leaves running in its
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

#define DTRUN_MAX_RANKS 4096

typedef struct dtrun_opts {
    int nproc, nnodes, node_rank;
    char master_addr[256];
    int master_port; /* 0: pick a free one (single node only) */
    bool tag_output;
    double grace_s;
    char **argv; /* PROGRAM ARGS..., NULL-terminated */
} dtrun_opts;

typedef struct dtrun_rank {
    pid_t pid;     /* 0 once reaped */
    int status;    /* waitpid status, valid once reaped */
    dtrun_stream out, err;
} dtrun_rank;

static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    (void)!write(sig_pipe[1], &b, 1);
    errno = saved;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dtrun -n N [--nnodes M --node-rank R --master HOST:PORT] [--tag-output]\n"
            "             [--grace SECONDS] PROGRAM [ARGS...]\n"
            "  -n, --nproc-per-node N  ranks on this node\n"
            "  --nnodes M              nodes in the job (default 1); rank = node_rank * N + local\n"
            "  --node-rank R           this node's index, 0..M-1 (default 0)\n"
            "  --master HOST:PORT      rank 0's store address (required when M > 1; node 0 binds it);\n"
            "                          default 127.0.0.1 and a free port\n"
            "  --tag-output            prefix every output line with \"[rank] \"\n"
            "  --grace SECONDS         SIGTERM-to-SIGKILL delay when tearing down (default 2)\n"
            "Multi-node jobs need the same DT_JOB_TOKEN exported on every node.\n");
}

static bool parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

/* Returns 0 on success, else the exit code for a usage error. */
static int parse_args(int argc, char **argv, dtrun_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->nnodes = 1;
    o->grace_s = 2.0;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-')
            break;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(a, "--tag-output") == 0) {
            o->tag_output = true;
            continue;
        }
        if (v == NULL) {
            fprintf(stderr, "dtrun: option %s needs a value\n", a);
            return 2;
        }
        i++;
        if (strcmp(a, "-n") == 0 || strcmp(a, "--nproc-per-node") == 0) {
            if (!parse_int(v, 1, DTRUN_MAX_RANKS, &o->nproc)) {
                fprintf(stderr, "dtrun: -n must be 1..%d, got '%s'\n", DTRUN_MAX_RANKS, v);
                return 2;
            }
        } else if (strcmp(a, "--nnodes") == 0) {
            if (!parse_int(v, 1, DTRUN_MAX_RANKS, &o->nnodes)) {
                fprintf(stderr, "dtrun: --nnodes must be 1..%d, got '%s'\n", DTRUN_MAX_RANKS, v);
                return 2;
            }
        } else if (strcmp(a, "--node-rank") == 0) {
            if (!parse_int(v, 0, DTRUN_MAX_RANKS - 1, &o->node_rank)) {
                fprintf(stderr, "dtrun: --node-rank must be >= 0, got '%s'\n", v);
                return 2;
            }
        } else if (strcmp(a, "--master") == 0) {
            const char *colon = strrchr(v, ':');
            size_t hl = colon ? (size_t)(colon - v) : 0;
            if (colon == NULL || hl == 0 || hl >= sizeof(o->master_addr) ||
                !parse_int(colon + 1, 1, 65535, &o->master_port)) {
                fprintf(stderr, "dtrun: --master must be HOST:PORT (port 1..65535), got '%s'\n", v);
                return 2;
            }
            memcpy(o->master_addr, v, hl);
            o->master_addr[hl] = '\0';
        } else if (strcmp(a, "--grace") == 0) {
            char *end;
            o->grace_s = strtod(v, &end);
            if (end == v || *end != '\0' || !(o->grace_s >= 0 && o->grace_s <= 3600)) {
                fprintf(stderr, "dtrun: --grace must be 0..3600 seconds, got '%s'\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "dtrun: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (i >= argc || o->nproc == 0) {
        fprintf(stderr, "dtrun: %s\n", o->nproc == 0 ? "-n N is required" : "no PROGRAM given");
        usage(stderr);
        return 2;
    }
    if (o->node_rank >= o->nnodes) {
        fprintf(stderr, "dtrun: --node-rank %d is out of range for --nnodes %d\n", o->node_rank,
                o->nnodes);
        return 2;
    }
    if ((long)o->nnodes * o->nproc > DTRUN_MAX_RANKS) {
        fprintf(stderr, "dtrun: %d nodes x %d ranks is more than %d ranks\n", o->nnodes, o->nproc,
                DTRUN_MAX_RANKS);
        return 2;
    }
    if (o->nnodes > 1 && o->master_port == 0) {
        fprintf(stderr, "dtrun: --nnodes %d needs --master HOST:PORT\n", o->nnodes);
        return 2;
    }
    o->argv = argv + i;
    return 0;
}

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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void setenv_int(const char *name, int v)
{
    char b[32];
    snprintf(b, sizeof(b), "%d", v);
    setenv(name, b, 1);
}

/* In the child: environment, own process group, pipes, exec. Never returns. */
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

static void signal_all(dtrun_rank *ranks, int n, int sig)
{
    for (int l = 0; l < n; l++)
        if (ranks[l].pid > 0)
            kill(-ranks[l].pid, sig);
}

static const char *sig_name(int sig, char *buf, size_t cap)
{
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev != NULL)
        snprintf(buf, cap, "SIG%s", abbrev);
    else
        snprintf(buf, cap, "%d", sig);
    return buf;
}

typedef struct dtrun_state {
    int live;            /* ranks not yet reaped */
    int fail_code;       /* dtrun's exit code once something failed; 0 = nothing yet */
    bool tearing_down;
    double kill_at;      /* when to SIGKILL the survivors; 0 = not scheduled */
    int got_signal;      /* SIGINT/SIGTERM received by dtrun */
} dtrun_state;

static void start_teardown(dtrun_state *st, dtrun_rank *ranks, int n, int sig, double grace)
{
    if (st->tearing_down)
        return;
    st->tearing_down = true;
    signal_all(ranks, n, sig);
    st->kill_at = now_s() + grace;
}

/* Reap finished ranks; report the first failures and start tearing down. */
static void reap(const dtrun_opts *o, dtrun_rank *ranks, dtrun_state *st)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            return;
        for (int l = 0; l < o->nproc; l++) {
            if (ranks[l].pid != pid)
                continue;
            int grank = o->node_rank * o->nproc + l;
            ranks[l].pid = 0;
            ranks[l].status = status;
            st->live--;
            kill(-pid, SIGKILL); /* whatever the rank left behind in its group */
            bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
            if (!failed || st->tearing_down)
                break;
            char sb[32];
            if (WIFSIGNALED(status)) {
                fprintf(stderr, "dtrun: rank %d killed by signal %s\n", grank,
                        sig_name(WTERMSIG(status), sb, sizeof(sb)));
                st->fail_code = 128 + WTERMSIG(status);
            } else {
                fprintf(stderr, "dtrun: rank %d exited with status %d\n", grank,
                        WEXITSTATUS(status));
                st->fail_code = WEXITSTATUS(status);
            }
            if (st->live > 0)
                fprintf(stderr, "dtrun: terminating the other %d rank(s)\n", st->live);
            start_teardown(st, ranks, o->nproc, SIGTERM, o->grace_s);
            break;
        }
    }
}

static void handle_signals(const dtrun_opts *o, dtrun_rank *ranks, dtrun_state *st)
{
    unsigned char b[64];
    ssize_t n = read(sig_pipe[0], b, sizeof(b));
    for (ssize_t i = 0; i < n; i++) {
        if (b[i] == SIGCHLD) {
            reap(o, ranks, st);
        } else if (st->got_signal) { /* second SIGINT/SIGTERM: no more patience */
            signal_all(ranks, o->nproc, SIGKILL);
        } else {
            st->got_signal = b[i];
            signal_all(ranks, o->nproc, b[i]);
            st->tearing_down = true;
            st->kill_at = now_s() + o->grace_s;
        }
    }
}

/* The supervision loop: runs until every rank is reaped and its output drained. */
static void supervise(const dtrun_opts *o, dtrun_rank *ranks, dtrun_state *st)
{
    int n = o->nproc;
    struct pollfd *pfd = calloc((size_t)(2 * n + 1), sizeof(*pfd));
    dtrun_stream **smap = calloc((size_t)(2 * n + 1), sizeof(*smap));
    double drain_until = 0;
    if (pfd == NULL || smap == NULL) {
        fprintf(stderr, "dtrun: out of memory\n");
        signal_all(ranks, n, SIGKILL);
    }
    reap(o, ranks, st); /* a rank may have died before the handler could matter */
    for (;;) {
        int np = 0;
        if (pfd != NULL) {
            pfd[np++] = (struct pollfd){.fd = sig_pipe[0], .events = POLLIN};
            for (int l = 0; l < n; l++) {
                dtrun_stream *ss[2] = {&ranks[l].out, &ranks[l].err};
                for (int k = 0; k < 2; k++) {
                    if (ss[k]->fd >= 0) {
                        smap[np] = ss[k];
                        pfd[np++] = (struct pollfd){.fd = ss[k]->fd, .events = POLLIN};
                    }
                }
            }
        }
        double t = now_s();
        if (st->live == 0) {
            /* Ranks are gone; pipes still open belong to leftovers: give them a moment. */
            if (np <= 1)
                break;
            if (drain_until == 0)
                drain_until = t + 1.0;
            if (t >= drain_until)
                break;
        }
        if (st->kill_at > 0 && t >= st->kill_at) {
            signal_all(ranks, n, SIGKILL);
            st->kill_at = 0;
        }
        double wait_s = 1.0;
        if (st->kill_at > 0 && st->kill_at - t < wait_s)
            wait_s = st->kill_at - t;
        if (drain_until > 0 && drain_until - t < wait_s)
            wait_s = drain_until - t;
        int timeout_ms = wait_s <= 0 ? 0 : (int)(wait_s * 1000) + 1;
        int r = pfd != NULL ? poll(pfd, (nfds_t)np, timeout_ms) : 0;
        if (pfd == NULL) { /* degraded: plain blocking reap */
            int status;
            if (waitpid(-1, &status, 0) < 0)
                break;
            continue;
        }
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        /* Output first, so a rank's last lines come before dtrun's verdict on it. */
        for (int i = 1; i < np; i++)
            if (pfd[i].revents != 0)
                dtrun_stream_pump(smap[i]);
        if (pfd[0].revents & POLLIN)
            handle_signals(o, ranks, st);
    }
    for (int l = 0; l < n; l++) {
        dtrun_stream_finish(&ranks[l].out);
        dtrun_stream_finish(&ranks[l].err);
    }
    free(pfd);
    free(smap);
}

static bool install_handlers(void)
{
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return false;
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGCHLD, &sa, NULL) == 0 && sigaction(SIGINT, &sa, NULL) == 0 &&
           sigaction(SIGTERM, &sa, NULL) == 0 && signal(SIGPIPE, SIG_IGN) != SIG_ERR;
}

int main(int argc, char **argv)
{
    dtrun_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc;
    char token[128];
    const char *bind = NULL;
    if (o.nnodes > 1) {
        /* Every node must agree on the token, so it cannot be made up here. */
        const char *t = getenv("DT_JOB_TOKEN");
        if (t == NULL || t[0] == '\0' || strlen(t) >= sizeof(token)) {
            fprintf(stderr, "dtrun: --nnodes %d: export the same DT_JOB_TOKEN (1..127 chars) "
                            "on every node\n", o.nnodes);
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
    if (ranks == NULL || !install_handlers()) {
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
        start_teardown(&st, ranks, o.nproc, SIGKILL, 0);
    }
    supervise(&o, ranks, &st);
    free(ranks);
    if (st.fail_code != 0)
        return st.fail_code;
    if (st.got_signal != 0)
        return 128 + st.got_signal;
    return 0;
}
