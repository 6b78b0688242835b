/*
 * Direct TCP between hosts, the sockets (ucx_tcp.h). At bootstrap every rank
 * with peers on other hosts listens on the address its store connection
 * leaves from (the address other hosts reach it by) and publishes it with a
 * random secret through the store; the higher rank of each pair connects and
 * sends the lower one's secret, the lower answers with the higher's. Only a
 * process that read the store, which needs the job token, knows them.
 * Connections only go to lower ranks, which reach their accepting phase
 * after connecting to theirs, so the set-up cannot wait in a cycle.
 */
#define _GNU_SOURCE /* accept4 */
#include "comm/ucx/ucx_tcp.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/store/store_net.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "dtensor/store.h"

#define TCP_MAGIC   0x44544350u /* "DTCP" */
#define HELLO_S     5.0         /* longest wait for one connection's greeting */
#define SETUP_MAX_S 60.0        /* longest wait for all connections */

/* What each rank publishes. */
typedef struct card {
    uint8_t ok;
    uint8_t pad;
    uint16_t family;
    uint16_t port; /* network order */
    uint8_t addr[16];
    uint64_t secret;
} card;

/* Greeting and answer: the sender's rank, the receiver's secret. */
typedef struct hello {
    uint32_t magic;
    int32_t rank;
    uint64_t secret;
} hello;

static bool wait_fd(int fd, short ev, double deadline)
{
    for (;;) {
        double left = deadline - dt__clock_now();
        if (left <= 0)
            return false;
        struct pollfd p = {.fd = fd, .events = ev};
        int rc = poll(&p, 1, (int)(left * 1000) + 1);
        if (rc > 0)
            return true;
        if (rc < 0 && errno != EINTR)
            return false;
    }
}

/* All of @p n bytes in or out of nonblocking @p fd by @p deadline. */
static bool full_io(int fd, void *buf, size_t n, bool out, double deadline)
{
    size_t done = 0;
    while (done < n) {
        ssize_t k = out ? send(fd, (char *)buf + done, n - done, MSG_NOSIGNAL)
                        : recv(fd, (char *)buf + done, n - done, 0);
        if (k > 0) {
            done += (size_t)k;
            continue;
        }
        if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            return false;
        if (!wait_fd(fd, out ? POLLOUT : POLLIN, deadline))
            return false;
    }
    return true;
}

/* Listen where the store connection leaves from; fill @p me. -1: cannot. */
static int listen_here(dt_store *store, card *me, bool loopback_ok)
{
    struct sockaddr_storage a;
    socklen_t len;
    if (dt__store_local_addr(store, &a, &len) != DT_OK)
        return -1;
    if (a.ss_family == AF_INET) {
        struct sockaddr_in *v4 = (struct sockaddr_in *)&a;
        if ((ntohl(v4->sin_addr.s_addr) >> 24) == 127 && !loopback_ok)
            return -1; /* loopback: other hosts cannot reach it */
        v4->sin_port = 0;
        memcpy(me->addr, &v4->sin_addr, 4);
    } else if (a.ss_family == AF_INET6) {
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&a;
        if (IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr) && !loopback_ok)
            return -1;
        v6->sin6_port = 0;
        memcpy(me->addr, &v6->sin6_addr, 16);
    } else {
        return -1;
    }
    int fd = socket(a.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&a, len) != 0 || listen(fd, 128) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        close(fd);
        return -1;
    }
    me->family = a.ss_family;
    me->port = a.ss_family == AF_INET ? ((struct sockaddr_in *)&a)->sin_port
                                      : ((struct sockaddr_in6 *)&a)->sin6_port;
    me->ok = 1;
    return fd;
}

static void tune(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Connect to lower rank @p wp and greet it: the socket, or -1. */
static int connect_to(const card *c, int me, uint64_t my_secret, double deadline)
{
    struct sockaddr_storage a = {.ss_family = c->family};
    socklen_t len;
    if (c->family == AF_INET) {
        struct sockaddr_in *v4 = (struct sockaddr_in *)&a;
        v4->sin_port = c->port;
        memcpy(&v4->sin_addr, c->addr, 4);
        len = sizeof(*v4);
    } else {
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&a;
        v6->sin6_port = c->port;
        memcpy(&v6->sin6_addr, c->addr, 16);
        len = sizeof(*v6);
    }
    int fd = socket(c->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int err = 0;
    socklen_t elen = sizeof(err);
    if ((connect(fd, (struct sockaddr *)&a, len) != 0 &&
         (errno != EINPROGRESS || !wait_fd(fd, POLLOUT, deadline) ||
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err != 0))) {
        close(fd);
        return -1;
    }
    hello h = {.magic = TCP_MAGIC, .rank = me, .secret = c->secret}, back;
    if (!full_io(fd, &h, sizeof(h), true, deadline) ||
        !full_io(fd, &back, sizeof(back), false, deadline) || back.magic != TCP_MAGIC ||
        back.secret != my_secret) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Accept the higher ranks' connections; strangers are turned away. */
static bool accept_all(dt_ucx_shared *sh, int lfd, const card *cards, double deadline)
{
    dt_ucx_tcp *t = sh->tcp;
    const int me = sh->world_rank;
    int want = 0;
    for (int i = me + 1; i < sh->world_size; i++)
        want += t->slot[i] >= 0 && cards[i].ok ? 1 : 0;
    while (want > 0) {
        if (!wait_fd(lfd, POLLIN, deadline))
            return false;
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        hello h;
        double until = dt__clock_now() + HELLO_S;
        bool ok = full_io(fd, &h, sizeof(h), false, until < deadline ? until : deadline) &&
                  h.magic == TCP_MAGIC && h.secret == cards[me].secret && h.rank > me &&
                  h.rank < sh->world_size && t->slot[h.rank] >= 0 &&
                  t->peers[t->slot[h.rank]].fd < 0;
        hello back = {.magic = TCP_MAGIC, .rank = me, .secret = ok ? cards[h.rank].secret : 0};
        if (!ok || !full_io(fd, &back, sizeof(back), true, deadline)) {
            DT_LOG_WARN("comm", "ucx: direct TCP: turned away a connection without this job's "
                                "credentials");
            close(fd);
            continue;
        }
        t->peers[t->slot[h.rank]].fd = fd;
        want--;
    }
    return true;
}

/* Connect to the lower ranks on other hosts, then take the higher ones. */
static bool connect_peers(dt_ucx_shared *sh, int lfd, const card *cards, double deadline)
{
    dt_ucx_tcp *t = sh->tcp;
    const int me = sh->world_rank;
    for (int i = 0; i < me; i++) {
        if (t->slot[i] < 0 || !cards[i].ok)
            continue;
        int fd = connect_to(&cards[i], me, cards[me].secret, deadline);
        if (fd < 0) {
            DT_LOG_INFO("comm", "ucx: direct TCP: cannot connect to world rank %d", i);
            return false;
        }
        t->peers[t->slot[i]].fd = fd;
    }
    if (!accept_all(sh, lfd, cards, deadline))
        return false;
    for (int k = 0; k < t->n; k++)
        if (t->peers[k].fd >= 0)
            tune(t->peers[k].fd);
    return true;
}

/* Whether world rank @p i gets a socket: other hosts (tests: every other rank). */
static bool wants(const dt_ucx_shared *sh, int i, bool test_local)
{
    return test_local ? i != sh->world_rank : !sh->peers[i].local;
}

static dt_ucx_tcp *tcp_new(dt_ucx_shared *sh, int nremote, bool test_local)
{
    dt_ucx_tcp *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->n = nremote;
    t->peers = calloc((size_t)nremote, sizeof(*t->peers));
    t->slot = malloc((size_t)sh->world_size * sizeof(*t->slot));
    t->pfd = calloc((size_t)nremote + 2, sizeof(*t->pfd));
    t->sink = malloc(64 * 1024);
    if (t->peers == NULL || t->slot == NULL || t->pfd == NULL || t->sink == NULL) {
        free(t->peers);
        free(t->slot);
        free(t->pfd);
        free(t->sink);
        free(t);
        return NULL;
    }
    for (int i = 0, k = 0; i < sh->world_size; i++) {
        t->slot[i] = wants(sh, i, test_local) ? k : -1;
        if (t->slot[i] < 0)
            continue;
        dt_tcp_peer *p = &t->peers[k++];
        p->fd = -1;
        p->wp = i;
        p->sq_end = &p->sq;
        p->rq_end = &p->rq;
        p->eq_end = &p->eq;
    }
    return t;
}

dt_status dt__ucx_tcp_setup(dt_ucx_shared *sh, dt_store *store, double timeout_s)
{
    bool test_local = dt__config_int("DT_TEST_TCP_LOCAL") != 0;
    int nremote = 0;
    for (int i = 0; i < sh->world_size; i++)
        nremote += wants(sh, i, test_local) ? 1 : 0;
    if (nremote == 0) /* one host: the whole world knows it */
        return DT_OK;
    sh->tcp = tcp_new(sh, nremote, test_local);
    card me = {0}, *cards = calloc((size_t)sh->world_size, sizeof(*cards));
    if (sh->tcp == NULL || cards == NULL) {
        free(cards);
        return DT_ERR(DT_ERR_NO_MEMORY, "ucx: no memory for %d direct sockets", nremote);
    }
    int lfd = dt__config_int("DT_TCP_DIRECT") != 0 ? listen_here(store, &me, test_local) : -1;
    if (getrandom(&me.secret, sizeof(me.secret), 0) != sizeof(me.secret))
        me.ok = 0;
    dt_status st = dt_store_allgather(store, "dt/ucx/tcp", sh->world_rank, sh->world_size, &me,
                                      sizeof(me), cards);
    /* connections come right after the swap: a peer not here within a
     * minute failed (the path is then off, agreed below) */
    double wait_s = timeout_s < SETUP_MAX_S ? timeout_s : SETUP_MAX_S;
    if (st == DT_OK && me.ok)
        sh->tcp->ready = connect_peers(sh, lfd, cards, dt__clock_now() + wait_s);
    if (lfd >= 0)
        close(lfd);
    free(cards);
    return st;
}

dt_status dt__ucx_tcp_agree(dt_comm *world)
{
    dt_ucx_shared *sh = ((dt_ucx_comm *)world->impl)->shared;
    dt_ucx_tcp *t = sh->tcp;
    if (t == NULL)
        return DT_OK;
    /* and on the size from which messages go direct: both sides choose by it */
    int32_t kb = (int32_t)dt__config_int("DT_TCP_DIRECT_MIN_KB");
    int32_t v[3] = {t->ready ? 1 : 0, kb, -kb};
    DT_CHECK(dt_comm_allreduce(world, v, v, 3, DT_DTYPE_I32, DT_REDUCE_OP_MIN, NULL));
    t->min_bytes = (size_t)kb * 1024;
    t->on = v[0] == 1 && v[1] == -v[2];
    if (t->on) {
        DT_LOG_INFO("comm",
                    "ucx: messages of %zu bytes and more to %d ranks on other hosts go "
                    "through direct sockets",
                    t->min_bytes, t->n);
        return DT_OK;
    }
    DT_LOG_INFO("comm",
                "ucx: other hosts' messages go through UCX (DT_TCP_DIRECT=%lld, direct "
                "sockets connected on this rank: %s, DT_TCP_DIRECT_MIN_KB %d..%d on the ranks)",
                (long long)dt__config_int("DT_TCP_DIRECT"), t->ready ? "yes" : "no", (int)v[1],
                (int)-v[2]);
    for (int k = 0; k < t->n; k++) {
        if (t->peers[k].fd >= 0)
            close(t->peers[k].fd);
        t->peers[k].fd = -1;
    }
    return DT_OK;
}

void dt__ucx_tcp_close(dt_ucx_shared *sh)
{
    dt_ucx_tcp *t = sh->tcp;
    if (t == NULL)
        return;
    if (t->on)
        DT_LOG_INFO("comm", "ucx: direct sockets carried %llu messages (%llu bytes) out",
                    t->sent_msgs, t->sent_bytes);
    for (int k = 0; k < t->n; k++) {
        dt_tcp_peer *p = &t->peers[k];
        if (p->fd >= 0)
            close(p->fd);
        while (p->eq != NULL) {
            dt_tcp_early *e = p->eq;
            p->eq = e->next;
            free(e->data);
            free(e);
        }
        free(p->orphan);
    }
    free(t->peers);
    free(t->slot);
    free(t->pfd);
    free(t->sink);
    free(t);
    sh->tcp = NULL;
}
