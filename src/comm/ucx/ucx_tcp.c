/*
 * Direct TCP between hosts, the data path (ucx_tcp.h says what and why; the
 * sockets are made in ucx_tcp_setup.c). Everything is nonblocking and runs
 * from the UCX backend's progress: sends are written from the user's buffer
 * with sendmsg (header and bytes in one call), receives read into the
 * posted buffer, and a sleeping rank polls the sockets beside UCX's event fd.
 */
#include "comm/ucx/ucx_tcp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"

#define HDR        sizeof(dt_tcp_hdr)
#define SINK_BYTES (64u * 1024u)

bool dt__ucx_tcp_reaches(const dt_ucx_shared *sh, int wp)
{
    const dt_ucx_tcp *t = sh->tcp;
    return t != NULL && t->on && t->slot[wp] >= 0;
}

bool dt__ucx_tcp_carries(const dt_ucx_shared *sh, int wp, size_t bytes, uint32_t tag)
{
    return dt__ucx_tcp_reaches(sh, wp) &&
           (bytes >= sh->tcp->min_bytes || (bytes == 0 && (tag & DT__TAG_P2P) != 0));
}

static void finish(dt_ucx_tcp *t, dt_ucx_req *r, ucs_status_t st)
{
    r->done = true;
    r->status = st;
    t->active--;
}

static bool unlink_req(dt_ucx_req **head, dt_ucx_req ***end, dt_ucx_req *r)
{
    for (dt_ucx_req **rp = head; *rp != NULL; rp = &(*rp)->next_q) {
        if (*rp != r)
            continue;
        *rp = r->next_q;
        if (*end == &r->next_q)
            *end = rp;
        r->next_q = NULL;
        return true;
    }
    return false;
}

/* The queue's head is written next: its header (unless it is half written). */
static void head_hdr(dt_tcp_peer *p)
{
    if (p->sq != NULL && p->sent == 0 && p->orphan == NULL)
        p->shdr = (dt_tcp_hdr){.comm = p->sq->comm, .tag = p->sq->tag, .len = p->sq->expect};
}

static void fail_list(dt_ucx_tcp *t, dt_ucx_req **head, dt_ucx_req ***end)
{
    while (*head != NULL) {
        dt_ucx_req *r = *head;
        *head = r->next_q;
        r->next_q = NULL;
        finish(t, r, UCS_ERR_CONNECTION_RESET);
    }
    *end = head;
}

static bool idle(const dt_tcp_peer *p)
{
    return p->sq == NULL && p->rq == NULL && p->rcur == NULL && p->orphan == NULL && !p->in_body &&
           p->rhdr_got == 0;
}

/*
 * The socket closed or broke. With nothing under way on it the peer may just
 * have finished (its other messages, on UCX, may still be coming): the socket
 * goes, what was read stays, and only a later message on it fails. Otherwise
 * the peer is lost and everything queued on it fails.
 */
static void peer_fail(dt_ucx_shared *sh, dt_tcp_peer *p, const char *why)
{
    dt_ucx_tcp *t = sh->tcp;
    p->gone = why;
    close(p->fd);
    p->fd = -1;
    if (idle(p)) {
        DT_LOG_DEBUG("comm", "ucx: direct socket to world rank %d: %s", p->wp, why);
        return;
    }
    DT_LOG_INFO("comm", "ucx: direct socket to world rank %d: %s", p->wp, why);
    sh->peers[p->wp].dead = true;
    sh->peers[p->wp].why = UCS_ERR_CONNECTION_RESET;
    fail_list(t, &p->sq, &p->sq_end);
    fail_list(t, &p->rq, &p->rq_end);
    if (p->rcur != NULL)
        finish(t, p->rcur, UCS_ERR_CONNECTION_RESET);
    if (p->in_body || p->rhdr_got > 0)
        t->partial--;
    p->rcur = NULL;
    p->ecur = NULL;
    p->in_body = false;
    p->rhdr_got = 0;
    while (p->eq != NULL) {
        dt_tcp_early *e = p->eq;
        p->eq = e->next;
        free(e->data);
        free(e);
    }
    p->eq_end = &p->eq;
    free(p->orphan);
    p->orphan = NULL;
}

/* A send or receive call's result: true when bytes moved. */
static bool moved(dt_ucx_shared *sh, dt_tcp_peer *p, ssize_t n, bool is_recv)
{
    if (n > 0)
        return true;
    if (n == 0 && is_recv) {
        peer_fail(sh, p, "closed by the peer");
        return false;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return false;
    peer_fail(sh, p, strerror(errno));
    return false;
}

/* Write what the socket takes: a cancelled head's remainder, then the queue. */
static int write_some(dt_ucx_shared *sh, dt_tcp_peer *p)
{
    int events = 0;
    while (p->fd >= 0 && (p->sq != NULL || p->orphan != NULL)) {
        struct iovec iov[2];
        int k = 0;
        size_t total;
        if (p->orphan != NULL) {
            iov[k++] = (struct iovec){p->orphan + p->sent, p->orphan_len - p->sent};
            total = p->orphan_len;
        } else {
            dt_ucx_req *r = p->sq;
            if (p->sent < HDR)
                iov[k++] = (struct iovec){(char *)&p->shdr + p->sent, HDR - p->sent};
            size_t off = p->sent > HDR ? p->sent - HDR : 0;
            iov[k++] = (struct iovec){(char *)r->buf + off, r->expect - off};
            total = HDR + r->expect;
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)k};
        ssize_t n = sendmsg(p->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (!moved(sh, p, n, false))
            break;
        events++;
        p->sent += (size_t)n;
        if (p->sent < total)
            break; /* the socket's buffer is full */
        p->sent = 0;
        if (p->orphan != NULL) {
            free(p->orphan);
            p->orphan = NULL;
        } else {
            dt_ucx_req *r = p->sq;
            p->sq = r->next_q;
            if (p->sq == NULL)
                p->sq_end = &p->sq;
            r->next_q = NULL;
            sh->tcp->sent_msgs++;
            sh->tcp->sent_bytes += r->expect;
            finish(sh->tcp, r, UCS_OK);
        }
        head_hdr(p);
    }
    return events;
}

/* A whole header is in: find its receive, or keep it as an early message. */
static void begin_body(dt_ucx_shared *sh, dt_tcp_peer *p)
{
    const dt_tcp_hdr *h = &p->rhdr;
    p->in_body = true;
    p->body_got = 0;
    for (dt_ucx_req *r = p->rq; r != NULL; r = r->next_q) {
        if (r->comm != h->comm || (r->tag ^ h->tag) & dt__tag_match_mask(r->tag))
            continue;
        unlink_req(&p->rq, &p->rq_end, r);
        r->got = h->len;
        r->got_tag = h->tag;
        p->rcur = r;
        return;
    }
    dt_tcp_early *e = calloc(1, sizeof(*e));
    char *data = e != NULL ? malloc(h->len > 0 ? h->len : 1) : NULL;
    if (data == NULL) { /* nowhere to keep it: the stream cannot go on */
        free(e);
        peer_fail(sh, p, "no memory for a message that came before its receive");
        return;
    }
    e->h = *h;
    e->data = data;
    *p->eq_end = e;
    p->eq_end = &e->next;
    p->ecur = e;
}

/* Where the next bytes of the current message go, and how many fit there. */
static char *target(dt_ucx_tcp *t, dt_tcp_peer *p, size_t *room)
{
    size_t left = p->rhdr.len - p->body_got;
    if (p->rcur != NULL) {
        size_t keep = p->rcur->expect < p->rhdr.len ? p->rcur->expect : p->rhdr.len;
        if (p->body_got < keep) {
            *room = keep - p->body_got;
            return (char *)p->rcur->buf + p->body_got;
        }
    } else if (p->ecur != NULL) {
        *room = left;
        return p->ecur->data + p->body_got;
    }
    *room = left < SINK_BYTES ? left : SINK_BYTES; /* truncated or cancelled */
    return t->sink;
}

static int end_body(dt_ucx_shared *sh, dt_tcp_peer *p)
{
    int done = 0;
    if (p->rcur != NULL) {
        finish(sh->tcp, p->rcur,
               p->rhdr.len > p->rcur->expect ? UCS_ERR_MESSAGE_TRUNCATED : UCS_OK);
        done = 1;
    }
    p->rcur = NULL;
    p->ecur = NULL;
    p->in_body = false;
    p->rhdr_got = 0;
    sh->tcp->partial--;
    return done;
}

/* Fold what landed of an irecv_reduce while it is still in the cache. */
static void fold_landed(dt_ucx_req *r, size_t got)
{
    if (r->fold == NULL)
        return;
    size_t es = dt_dtype_size(r->fold_dtype);
    size_t upto = got < r->expect ? got : r->expect;
    dt__ucx_fold(r, upto - upto % es);
}

/* Read what has arrived: headers, then bytes where they belong. */
static int read_some(dt_ucx_shared *sh, dt_tcp_peer *p)
{
    dt_ucx_tcp *t = sh->tcp;
    int events = 0;
    while (p->fd >= 0) {
        if (!p->in_body) {
            ssize_t n =
                recv(p->fd, (char *)&p->rhdr + p->rhdr_got, HDR - p->rhdr_got, MSG_DONTWAIT);
            if (!moved(sh, p, n, true))
                break;
            if (p->rhdr_got == 0)
                t->partial++;
            p->rhdr_got += (size_t)n;
            if (p->rhdr_got < HDR)
                continue;
            begin_body(sh, p);
        } else {
            size_t room;
            char *dst = target(t, p, &room);
            ssize_t n = recv(p->fd, dst, room, MSG_DONTWAIT);
            if (!moved(sh, p, n, true))
                break;
            events++;
            p->body_got += (size_t)n;
            if (p->ecur != NULL)
                p->ecur->have = p->body_got;
            if (p->rcur != NULL)
                fold_landed(p->rcur, p->body_got);
        }
        if (p->in_body && p->body_got == p->rhdr.len)
            events += end_body(sh, p);
    }
    return events;
}

int dt__ucx_tcp_progress(dt_ucx_shared *sh)
{
    dt_ucx_tcp *t = sh->tcp;
    if (t == NULL || !t->on)
        return 0;
    /* idle, the sockets are looked at now and then (and when a sleep saw them
     * ready): an early message must not wait for its receive to be read, or a
     * sender blocked on a full socket would never finish */
    if (t->active == 0 && t->partial == 0 && !t->kick && (++t->idle & 31u) != 0)
        return 0;
    t->kick = false;
    int events = 0;
    for (int i = 0; i < t->n; i++) {
        dt_tcp_peer *p = &t->peers[i];
        if (p->fd < 0)
            continue;
        if (p->sq != NULL || p->orphan != NULL)
            events += write_some(sh, p);
        events += read_some(sh, p);
    }
    return events;
}

static dt_status lost(const dt_tcp_peer *p, const char *dir)
{
    return DT_ERR(DT_ERR_PEER_LOST, "ucx: %s world rank %d: peer lost (direct socket %s)", dir,
                  p->wp, p->gone != NULL ? p->gone : "closed");
}

dt_status dt__ucx_tcp_isend(dt_comm *c, const void *buf, size_t bytes, int wp, uint32_t tag,
                            void **req)
{
    dt_ucx_comm *uc = c->impl;
    dt_ucx_shared *sh = uc->shared;
    dt_tcp_peer *p = dt__tcp_peer_of(sh, wp);
    if (p->fd < 0)
        return lost(p, "send to");
    DT_CHECK(dt__ucx_tcp_mark_send(c, wp, tag));
    dt_ucx_req *r = dt__ucx_req_new(sh);
    if (r == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "ucx: no memory for a send request");
    r->tcp = true;
    r->world_peer = wp;
    r->buf = (void *)buf;
    r->expect = bytes;
    r->comm = (uint16_t)uc->id;
    r->tag = tag;
    *p->sq_end = r;
    p->sq_end = &r->next_q;
    sh->tcp->active++;
    head_hdr(p);
    write_some(sh, p); /* most of it may fit in the socket right away */
    if (!r->done) {
        *req = r;
        return DT_OK;
    }
    dt_status st = dt__ucx_req_status(c, r);
    dt__ucx_req_put(r);
    *req = NULL;
    return st;
}

/* An early message @p e taken by @p r: copied out, or, while still coming,
 * the rest read straight into r's buffer. */
static void take_early(dt_ucx_shared *sh, dt_tcp_peer *p, dt_tcp_early *e, dt_ucx_req *r)
{
    size_t keep = r->expect < e->h.len ? r->expect : e->h.len;
    size_t have = e == p->ecur && e->have < keep ? e->have : keep;
    r->got = e->h.len;
    r->got_tag = e->h.tag;
    if (have > 0)
        memcpy(r->buf, e->data, have);
    if (e == p->ecur) {
        p->ecur = NULL;
        p->rcur = r;
        sh->tcp->active++;
    } else {
        r->done = true;
        r->status = e->h.len > r->expect ? UCS_ERR_MESSAGE_TRUNCATED : UCS_OK;
    }
    free(e->data);
    free(e);
}

/* Posted: its message is taken, read or coming, and its marker posted. */
static dt_status posted(dt_comm *c, dt_ucx_req *r, void **req)
{
    dt_status st = dt__ucx_req_test(c, r); /* releases r unless in progress */
    *req = st == DT_IN_PROGRESS ? r : NULL;
    return st == DT_IN_PROGRESS ? DT_OK : st;
}

dt_status dt__ucx_tcp_irecv(dt_comm *c, void *buf, size_t bytes, int wp, uint32_t tag, void **req)
{
    dt_ucx_comm *uc = c->impl;
    dt_ucx_shared *sh = uc->shared;
    dt_tcp_peer *p = dt__tcp_peer_of(sh, wp);
    *req = NULL;
    if (p->fd < 0 && p->eq == NULL)
        return lost(p, "receive from");
    dt_ucx_req *r = dt__ucx_req_new(sh);
    if (r == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "ucx: no memory for a receive request");
    r->tcp = true;
    r->is_recv = true;
    r->world_peer = wp;
    r->buf = buf;
    r->expect = bytes;
    r->comm = (uint16_t)uc->id;
    r->tag = r->got_tag = tag;
    /* the marker's place among UCX's receives of this tag is now */
    dt_status st = dt__ucx_tcp_mark_post(c, r);
    if (st != DT_OK) {
        dt__ucx_req_put(r);
        return st;
    }
    for (dt_tcp_early **ep = &p->eq; *ep != NULL; ep = &(*ep)->next) {
        dt_tcp_early *e = *ep;
        if (e->h.comm != r->comm || (e->h.tag ^ tag) & dt__tag_match_mask(tag))
            continue;
        *ep = e->next;
        if (p->eq_end == &e->next)
            p->eq_end = ep;
        take_early(sh, p, e, r);
        return posted(c, r, req);
    }
    if (p->fd < 0) { /* queued nowhere yet: only the marker to take back */
        dt__ucx_req_cancel(c, r->mark);
        dt__ucx_req_put(r);
        return lost(p, "receive from");
    }
    *p->rq_end = r;
    p->rq_end = &r->next_q;
    sh->tcp->active++;
    return posted(c, r, req);
}

/* A cancelled send whose first bytes are on the wire: the rest is copied and
 * still sent (the peer reads it to its sink), so the stream stays in step. */
static void orphan_head(dt_ucx_shared *sh, dt_tcp_peer *p, dt_ucx_req *r)
{
    size_t left = HDR + r->expect - p->sent;
    char *o = malloc(left);
    if (o == NULL) {
        peer_fail(sh, p, "no memory to finish a cancelled send");
        return;
    }
    size_t h = p->sent < HDR ? HDR - p->sent : 0;
    memcpy(o, (char *)&p->shdr + (HDR - h), h);
    if (left > h) /* a 0-byte message has no buffer */
        memcpy(o + h, (char *)r->buf + (r->expect - (left - h)), left - h);
    p->orphan = o;
    p->orphan_len = left;
    p->sent = 0;
}

void dt__ucx_tcp_cancel(dt_comm *c, dt_ucx_req *r)
{
    dt_ucx_shared *sh = ((dt_ucx_comm *)c->impl)->shared;
    if (r->mark != NULL) /* UCX's: it frees it once UCX lets go */
        dt__ucx_req_cancel(c, r->mark);
    r->mark = NULL;
    if (!r->done) {
        dt_tcp_peer *p = dt__tcp_peer_of(sh, r->world_peer);
        if (r->is_recv) {
            if (p->rcur == r)
                p->rcur = NULL; /* the rest of its message goes to the sink */
            else
                unlink_req(&p->rq, &p->rq_end, r);
        } else {
            if (p->sq == r && p->sent > 0 && p->orphan == NULL)
                orphan_head(sh, p, r);
            unlink_req(&p->sq, &p->sq_end, r);
            head_hdr(p);
        }
        if (!r->done) /* orphan_head may have failed the peer, finishing it */
            sh->tcp->active--;
    }
    dt__ucx_req_put(r);
}

struct pollfd *dt__ucx_tcp_pollset(dt_ucx_shared *sh, struct pollfd *two, int *n)
{
    dt_ucx_tcp *t = sh->tcp;
    if (t == NULL || !t->on) {
        *n = 2;
        return two;
    }
    for (int i = 0; i < t->n; i++) {
        const dt_tcp_peer *p = &t->peers[i];
        bool out = p->sq != NULL || p->orphan != NULL;
        t->pfd[2 + i] = (struct pollfd){.fd = p->fd, .events = POLLIN | (out ? POLLOUT : 0)};
    }
    *n = 2 + t->n;
    return t->pfd;
}

/*
 * A direct message under way takes tens of microseconds or more, and the
 * kernel wakes a poll() on its socket as its bytes come; polling it meanwhile
 * is a recv system call each time, CPU taken from the peer ranks' TCP work
 * on a shared core.
 */
bool dt__ucx_tcp_busy(const dt_ucx_shared *sh)
{
    const dt_ucx_tcp *t = sh->tcp;
    return t != NULL && t->on && (t->active > 0 || t->partial > 0);
}

void dt__ucx_tcp_polled(dt_ucx_shared *sh, int rc)
{
    if (sh->tcp != NULL && rc > 0)
        sh->tcp->kick = true;
}
