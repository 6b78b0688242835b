/* Socket helpers for the store client: every wait has a deadline. */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "comm/store/store_net.h"
#include "comm/store/store_proto.h"
#include "comm/store/store_server_impl.h"
#include "core/error.h"

static int ms_left(double deadline)
{
    double left = deadline - dt__clock_now();
    if (left <= 0)
        return 0;
    return left > 3600 ? 3600000 : (int)(left * 1000.0) + 1;
}

/* One non-blocking connect attempt to one address; 0 or an errno. */
static int try_connect(const struct addrinfo *a, double deadline, int *fd_out)
{
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0)
        return errno;
    int err = 0;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int r;
            do {
                r = poll(&p, 1, ms_left(deadline));
            } while (r < 0 && errno == EINTR);
            socklen_t sl = sizeof(err);
            if (r == 0)
                err = ETIMEDOUT;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) != 0)
                err = errno;
        }
    }
    if (err != 0) {
        close(fd);
        return err;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    *fd_out = fd;
    return 0;
}

dt_status dt__store_connect(const char *host, int port, double deadline, int *fd_out)
{
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    double backoff = 0.01;
    int err = 0;
    for (;;) {
        struct addrinfo *res = NULL;
        int gai = getaddrinfo(host, ps, &hints, &res);
        if (gai != 0 && gai != EAI_AGAIN)
            return DT_ERR(DT_ERR_INVALID_ARG, "dt_store_create: cannot resolve store host '%s': %s",
                          host, gai_strerror(gai));
        for (struct addrinfo *a = res; a != NULL; a = a->ai_next) {
            err = try_connect(a, deadline, fd_out);
            if (err == 0) {
                freeaddrinfo(res);
                return DT_OK;
            }
        }
        if (res != NULL)
            freeaddrinfo(res);
        if (dt__clock_now() + backoff >= deadline)
            break;
        /* Refused or unreachable: rank 0 may still be starting; try again. */
        struct timespec ts = {0, (long)(backoff * 1e9)};
        nanosleep(&ts, NULL);
        backoff = backoff * 2 > 0.5 ? 0.5 : backoff * 2;
    }
    return DT_ERR(DT_ERR_TIMEOUT, "dt_store_create: cannot connect to the store at %s:%d: %s", host,
                  port, err ? strerror(err) : "timed out");
}

/* Send the iovecs in as few syscalls as the socket allows (one, usually). */
static dt_status send_all(int fd, struct iovec *iov, int n, double deadline, const char *what)
{
    while (n > 0) {
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t sent = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent < 0 && errno == EINTR)
            continue;
        if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            if (poll(&pf, 1, ms_left(deadline)) == 0)
                return DT_ERR(DT_ERR_TIMEOUT, "%s: timed out sending to the store", what);
            continue;
        }
        if (sent < 0)
            return DT_ERR(DT_ERR_PEER_LOST, "%s: lost the store connection: %s", what,
                          strerror(errno));
        size_t left = (size_t)sent;
        while (n > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return DT_OK;
}

dt_status dt__store_send_frame(int fd, const void *a, size_t alen, const void *b, size_t blen,
                               double deadline, const char *what)
{
    if (alen + blen > DT_STORE_FRAME_MAX)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: message of %zu bytes exceeds the store's %u limit",
                      what, alen + blen, DT_STORE_FRAME_MAX);
    uint8_t hdr[DT_STORE_HDR];
    dt__be32_put(hdr, (uint32_t)(alen + blen));
    struct iovec iov[3] = {{hdr, sizeof(hdr)}, {(void *)a, alen}, {(void *)b, blen}};
    return send_all(fd, iov, blen > 0 ? 3 : 2, deadline, what);
}

static dt_status recv_all(int fd, uint8_t *p, size_t len, double deadline, const char *what)
{
    while (len > 0) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int r = poll(&pf, 1, ms_left(deadline));
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            return DT_ERR(DT_ERR_TIMEOUT, "%s: the store did not answer in time", what);
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (n <= 0)
            return DT_ERR(DT_ERR_PEER_LOST, "%s: the store closed the connection%s%s", what,
                          n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
        p += n;
        len -= (size_t)n;
    }
    return DT_OK;
}

dt_status dt__store_recv_frame(int fd, double deadline, const char *what, uint8_t **body,
                               size_t *len)
{
    uint8_t hdr[DT_STORE_HDR];
    DT_CHECK(recv_all(fd, hdr, sizeof(hdr), deadline, what));
    uint32_t n = dt__be32_get(hdr);
    if (n == 0 || n > DT_STORE_FRAME_MAX)
        return DT_ERR(DT_ERR_FORMAT, "%s: the store sent a frame of %u bytes", what, n);
    uint8_t *b = malloc(n);
    if (b == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory for a %u-byte reply", what, n);
    dt_status st = recv_all(fd, b, n, deadline, what);
    if (st != DT_OK) {
        free(b);
        return st;
    }
    *body = b;
    *len = n;
    return DT_OK;
}
