/* The store server's request handlers: AUTH, SET, GET, WAIT, ADD, DELPFX. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/store/store_server_impl.h"
#include "core/log.h"

/* Constant-time in the token's content, so timing does not leak it. */
static bool token_ok(const char *want, const uint8_t *got, size_t glen)
{
    size_t wlen = strlen(want);
    if (wlen == 0)
        return true;
    unsigned diff = (unsigned)(wlen ^ glen);
    for (size_t i = 0; i < wlen; i++)
        diff |= (unsigned)(want[i] ^ (i < glen ? got[i] : 0));
    return diff == 0;
}

static void bad_request(dt_store_server *s, dt_store_conn *c, const char *why)
{
    dt__store_reply(s, c, DT_STORE_REPLY_BAD_REQUEST, why, strlen(why), NULL, 0);
    dt__store_client_drop(s, c, why);
}

/* The first key of a GET/WAIT body that is not in the table; NULL when all are.
 * Sets *malformed for a body that does not parse. */
static const uint8_t *first_missing(dt_store_server *s, const uint8_t *body, size_t len,
                                    uint32_t *mlen, bool *malformed)
{
    dt_store_rd r = {body + 1, len - 1, 0};
    (void)dt__store_rd_u64(&r); /* timeout */
    uint32_t n = body[0] == DT_STORE_OP_GET ? 1 : dt__store_rd_u32(&r);
    const uint8_t *missing = NULL;
    for (uint32_t i = 0; i < n && !r.bad; i++) {
        uint32_t kl;
        const uint8_t *k = dt__store_rd_str(&r, &kl);
        if (k != NULL && missing == NULL && dt__store_kv_find(&s->kv, k, kl) == NULL) {
            missing = k;
            *mlen = kl;
        }
    }
    *malformed = r.bad || r.left != 0;
    return missing;
}

/* Answer a GET/WAIT whose keys are all present. */
static void answer_wait(dt_store_server *s, dt_store_conn *c, const uint8_t *body, size_t len)
{
    if (body[0] == DT_STORE_OP_WAIT) {
        dt__store_reply(s, c, DT_STORE_REPLY_OK, NULL, 0, NULL, 0);
        return;
    }
    dt_store_rd r = {body + 9, len - 9, 0};
    uint32_t kl;
    const uint8_t *k = dt__store_rd_str(&r, &kl);
    dt_store_kv_entry *e = dt__store_kv_find(&s->kv, k, kl);
    dt__store_reply(s, c, DT_STORE_REPLY_OK, e->val, e->vlen, NULL, 0);
}

static void unpark(dt_store_conn *c)
{
    free(c->park_body);
    c->park_body = NULL;
    c->parked = false;
}

/* A key changed: answer every parked request it completes. */
static void wake_parked(dt_store_server *s)
{
    for (size_t i = 0; i < s->nconns; i++) {
        dt_store_conn *c = &s->conns[i];
        if (c->fd < 0 || !c->parked)
            continue;
        uint32_t ml;
        bool malformed;
        if (first_missing(s, c->park_body, c->park_len, &ml, &malformed) != NULL)
            continue;
        answer_wait(s, c, c->park_body, c->park_len);
        unpark(c);
    }
}

void dt__store_park_expire(dt_store_server *s, dt_store_conn *c)
{
    uint32_t ml = 0;
    bool malformed;
    const uint8_t *m = first_missing(s, c->park_body, c->park_len, &ml, &malformed);
    if (m != NULL)
        dt__store_reply(s, c, DT_STORE_REPLY_TIMEOUT, m, ml, NULL, 0);
    else
        answer_wait(s, c, c->park_body, c->park_len);
    unpark(c);
}

/* GET and WAIT: answer now, or park until the keys arrive or the deadline. */
static void handle_wait(dt_store_server *s, dt_store_conn *c, uint8_t *body, size_t len)
{
    uint32_t ml;
    bool malformed;
    const uint8_t *missing = first_missing(s, body, len, &ml, &malformed);
    if (malformed) {
        free(body);
        bad_request(s, c, "malformed GET/WAIT request");
        return;
    }
    if (missing == NULL) {
        answer_wait(s, c, body, len);
        free(body);
        return;
    }
    int64_t timeout_ms = (int64_t)dt__be64_get(body + 1);
    c->parked = true;
    c->park_body = body;
    c->park_len = len;
    c->park_deadline = timeout_ms < 0 ? 0 : dt__clock_now() + (double)timeout_ms / 1000.0;
    if (timeout_ms == 0)
        dt__store_park_expire(s, c);
}

static bool parse_i64(const uint8_t *p, size_t n, int64_t *out)
{
    char buf[32];
    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, p, n);
    buf[n] = '\0';
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *out = v;
    return true;
}

static void handle_add(dt_store_server *s, dt_store_conn *c, dt_store_rd *r)
{
    int64_t delta = (int64_t)dt__store_rd_u64(r);
    uint32_t kl;
    const uint8_t *k = dt__store_rd_str(r, &kl);
    if (r->bad || r->left != 0) {
        bad_request(s, c, "malformed ADD request");
        return;
    }
    int64_t cur = 0;
    dt_store_kv_entry *e = dt__store_kv_find(&s->kv, k, kl);
    if (e != NULL && !parse_i64(e->val, e->vlen, &cur)) {
        dt__store_reply(s, c, DT_STORE_REPLY_NOT_INTEGER, NULL, 0, NULL, 0);
        return;
    }
    if ((delta > 0 && cur > INT64_MAX - delta) || (delta < 0 && cur < INT64_MIN - delta)) {
        dt__store_reply(s, c, DT_STORE_REPLY_NOT_INTEGER, NULL, 0, NULL, 0);
        return;
    }
    cur += delta;
    char txt[32];
    int tl = snprintf(txt, sizeof(txt), "%" PRId64, cur);
    if (!dt__store_kv_set(&s->kv, k, kl, (const uint8_t *)txt, (size_t)tl)) {
        bad_request(s, c, "server out of memory");
        return;
    }
    uint8_t be[8];
    dt__be64_put(be, (uint64_t)cur);
    dt__store_reply(s, c, DT_STORE_REPLY_OK, be, 8, NULL, 0);
    wake_parked(s);
}

static void handle_authed(dt_store_server *s, dt_store_conn *c, uint8_t *body, size_t len)
{
    dt_store_rd r = {body + 1, len - 1, 0};
    uint32_t kl;
    const uint8_t *k;
    uint8_t be[8];
    switch (body[0]) {
    case DT_STORE_OP_SET:
        k = dt__store_rd_str(&r, &kl);
        if (r.bad) {
            bad_request(s, c, "malformed SET request");
        } else if (!dt__store_kv_set(&s->kv, k, kl, r.p, r.left)) {
            bad_request(s, c, "server out of memory");
        } else {
            dt__store_reply(s, c, DT_STORE_REPLY_OK, NULL, 0, NULL, 0);
            wake_parked(s);
        }
        break;
    case DT_STORE_OP_ADD:
        handle_add(s, c, &r);
        break;
    case DT_STORE_OP_DELPFX:
        k = dt__store_rd_str(&r, &kl);
        if (r.bad || r.left != 0) {
            bad_request(s, c, "malformed DELPFX request");
        } else {
            dt__be64_put(be, (uint64_t)dt__store_kv_delete_prefix(&s->kv, k, kl));
            dt__store_reply(s, c, DT_STORE_REPLY_OK, be, 8, NULL, 0);
        }
        break;
    default: {
        char why[48];
        snprintf(why, sizeof(why), "unknown opcode %u", body[0]);
        bad_request(s, c, why);
    }
    }
    free(body);
}

void dt__store_dispatch(dt_store_server *s, dt_store_conn *c, uint8_t *body, size_t len)
{
    if (!c->authed) {
        if (body[0] == DT_STORE_OP_AUTH && token_ok(s->token, body + 1, len - 1)) {
            c->authed = true;
            dt__store_reply(s, c, DT_STORE_REPLY_OK, NULL, 0, NULL, 0);
        } else {
            const char *why =
                body[0] == DT_STORE_OP_AUTH ? "wrong job token" : "first message is not AUTH";
            dt__store_reply(s, c, DT_STORE_REPLY_AUTH_FAILED, why, strlen(why), NULL, 0);
            dt__store_client_drop(s, c, why);
        }
        free(body);
        return;
    }
    if (body[0] == DT_STORE_OP_GET || body[0] == DT_STORE_OP_WAIT) {
        handle_wait(s, c, body, len); /* takes body */
        return;
    }
    handle_authed(s, c, body, len);
}
