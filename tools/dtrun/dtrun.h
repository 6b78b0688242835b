/*
 * dtrun - the dtensor launcher: starts N ranks of one program on this node,
 * gives each its torchrun-style environment, optionally tags their output,
 * and tears the whole job down as soon as one rank fails.
 *
 * Files: dtrun.c (environment, spawning, main), dtrun_args.c (options),
 * dtrun_supervise.c (signals, reaping, teardown), dtrun_output.c (per-rank
 * line buffering for --tag-output).
 */
#ifndef DTRUN_H
#define DTRUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "core/clock.h" /* header-only: dtrun stays independent of libdtensor */

/* One output stream (stdout or stderr) of one rank, read from a pipe. */
typedef struct dtrun_stream {
    int fd;     /* read end of the pipe; -1 once at EOF */
    int out_fd; /* where tagged lines go: 1 or 2 */
    int rank;   /* global rank, for the "[rank] " prefix */
    char *buf;  /* bytes of the current, not yet complete line */
    size_t len, cap;
} dtrun_stream;

#define DTRUN_MAX_RANKS 4096

typedef struct dtrun_opts {
    int nproc, nnodes, node_rank;
    char master_addr[256];
    int master_port; /* 0: pick a free one (single node only) */
    bool tag_output;
    bool bind; /* --bind auto (default): pin ranks to cores when they outnumber them */
    double grace_s;
    double stop_timeout_s; /* a rank stopped (SIGSTOP) this long fails the job; 0: never */
    char **argv;           /* PROGRAM ARGS..., NULL-terminated */
} dtrun_opts;

typedef struct dtrun_rank {
    pid_t pid;            /* 0 once reaped */
    int status;           /* waitpid status, valid once reaped */
    double stopped_since; /* when it was first seen stopped (state T); 0: running */
    dtrun_stream out, err;
} dtrun_rank;

typedef struct dtrun_state {
    int live;      /* ranks not yet reaped */
    int fail_code; /* dtrun's exit code once something failed; 0 = nothing yet */
    bool tearing_down;
    double kill_at; /* when to SIGKILL the survivors; 0 = not scheduled */
    double term_at; /* when to SIGTERM them after a rank's error exit; 0 = not scheduled */
    int got_signal; /* SIGINT/SIGTERM/SIGHUP/SIGQUIT received by dtrun (forwarded) */
} dtrun_state;

/* Parse the command line; 0, or the exit code for a usage error (2). */
int dtrun_parse_args(int argc, char **argv, dtrun_opts *o);

/* Install the SIGCHLD and SIGINT/SIGTERM/SIGHUP/SIGQUIT handlers (self-pipe). */
bool dtrun_install_handlers(void);

/* Send @p sig to the process group of every live rank. */
void dtrun_signal_all(dtrun_rank *ranks, int n, int sig);

/* Signal the ranks and schedule SIGKILL after @p grace seconds (once). */
void dtrun_start_teardown(dtrun_state *st, dtrun_rank *ranks, int n, int sig, double grace);

/* Run until every rank is reaped and its output drained; fills @p st. */
void dtrun_supervise(const dtrun_opts *o, dtrun_rank *ranks, dtrun_state *st);

/* Read what is available on @p s and write every complete line, prefixed with
 * "[rank] ", with one write() each (so lines of different ranks never mix).
 * Returns false when the pipe reached EOF (the partial line is flushed then). */
bool dtrun_stream_pump(dtrun_stream *s);

/* Write the pending partial line (with a newline added) and close the pipe. */
void dtrun_stream_finish(dtrun_stream *s);

/* Write all of @p len bytes to @p fd, retrying on EINTR and short writes. */
void dtrun_write_all(int fd, const char *p, size_t len);

#endif
