/*
 * The "self" backend: a comm of one rank with no transport (dt_init with a
 * world of size 1). Collectives never reach it (the dispatcher short-cuts
 * size 1 into local copies); point-to-point to rank 0 matches sends with
 * receives of the same tag in posting order, in memory.
 */
#include "comm/comm_impl.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

typedef struct self_req {
    struct self_req *next;
    bool is_send, done;
    dt_status status;
    void *buf;
    size_t bytes;
    uint32_t tag;
} self_req;

typedef struct self_state {
    self_req *sends, *recvs; /* unmatched, in posting order */
    uint32_t next_id;
} self_state;

static void unlink_req(self_req **head, self_req *r)
{
    for (self_req **p = head; *p != NULL; p = &(*p)->next) {
        if (*p == r) {
            *p = r->next;
            return;
        }
    }
}

static dt_status post(dt_comm *c, void *buf, size_t bytes, uint32_t tag, bool is_send, void **out)
{
    self_state *st = c->impl;
    self_req *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "self comm: no memory for a request");
    *r = (self_req){.is_send = is_send, .buf = buf, .bytes = bytes, .tag = tag};
    self_req **other = is_send ? &st->recvs : &st->sends;
    for (self_req *m = *other; m != NULL; m = m->next) {
        if (m->tag != tag)
            continue;
        unlink_req(other, m);
        self_req *snd = is_send ? r : m, *rcv = is_send ? m : r;
        if (snd->bytes != rcv->bytes) {
            rcv->status = DT_ERR(DT_ERR_INVALID_ARG,
                                 "self comm: send of %zu bytes matched a "
                                 "receive of %zu bytes (tag %u)",
                                 snd->bytes, rcv->bytes, tag & DT__TAG_VALUE_MASK);
            snd->status = rcv->status;
        } else if (snd->bytes > 0) {
            memcpy(rcv->buf, snd->buf, snd->bytes);
        }
        m->done = r->done = true;
        *out = r;
        return DT_OK;
    }
    self_req **tail = is_send ? &st->sends : &st->recvs;
    while (*tail != NULL)
        tail = &(*tail)->next;
    *tail = r;
    *out = r;
    return DT_OK;
}

static dt_status self_isend(dt_comm *c, const void *buf, size_t bytes, int peer, uint32_t tag,
                            void **req)
{
    (void)peer;
    return post(c, (void *)buf, bytes, tag, true, req);
}

static dt_status self_irecv(dt_comm *c, void *buf, size_t bytes, int peer, uint32_t tag, void **req)
{
    (void)peer;
    return post(c, buf, bytes, tag, false, req);
}

static dt_status self_test(dt_comm *c, void *req)
{
    (void)c;
    self_req *r = req;
    if (!r->done)
        return DT_IN_PROGRESS;
    dt_status st = r->status;
    free(r);
    return st;
}

static void self_cancel(dt_comm *c, void *req)
{
    self_state *st = c->impl;
    self_req *r = req;
    if (!r->done)
        unlink_req(r->is_send ? &st->sends : &st->recvs, r);
    free(r);
}

static dt_status self_progress(dt_comm *c, double wait_s)
{
    (void)c;
    (void)wait_s; /* nothing can arrive from elsewhere: the caller's deadline decides */
    return DT_OK;
}

static dt_status self_split(dt_comm *c, int color, int key, dt_comm **out)
{
    (void)key;
    if (color == DT_COMM_SPLIT_NOCOLOR) {
        *out = NULL;
        return DT_OK;
    }
    dt_comm *n = NULL;
    DT_CHECK(dt__comm_self_create(&n));
    n->timeout_s = c->timeout_s;
    *out = n;
    return DT_OK;
}

static void self_destroy(dt_comm *c)
{
    self_state *st = c->impl;
    while (st->sends != NULL) {
        self_req *r = st->sends;
        st->sends = r->next;
        free(r);
    }
    while (st->recvs != NULL) {
        self_req *r = st->recvs;
        st->recvs = r->next;
        free(r);
    }
    free(st);
    free(c);
}

static const dt_comm_ops self_ops = {
    .name = "self",
    .isend = self_isend,
    .irecv = self_irecv,
    .req_test = self_test,
    .req_cancel = self_cancel,
    .progress = self_progress,
    .split = self_split,
    .destroy = self_destroy,
};

dt_status dt__comm_self_create(dt_comm **out)
{
    dt_comm *c = calloc(1, sizeof(*c));
    self_state *st = calloc(1, sizeof(*st));
    if (c == NULL || st == NULL) {
        free(c);
        free(st);
        return DT_ERR(DT_ERR_NO_MEMORY, "self comm: no memory");
    }
    c->ops = &self_ops;
    c->impl = st;
    c->rank = 0;
    c->size = 1;
    c->timeout_s = 300;
    *out = c;
    return DT_OK;
}
