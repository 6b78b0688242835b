/* --tag-output: per-rank line buffering. Each complete line leaves in one write(). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrun.h"

/* A line longer than this is cut and written in pieces (each piece tagged),
 * so a rank printing without newlines cannot make dtrun grow without bound. */
#define DTRUN_LINE_MAX (64 * 1024)

void dtrun_write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return; /* stdout closed: nothing useful left to do with the bytes */
        }
        p += n;
        len -= (size_t)n;
    }
}

static void emit_line(dtrun_stream *s, const char *line, size_t len)
{
    char prefix[32];
    int plen = snprintf(prefix, sizeof(prefix), "[%d] ", s->rank);
    size_t total = (size_t)plen + len + 1;
    char stackbuf[4096];
    char *out = total <= sizeof(stackbuf) ? stackbuf : malloc(total);
    if (out == NULL) { /* no memory: still deliver the bytes, untagged */
        dtrun_write_all(s->out_fd, line, len);
        dtrun_write_all(s->out_fd, "\n", 1);
        return;
    }
    memcpy(out, prefix, (size_t)plen);
    memcpy(out + plen, line, len);
    out[total - 1] = '\n';
    dtrun_write_all(s->out_fd, out, total);
    if (out != stackbuf)
        free(out);
}

static bool buf_append(dtrun_stream *s, const char *p, size_t n)
{
    if (s->len + n > s->cap) {
        size_t cap = s->cap ? s->cap : 1024;
        while (cap < s->len + n)
            cap *= 2;
        char *nb = realloc(s->buf, cap);
        if (nb == NULL)
            return false;
        s->buf = nb;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    return true;
}

/* Emit every complete line in the buffer and keep the rest. */
static void flush_lines(dtrun_stream *s)
{
    size_t start = 0;
    for (size_t i = 0; i < s->len; i++) {
        if (s->buf[i] == '\n') {
            emit_line(s, s->buf + start, i - start);
            start = i + 1;
        }
    }
    if (s->len - start >= DTRUN_LINE_MAX) {
        emit_line(s, s->buf + start, s->len - start);
        start = s->len;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
}

bool dtrun_stream_pump(dtrun_stream *s)
{
    char chunk[16384];
    if (s->fd < 0)
        return false;
    ssize_t n = read(s->fd, chunk, sizeof(chunk));
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (n <= 0) {
        dtrun_stream_finish(s);
        return false;
    }
    if (!buf_append(s, chunk, (size_t)n)) { /* no memory: pass through untagged */
        dtrun_write_all(s->out_fd, chunk, (size_t)n);
        return true;
    }
    flush_lines(s);
    return true;
}

void dtrun_stream_finish(dtrun_stream *s)
{
    if (s->len > 0)
        emit_line(s, s->buf, s->len);
    s->len = 0;
    free(s->buf);
    s->buf = NULL;
    s->cap = 0;
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
}
