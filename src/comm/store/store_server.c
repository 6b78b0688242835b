/*
 * The store server thread: accepts, reads frames, dispatches them to the
 * request handlers (store_server_ops.c), writes replies, drops bad clients.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "comm/store/store_server_impl.h"
#include "core/error.h"
#include "core/log.h"

/* Close the socket and free the buffers; the slot is swept out of the array
 * after this poll round (fd < 0). */
static void conn_close(dt_store_conn *c)
{
    close(c->fd);
    c->fd = -1;
    free(c->in);
    c->in = NULL;
    free(c->out);
    c->out = NULL;
    free(c->park_body);
    c->park_body = NULL;
    c->parked = false;
}

/* A client that said goodbye (or the server stopping): no warning, not counted as dropped. */
static void client_close_quiet(dt_store_conn *c)
{
    DT_LOG_DEBUG("comm", "store: client %s closed", c->peer);
    conn_close(c);
}

#define DROP_WINDOW_S    10.0
#define DROP_LOG_PER_WIN 3

/* The drops not logged in the window that ends: one line for all of them. */
static void drop_summary(dt_store_server *s)
{
    if (s->drop_quiet > 0)
        DT_LOG_WARN("comm", "store: %u more client(s) dropped in %.0f s (the last: %s)",
                    s->drop_quiet, DROP_WINDOW_S, s->drop_last);
    s->drop_quiet = 0;
}

/* A probe or a stray client can be rejected hundreds of times a second: the
 * first few per window are logged, the rest summarised when it ends. */
void dt__store_client_drop(dt_store_server *s, dt_store_conn *c, const char *why)
{
    if (c->fd < 0)
        return;
    double now = dt__clock_now();
    if (now - s->drop_window >= DROP_WINDOW_S) {
        drop_summary(s);
        s->drop_window = now;
        s->drop_logged = 0;
    }
    if (s->drop_logged < DROP_LOG_PER_WIN) {
        s->drop_logged++;
        DT_LOG_WARN("comm", "store: dropping client %s: %s%s", c->peer, why,
                    s->drop_logged == DROP_LOG_PER_WIN ? " (more are summarised)" : "");
    } else {
        s->drop_quiet++;
        snprintf(s->drop_last, sizeof(s->drop_last), "%s: %s", c->peer, why);
    }
    conn_close(c);
    s->ndropped++;
}

/* Try to send what is queued; the rest waits for POLLOUT. */
static void client_flush(dt_store_server *s, dt_store_conn *c)
{
    while (c->fd >= 0 && c->out_off < c->out_len) {
        ssize_t n =
            send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            dt__store_client_drop(s, c, "send failed");
            return;
        }
        c->out_off += (size_t)n;
    }
    if (c->fd >= 0 && c->out_off == c->out_len)
        c->out_len = c->out_off = 0;
}

bool dt__store_reply(dt_store_server *s, dt_store_conn *c, uint8_t status, const void *a,
                     size_t alen, const void *b, size_t blen)
{
    size_t body = 1 + alen + blen;
    size_t need = c->out_len + DT_STORE_HDR + body;
    if (need > c->out_cap) {
        uint8_t *nb = realloc(c->out, need);
        if (nb == NULL) {
            dt__store_client_drop(s, c, "out of memory for the reply");
            return false;
        }
        c->out = nb;
        c->out_cap = need;
    }
    uint8_t *p = c->out + c->out_len;
    dt__be32_put(p, (uint32_t)body);
    p[4] = status;
    if (alen > 0)
        memcpy(p + 5, a, alen);
    if (blen > 0)
        memcpy(p + 5 + alen, b, blen);
    c->out_len = need;
    client_flush(s, c);
    return c->fd >= 0;
}

/* Read what is there; dispatch each complete frame. */
static void client_read(dt_store_server *s, dt_store_conn *c)
{
    uint8_t chunk[65536];
    ssize_t n = recv(c->fd, chunk, sizeof(chunk), MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (n <= 0) {
        if (c->hdr_got > 0 || !c->authed) {
            dt__store_client_drop(s, c, "disconnected in the middle of a message");
        } else {
            client_close_quiet(c); /* a normal goodbye */
        }
        return;
    }
    c->last_rx = dt__clock_now();
    size_t off = 0;
    while (c->fd >= 0 && off < (size_t)n) {
        if (c->parked) { /* request/response: nothing may arrive while one waits */
            dt__store_client_drop(s, c, "sent a request while another was pending");
            return;
        }
        if (c->hdr_got < DT_STORE_HDR) {
            c->hdr[c->hdr_got++] = chunk[off++];
            if (c->hdr_got < DT_STORE_HDR)
                continue;
            uint32_t len = dt__be32_get(c->hdr);
            uint32_t cap = c->authed ? DT_STORE_FRAME_MAX : DT_STORE_PRE_AUTH_MAX;
            if (len == 0 || len > cap) {
                char why[96];
                snprintf(why, sizeof(why), "frame length %u is outside 1..%u", len, cap);
                dt__store_client_drop(s, c, why);
                return;
            }
            c->in = malloc(len);
            if (c->in == NULL) {
                dt__store_client_drop(s, c, "out of memory for a frame");
                return;
            }
            c->in_need = len;
            c->in_len = 0;
            continue;
        }
        size_t take = c->in_need - c->in_len;
        if (take > (size_t)n - off)
            take = (size_t)n - off;
        memcpy(c->in + c->in_len, chunk + off, take);
        c->in_len += take;
        off += take;
        if (c->in_len == c->in_need) {
            uint8_t *body = c->in;
            size_t len = c->in_len;
            c->in = NULL;
            c->hdr_got = 0;
            dt__store_dispatch(s, c, body, len); /* takes ownership of body */
        }
    }
}

static void accept_clients(dt_store_server *s)
{
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(s->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* the pending connection stays readable: pause accepting, do not spin */
                DT_LOG_WARN("comm", "store: cannot accept: %s; pausing 100 ms", strerror(errno));
                s->accept_paused_until = dt__clock_now() + 0.1;
            }
            return; /* EAGAIN, or a transient error: poll will tell us again */
        }
        if (s->nconns == s->cap_conns) {
            size_t cap = s->cap_conns ? 2 * s->cap_conns : 16;
            dt_store_conn *nc = realloc(s->conns, cap * sizeof(*nc));
            if (nc == NULL) {
                close(fd);
                return;
            }
            s->conns = nc;
            s->cap_conns = cap;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        dt_store_conn *c = &s->conns[s->nconns++];
        memset(c, 0, sizeof(*c));
        c->fd = fd;
        c->last_rx = dt__clock_now();
        char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
        getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV);
        snprintf(c->peer, sizeof(c->peer), "%.64s:%.8s", host, serv);
    }
}

/* Remove dropped connections (fd < 0) from the array, keeping order irrelevant. */
static void sweep(dt_store_server *s)
{
    for (size_t i = 0; i < s->nconns;) {
        if (s->conns[i].fd < 0) {
            free(s->conns[i].park_body);
            s->conns[i] = s->conns[--s->nconns];
        } else {
            i++;
        }
    }
}

/* Drop stalled peers, answer expired waits; returns ms until the next deadline. */
static int check_deadlines(dt_store_server *s)
{
    double now = dt__clock_now(), next = -1;
    for (size_t i = 0; i < s->nconns; i++) {
        dt_store_conn *c = &s->conns[i];
        if (c->fd < 0)
            continue;
        bool partial = c->hdr_got > 0 || !c->authed;
        if (partial) {
            double at = c->last_rx + s->stall_s;
            if (now >= at) {
                dt__store_client_drop(s, c,
                                      c->authed ? "stalled in the middle of a message"
                                                : "did not authenticate in time");
                continue;
            }
            next = (next < 0 || at < next) ? at : next;
        }
        if (c->parked && c->park_deadline > 0) {
            if (now >= c->park_deadline)
                dt__store_park_expire(s, c);
            else
                next = (next < 0 || c->park_deadline < next) ? c->park_deadline : next;
        }
    }
    if (next < 0)
        return -1;
    double ms = (next - now) * 1000.0 + 1;
    return ms > 60000 ? 60000 : (int)ms;
}

/* A stop request: 'x' = now (returns false), 'g' = once the clients are gone. */
static bool wake_read(dt_store_server *s)
{
    char b = 'x';
    if (read(s->wake_fd[0], &b, 1) == 1 && b == 'g') {
        s->lingering = true;
        return true;
    }
    return false;
}

/* While stopping gracefully: -1 = stop now, else ms to wait at most. Only
 * authenticated clients (ranks) are waited for: a client that never sent
 * the job token is no reason to delay the exit. */
static int linger_check(dt_store_server *s)
{
    size_t live = 0;
    for (size_t i = 0; i < s->nconns; i++)
        live += s->conns[i].fd >= 0 && s->conns[i].authed;
    double left = s->linger_until - dt__clock_now();
    if (live == 0)
        return -1;
    if (left <= 0) {
        DT_LOG_WARN("comm", "store: stopping with %zu client(s) still connected", live);
        return -1;
    }
    return (int)(left * 1000.0) + 1;
}

static void *server_main(void *arg)
{
    dt_store_server *s = arg;
    struct pollfd *pfd = NULL;
    size_t pcap = 0;
    for (;;) {
        int timeout = check_deadlines(s);
        sweep(s);
        if (s->lingering) {
            int ms = linger_check(s);
            if (ms < 0)
                break;
            timeout = (timeout < 0 || ms < timeout) ? ms : timeout;
        }
        if (pcap < s->nconns + 2) {
            pcap = 2 * (s->nconns + 2);
            struct pollfd *np = realloc(pfd, pcap * sizeof(*np));
            if (np == NULL) {
                DT_LOG_ERROR("comm", "store: out of memory, server stops");
                break;
            }
            pfd = np;
        }
        pfd[0] = (struct pollfd){.fd = s->wake_fd[0], .events = POLLIN};
        bool paused = s->accept_paused_until > dt__clock_now();
        pfd[1] = (struct pollfd){.fd = paused ? -1 : s->listen_fd, .events = POLLIN};
        if (paused && (timeout < 0 || timeout > 100))
            timeout = 100;
        size_t n = s->nconns; /* connections accepted below are polled next round */
        for (size_t i = 0; i < n; i++) {
            dt_store_conn *c = &s->conns[i];
            pfd[i + 2] =
                (struct pollfd){.fd = c->fd, .events = POLLIN | (c->out_len ? POLLOUT : 0)};
        }
        int r = poll(pfd, (nfds_t)(n + 2), timeout);
        if (r < 0 && errno != EINTR) {
            DT_LOG_ERROR("comm", "store: poll failed: %s; server stops", strerror(errno));
            break;
        }
        if (r <= 0)
            continue;
        if ((pfd[0].revents & POLLIN) && !wake_read(s))
            break; /* stop now */
        for (size_t i = 0; i < n; i++) {
            dt_store_conn *c = &s->conns[i];
            short ev = pfd[i + 2].revents;
            if (c->fd < 0 || ev == 0)
                continue;
            if (ev & POLLOUT)
                client_flush(s, c);
            if (c->fd >= 0 && (ev & (POLLIN | POLLHUP | POLLERR)))
                client_read(s, c);
        }
        if (pfd[1].revents & POLLIN)
            accept_clients(s);
    }
    free(pfd);
    return NULL;
}

static dt_status listen_on(const char *bind_addr, int port, int *fd_out, int *port_out)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    int gai = getaddrinfo(bind_addr, ps, &hints, &res);
    if (gai != 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_store_create: cannot resolve bind address '%s': %s",
                      bind_addr, gai_strerror(gai));
    int err = 0, fd = -1;
    for (struct addrinfo *a = res; a != NULL; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1024) == 0)
            break;
        err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return DT_ERR(DT_ERR_SYSTEM, "dt_store_create: cannot listen on %s:%d: %s", bind_addr, port,
                      strerror(err));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    *port_out = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
    *fd_out = fd;
    return DT_OK;
}

dt_status dt__store_server_start(const char *bind_addr, int port, const char *token, double stall_s,
                                 dt_store_server **out)
{
    dt_status st;
    dt_store_server *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_store_create: no memory for the server");
    s->wake_fd[0] = s->wake_fd[1] = -1;
    s->stall_s = stall_s;
    s->drop_window = dt__clock_now();
    snprintf(s->token, sizeof(s->token), "%s", token != NULL ? token : "");
    if (!dt__store_kv_init(&s->kv)) {
        st = DT_ERR(DT_ERR_NO_MEMORY, "dt_store_create: no memory for the table");
        goto err_free;
    }
    DT_CHECK_GOTO(listen_on(bind_addr, port, &s->listen_fd, &s->port), st, err_free_kv);
    if (pipe2(s->wake_fd, O_CLOEXEC) != 0) {
        st = DT_ERR(DT_ERR_SYSTEM, "dt_store_create: pipe: %s", strerror(errno));
        goto err_close_listen;
    }
    int e = pthread_create(&s->thread, NULL, server_main, s);
    if (e != 0) {
        st = DT_ERR(DT_ERR_SYSTEM, "dt_store_create: cannot start the server thread: %s",
                    strerror(e));
        goto err_close_pipe;
    }
    *out = s;
    return DT_OK;

err_close_pipe:
    close(s->wake_fd[0]);
    close(s->wake_fd[1]);
err_close_listen:
    close(s->listen_fd);
err_free_kv:
    dt__store_kv_free(&s->kv);
err_free:
    free(s);
    return st;
}

int dt__store_server_port(const dt_store_server *s)
{
    return s != NULL ? s->port : 0;
}

void dt__store_server_stop(dt_store_server *s, double linger_s)
{
    if (s == NULL)
        return;
    s->linger_until = dt__clock_now() + linger_s; /* published by the pipe write below */
    (void)!write(s->wake_fd[1], linger_s > 0 ? "g" : "x", 1);
    pthread_join(s->thread, NULL);
    drop_summary(s);
    for (size_t i = 0; i < s->nconns; i++)
        if (s->conns[i].fd >= 0)
            client_close_quiet(&s->conns[i]);
    free(s->conns);
    close(s->listen_fd);
    close(s->wake_fd[0]);
    close(s->wake_fd[1]);
    dt__store_kv_free(&s->kv);
    free(s);
}
