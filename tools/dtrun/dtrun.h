/*
 * dtrun - the dtensor launcher: starts N ranks of one program on this node,
 * gives each its torchrun-style environment, optionally tags their output,
 * and tears the whole job down as soon as one rank fails.
 *
 * Files: dtrun.c (options, environment, spawning, the supervision loop),
 * dtrun_output.c (per-rank line buffering for --tag-output).
 */
#ifndef DTRUN_H
#define DTRUN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* One output stream (stdout or stderr) of one rank, read from a pipe. */
typedef struct dtrun_stream {
    int fd;        /* read end of the pipe; -1 once at EOF */
    int out_fd;    /* where tagged lines go: 1 or 2 */
    int rank;      /* global rank, for the "[rank] " prefix */
    char *buf;     /* bytes of the current, not yet complete line */
    size_t len, cap;
} dtrun_stream;

/* Read what is available on @p s and write every complete line, prefixed with
 * "[rank] ", with one write() each (so lines of different ranks never mix).
 * Returns false when the pipe reached EOF (the partial line is flushed then). */
bool dtrun_stream_pump(dtrun_stream *s);

/* Write the pending partial line (with a newline added) and close the pipe. */
void dtrun_stream_finish(dtrun_stream *s);

/* Write all of @p len bytes to @p fd, retrying on EINTR and short writes. */
void dtrun_write_all(int fd, const char *p, size_t len);

#endif
