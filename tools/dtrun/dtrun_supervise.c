/*
 * dtrun's supervision: signals arrive through a self-pipe, exits are reaped,
 * the first failure is reported and tears the job down (SIGTERM, then SIGKILL).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/proc_stat.h"
#include "dtrun.h"

/* After a rank's error exit, how long the others may take to end on their
 * own (at most --grace) before they are sent SIGTERM. */
#define DTRUN_SETTLE_S 1.0

static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    (void)!write(sig_pipe[1], &b, 1);
    errno = saved;
}

void dtrun_signal_all(dtrun_rank *ranks, int n, int sig)
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

/* Signal every rank with @p sig now and SIGKILL the survivors @p grace s later. */
static void signal_teardown(dtrun_state *st, dtrun_rank *ranks, int n, int sig, double grace)
{
    st->term_at = 0;
    dtrun_signal_all(ranks, n, sig);
    dtrun_signal_all(ranks, n, SIGCONT); /* a stopped rank takes the signal only when resumed */
    st->kill_at = dt__clock_now() + grace;
}

void dtrun_start_teardown(dtrun_state *st, dtrun_rank *ranks, int n, int sig, double grace)
{
    if (st->tearing_down)
        return;
    st->tearing_down = true;
    signal_teardown(st, ranks, n, sig, grace);
}

/* Whether @p pid is stopped (state T: SIGSTOP/SIGTSTP; not t, a debugger's stop). */
static bool rank_stopped(pid_t pid)
{
    char state = 0;
    unsigned long long start = 0;
    return dt__proc_stat((int)pid, &state, &start) && state == 'T';
}

/* Name the ranks stopped now (a failure elsewhere may be them hanging the job). */
static void report_stopped(const dtrun_opts *o, const dtrun_rank *ranks, double now)
{
    for (int l = 0; l < o->nproc; l++)
        if (ranks[l].pid > 0 && ranks[l].stopped_since > 0)
            fprintf(stderr, "dtrun: rank %d is stopped (SIGSTOP) since %.0f s\n",
                    o->node_rank * o->nproc + l, now - ranks[l].stopped_since);
}

/* A rank stopped for --stop-timeout fails the job: nothing else would notice it. */
static void check_stopped(const dtrun_opts *o, dtrun_rank *ranks, dtrun_state *st, double now)
{
    for (int l = 0; l < o->nproc; l++) {
        dtrun_rank *r = &ranks[l];
        if (r->pid <= 0 || !rank_stopped(r->pid)) {
            r->stopped_since = 0;
            continue;
        }
        if (r->stopped_since == 0)
            r->stopped_since = now;
        if (st->tearing_down || o->stop_timeout_s <= 0 ||
            now - r->stopped_since < o->stop_timeout_s)
            continue;
        fprintf(stderr,
                "dtrun: rank %d stopped (SIGSTOP) for %.0f s (--stop-timeout); "
                "terminating the job\n",
                o->node_rank * o->nproc + l, now - r->stopped_since);
        st->fail_code = 1;
        dtrun_start_teardown(st, ranks, o->nproc, SIGTERM, o->grace_s);
    }
}

/*
 * Reap finished ranks; report the first failure and start tearing down.
 * Ranks that ended before dtrun ran (a busy machine) come back from waitpid
 * oldest first, not in the order they died: of those, one killed by a signal
 * is named before one that exited with an error, which is most often its
 * peers' reaction to that death (peer lost).
 */
static void reap(const dtrun_opts *o, dtrun_rank *ranks, dtrun_state *st)
{
    int cause = -1;
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            break;
        for (int l = 0; l < o->nproc; l++) {
            if (ranks[l].pid != pid)
                continue;
            ranks[l].pid = 0;
            ranks[l].status = status;
            st->live--;
            kill(-pid, SIGKILL); /* whatever the rank left behind in its group */
            bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
            if (failed && !st->tearing_down &&
                (cause < 0 || (WIFSIGNALED(status) && !WIFSIGNALED(ranks[cause].status))))
                cause = l;
            break;
        }
    }
    if (cause < 0)
        return;
    int status = ranks[cause].status, grank = o->node_rank * o->nproc + cause;
    char sb[32];
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "dtrun: rank %d killed by signal %s\n", grank,
                sig_name(WTERMSIG(status), sb, sizeof(sb)));
        st->fail_code = 128 + WTERMSIG(status);
    } else {
        fprintf(stderr, "dtrun: rank %d exited with status %d\n", grank, WEXITSTATUS(status));
        st->fail_code = WEXITSTATUS(status);
    }
    report_stopped(o, ranks, dt__clock_now());
    if (st->live == 0)
        return;
    if (WIFEXITED(status)) {
        /* An error exit: the library tells the other ranks why (its abort
         * notice), so give them a moment to end on their own and print
         * their reasons before they are signalled. */
        st->tearing_down = true;
        st->term_at = dt__clock_now() + (o->grace_s < DTRUN_SETTLE_S ? o->grace_s : DTRUN_SETTLE_S);
        return;
    }
    fprintf(stderr, "dtrun: terminating the other %d rank(s)\n", st->live);
    dtrun_start_teardown(st, ranks, o->nproc, SIGTERM, o->grace_s);
}

/* The settle time after an error exit is over: SIGTERM whoever is left. */
static void settle_over(const dtrun_opts *o, dtrun_rank *ranks, dtrun_state *st, double t)
{
    if (st->term_at == 0 || t < st->term_at)
        return;
    st->term_at = 0;
    if (st->live == 0)
        return;
    fprintf(stderr, "dtrun: terminating the other %d rank(s)\n", st->live);
    signal_teardown(st, ranks, o->nproc, SIGTERM, o->grace_s);
}

static void handle_signals(const dtrun_opts *o, dtrun_rank *ranks, dtrun_state *st)
{
    unsigned char b[64];
    ssize_t n = read(sig_pipe[0], b, sizeof(b));
    for (ssize_t i = 0; i < n; i++) {
        if (b[i] == SIGCHLD) {
            reap(o, ranks, st);
        } else if (st->got_signal) { /* second SIGINT/SIGTERM: no more patience */
            dtrun_signal_all(ranks, o->nproc, SIGKILL);
        } else {
            st->got_signal = b[i];
            st->tearing_down = true;
            signal_teardown(st, ranks, o->nproc, b[i], o->grace_s);
        }
    }
}

/* At most 4096 ranks: fixed tables, so supervision cannot fail on memory. */
static struct pollfd pfd[2 * DTRUN_MAX_RANKS + 1];
static dtrun_stream *pfd_stream[2 * DTRUN_MAX_RANKS + 1];

/* The signal pipe, then every rank pipe still open; returns the count. */
static int build_pollset(dtrun_rank *ranks, int n)
{
    int np = 0;
    pfd[np++] = (struct pollfd){.fd = sig_pipe[0], .events = POLLIN};
    for (int l = 0; l < n; l++) {
        dtrun_stream *ss[2] = {&ranks[l].out, &ranks[l].err};
        for (int k = 0; k < 2; k++) {
            if (ss[k]->fd >= 0) {
                pfd_stream[np] = ss[k];
                pfd[np++] = (struct pollfd){.fd = ss[k]->fd, .events = POLLIN};
            }
        }
    }
    return np;
}

/* Milliseconds until the next thing to do on a timer (SIGTERM, SIGKILL, end of draining). */
static int next_timeout_ms(const dtrun_state *st, double drain_until, double t)
{
    double wait_s = 1.0;
    if (st->kill_at > 0 && st->kill_at - t < wait_s)
        wait_s = st->kill_at - t;
    if (st->term_at > 0 && st->term_at - t < wait_s)
        wait_s = st->term_at - t;
    if (drain_until > 0 && drain_until - t < wait_s)
        wait_s = drain_until - t;
    return wait_s <= 0 ? 0 : (int)(wait_s * 1000) + 1;
}

/* The supervision loop: runs until every rank is reaped and its output drained. */
void dtrun_supervise(const dtrun_opts *o, dtrun_rank *ranks, dtrun_state *st)
{
    int n = o->nproc;
    double drain_until = 0;
    reap(o, ranks, st); /* a rank may have died before the handler could matter */
    for (;;) {
        int np = build_pollset(ranks, n);
        double t = dt__clock_now();
        if (st->live == 0) {
            /* Ranks are gone; pipes still open belong to leftovers: give them a moment. */
            if (np <= 1)
                break;
            if (drain_until == 0)
                drain_until = t + 1.0;
            if (t >= drain_until)
                break;
        }
        check_stopped(o, ranks, st, t);
        settle_over(o, ranks, st, t);
        if (st->kill_at > 0 && t >= st->kill_at) {
            dtrun_signal_all(ranks, n, SIGKILL);
            st->kill_at = 0;
        }
        int r = poll(pfd, (nfds_t)np, next_timeout_ms(st, drain_until, t));
        if (r < 0 && errno != EINTR) {
            fprintf(stderr, "dtrun: poll: %s; killing the job\n", strerror(errno));
            dtrun_signal_all(ranks, n, SIGKILL);
            st->fail_code = st->fail_code ? st->fail_code : 1;
            break;
        }
        if (r <= 0)
            continue;
        /* Output first, so a rank's last lines come before dtrun's verdict on it. */
        for (int i = 1; i < np; i++)
            if (pfd[i].revents != 0)
                dtrun_stream_pump(pfd_stream[i]);
        if (pfd[0].revents & POLLIN)
            handle_signals(o, ranks, st);
    }
    for (int l = 0; l < n; l++) {
        dtrun_stream_finish(&ranks[l].out);
        dtrun_stream_finish(&ranks[l].err);
    }
}

bool dtrun_install_handlers(void)
{
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return false;
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    /* SIGHUP/SIGQUIT too: a closed terminal or Ctrl-\ must not orphan the ranks */
    return sigaction(SIGCHLD, &sa, NULL) == 0 && sigaction(SIGINT, &sa, NULL) == 0 &&
           sigaction(SIGTERM, &sa, NULL) == 0 && sigaction(SIGHUP, &sa, NULL) == 0 &&
           sigaction(SIGQUIT, &sa, NULL) == 0 && signal(SIGPIPE, SIG_IGN) != SIG_ERR;
}
