/* dt_store_*: the client side of the TCP store (and starting the server on rank 0). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/store/store_net.h"
#include "comm/store/store_proto.h"
#include "comm/store/store_server.h"
#include "comm/store/store_server_impl.h"
#include "core/config.h"
#include "core/error.h"
#include "dtensor/store.h"

/* The serving rank's destroy waits at most this long for the other clients to go. */
#define DT_STORE_LINGER_MAX_S 30.0

struct dt_store {
    int fd;
    dt_store_server *server; /* non-NULL on the serving rank */
    double timeout_s;
    char host[256];
    int port;
};

/* Where the serving rank's own client connects: the bind address, or loopback for a wildcard. */
static const char *self_host(const char *bind)
{
    if (bind[0] == '\0' || strcmp(bind, "0.0.0.0") == 0 || strcmp(bind, "*") == 0)
        return "127.0.0.1";
    if (strcmp(bind, "::") == 0)
        return "::1";
    return bind;
}

/* Send a request, receive the reply: status out, payload (owned) out. */
static dt_status rpc(dt_store *s, const void *a, size_t alen, const void *b, size_t blen,
                     double wait_s, const char *what, uint8_t *status, uint8_t **payload,
                     size_t *plen)
{
    double deadline = dt__clock_now() + (wait_s < 0 ? 1e9 : wait_s) + s->timeout_s;
    uint8_t *body = NULL;
    size_t len = 0;
    if (s->fd < 0)
        return DT_ERR(DT_ERR_PEER_LOST, "%s: the connection to the store at %s:%d failed earlier",
                      what, s->host, s->port);
    dt_status st = dt__store_send_frame(s->fd, a, alen, b, blen, deadline, what);
    if (st == DT_OK)
        st = dt__store_recv_frame(s->fd, deadline, what, &body, &len);
    if (st != DT_OK) { /* a late reply would desynchronise the stream: give it up */
        close(s->fd);
        s->fd = -1;
        return st;
    }
    *status = body[0];
    *plen = len - 1;
    memmove(body, body + 1, len - 1);
    *payload = body;
    return DT_OK;
}

static dt_status reply_error(dt_store *s, uint8_t status, const uint8_t *p, size_t n,
                             const char *what, const char *key)
{
    switch (status) {
    case DT_STORE_REPLY_AUTH_FAILED:
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: the store at %s:%d refused our job token (DT_JOB_TOKEN differs from "
                      "the serving rank's)",
                      what, s->host, s->port);
    case DT_STORE_REPLY_NOT_INTEGER:
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: key '%s' does not hold an integer (or it would "
                      "overflow)",
                      what, key);
    case DT_STORE_REPLY_TIMEOUT:
        return DT_ERR(DT_ERR_TIMEOUT, "%s: timed out waiting for key '%.*s' in the store at %s:%d",
                      what, (int)n, (const char *)p, s->host, s->port);
    default:
        return DT_ERR(DT_ERR_BACKEND, "%s: the store at %s:%d rejected the request: %.*s", what,
                      s->host, s->port, (int)n, (const char *)p);
    }
}

dt_status dt__store_local_addr(const dt_store *s, struct sockaddr_storage *out, socklen_t *len)
{
    *len = sizeof(*out);
    if (s->fd < 0 || getsockname(s->fd, (struct sockaddr *)out, len) != 0)
        return DT_ERR(DT_ERR_SYSTEM, "store: no local address of the connection to %s:%d", s->host,
                      s->port);
    return DT_OK;
}

static dt_status authenticate(dt_store *s, const char *token)
{
    uint8_t op = DT_STORE_OP_AUTH, status, *p = NULL;
    size_t n;
    DT_CHECK(rpc(s, &op, 1, token, strlen(token), 0, "dt_store_create", &status, &p, &n));
    dt_status st =
        status == DT_STORE_REPLY_OK ? DT_OK : reply_error(s, status, p, n, "dt_store_create", "");
    free(p);
    return st;
}

static dt_status validate(const char *host, int port, bool is_server, const char *token,
                          double timeout_s)
{
    if (port < 0 || port > 65535 || (port == 0 && !is_server))
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_store_create: port %d is invalid (%s)", port,
                      port == 0 ? "set MASTER_PORT or params.port" : "must be 1..65535");
    if (!(timeout_s > 0))
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_store_create: timeout_s %g must be > 0", timeout_s);
    if (host == NULL || host[0] == '\0' || strlen(host) >= 256)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_store_create: host '%s' is empty or too long",
                      host ? host : "(null)");
    if (strlen(token) > 255)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_store_create: the job token is %zu chars (max 255)",
                      strlen(token));
    return DT_OK;
}

/* Whether @p bind accepts connections from this host only. */
static bool loopback(const char *bind)
{
    return strncmp(bind, "127.", 4) == 0 || strcmp(bind, "localhost") == 0 ||
           strcmp(bind, "::1") == 0;
}

dt_status dt_store_create(const dt_store_params *params, dt_store **out)
{
    DT_ARG_NOT_NULL(out);
    /* MASTER_ADDR/MASTER_PORT are launcher variables, not dtensor tunables: read directly. */
    const char *env_host = getenv("MASTER_ADDR");
    const char *env_port = getenv("MASTER_PORT");
    const char *host = DT_PARAM_VALUE(params, host, DT_STORE_PARAM_FIELD_HOST,
                                      env_host && env_host[0] ? env_host : "127.0.0.1");
    int env_port_v = 0;
    if (env_port != NULL && env_port[0] != '\0' &&
        !(params != NULL && (params->field_mask & DT_STORE_PARAM_FIELD_PORT))) {
        char *end;
        long v = strtol(env_port, &end, 10);
        if (end == env_port || *end != '\0' || v < 1 || v > 65535)
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_store_create: MASTER_PORT='%s' is not a port "
                          "(1..65535)",
                          env_port);
        env_port_v = (int)v;
    }
    int port = DT_PARAM_VALUE(params, port, DT_STORE_PARAM_FIELD_PORT, env_port_v);
    bool is_server = DT_PARAM_VALUE(params, is_server, DT_STORE_PARAM_FIELD_IS_SERVER, false);
    const char *token =
        DT_PARAM_VALUE(params, token, DT_STORE_PARAM_FIELD_TOKEN, dt__config_str("DT_JOB_TOKEN"));
    double timeout_s = DT_PARAM_VALUE(params, timeout_s, DT_STORE_PARAM_FIELD_TIMEOUT,
                                      dt__config_double("DT_TIMEOUT_S"));
    const char *bind =
        DT_PARAM_VALUE(params, bind, DT_STORE_PARAM_FIELD_BIND, dt__config_str("DT_STORE_BIND"));
    if (token == NULL)
        token = "";
    if (bind == NULL)
        bind = "127.0.0.1";
    DT_CHECK(validate(host, port, is_server, token, timeout_s));
    /* Without a token any client that reaches the port joins (or poisons) the
     * job: only a store that other hosts cannot reach may go without one. */
    if (is_server && token[0] == '\0' && !loopback(bind))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_store_create: no job token for a store bound to %s, which other "
                      "hosts can reach: export the same DT_JOB_TOKEN on every node (dtrun "
                      "makes one), or bind 127.0.0.1 (DT_STORE_BIND) for a one-host job",
                      bind);

    dt_status st;
    dt_store *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_store_create: no memory");
    s->fd = -1;
    s->timeout_s = timeout_s;
    s->port = port;
    snprintf(s->host, sizeof(s->host), "%s", host);
    if (is_server) {
        double stall = dt__config_double("DT_STORE_STALL_S");
        DT_CHECK_GOTO(dt__store_server_start(bind, port, token, stall > 0 ? stall : 10, &s->server),
                      st, err_free);
        s->port = dt__store_server_port(s->server);
        snprintf(s->host, sizeof(s->host), "%s", self_host(bind));
    }
    DT_CHECK_GOTO(dt__store_connect(s->host, s->port, dt__clock_now() + timeout_s, &s->fd), st,
                  err_stop_server);
    DT_CHECK_GOTO(authenticate(s, token), st, err_close);
    *out = s;
    return DT_OK;

err_close:
    close(s->fd);
err_stop_server:
    dt__store_server_stop(s->server, 0);
err_free:
    free(s);
    return st;
}

void dt__store_destroy_linger(dt_store *store, double max_linger_s)
{
    if (store == NULL)
        return;
    if (store->fd >= 0)
        close(store->fd);
    /* Ranks may still be finishing their last request: serve until they hang up. */
    if (max_linger_s < 0)
        max_linger_s = DT_STORE_LINGER_MAX_S;
    double linger = store->timeout_s < max_linger_s ? store->timeout_s : max_linger_s;
    dt__store_server_stop(store->server, linger);
    free(store);
}

void dt_store_destroy(dt_store *store)
{
    dt__store_destroy_linger(store, -1);
}

int dt_store_port(const dt_store *store)
{
    return store != NULL ? store->port : 0;
}

/* op, then the key as a length-prefixed string, after @p pre (0..8 bytes of fixed fields). */
static size_t pack_key(uint8_t *hdr, uint8_t op, const uint8_t *pre, size_t prelen, size_t klen)
{
    hdr[0] = op;
    if (prelen > 0)
        memcpy(hdr + 1, pre, prelen);
    dt__be32_put(hdr + 1 + prelen, (uint32_t)klen);
    return 1 + prelen + 4;
}

static dt_status check_key(const char *fn, const char *key)
{
    if (key == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: key is NULL", fn);
    if (strlen(key) > 65536)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: key of %zu bytes is longer than 65536", fn,
                      strlen(key));
    return DT_OK;
}

dt_status dt_store_set(dt_store *store, const char *key, const void *value, size_t len)
{
    DT_ARG_NOT_NULL(store);
    DT_CHECK(check_key("dt_store_set", key));
    if (value == NULL && len > 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_store_set: value is NULL with len %zu", len);
    size_t klen = strlen(key);
    if (len > DT_STORE_FRAME_MAX - 16 - klen)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_store_set: value of %zu bytes for key '%s' exceeds "
                      "the store's limit",
                      len, key);
    uint8_t *msg = malloc(5 + klen + len);
    if (msg == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_store_set: no memory for %zu bytes", len);
    size_t off = pack_key(msg, DT_STORE_OP_SET, NULL, 0, klen);
    memcpy(msg + off, key, klen);
    if (len > 0)
        memcpy(msg + off + klen, value, len);
    uint8_t status, *p = NULL;
    size_t n;
    dt_status st = rpc(store, msg, off + klen + len, NULL, 0, 0, "dt_store_set", &status, &p, &n);
    free(msg);
    if (st == DT_OK && status != DT_STORE_REPLY_OK)
        st = reply_error(store, status, p, n, "dt_store_set", key);
    free(p);
    return st;
}

dt_status dt_store_get(dt_store *store, const char *key, void **value, size_t *len)
{
    DT_ARG_NOT_NULL(store);
    DT_ARG_NOT_NULL(value);
    DT_ARG_NOT_NULL(len);
    DT_CHECK(check_key("dt_store_get", key));
    uint8_t hdr[16], pre[8], status, *p = NULL;
    size_t n;
    dt__be64_put(pre, (uint64_t)(int64_t)(store->timeout_s * 1000.0));
    size_t off = pack_key(hdr, DT_STORE_OP_GET, pre, 8, strlen(key));
    DT_CHECK(
        rpc(store, hdr, off, key, strlen(key), store->timeout_s, "dt_store_get", &status, &p, &n));
    if (status != DT_STORE_REPLY_OK) {
        dt_status st = reply_error(store, status, p, n, "dt_store_get", key);
        free(p);
        return st;
    }
    *value = p;
    *len = n;
    return DT_OK;
}

dt_status dt_store_wait(dt_store *store, const char *const *keys, int n, double timeout_s)
{
    DT_ARG_NOT_NULL(store);
    if (n < 0 || (n > 0 && keys == NULL))
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_store_wait: %d keys at %p", n, (const void *)keys);
    if (n == 0)
        return DT_OK;
    double t = timeout_s < 0 ? store->timeout_s : timeout_s;
    size_t total = 13;
    for (int i = 0; i < n; i++) {
        DT_CHECK(check_key("dt_store_wait", keys[i]));
        total += 4 + strlen(keys[i]);
    }
    if (total > DT_STORE_FRAME_MAX)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_store_wait: %d keys make a %zu-byte request", n,
                      total);
    uint8_t *msg = malloc(total), status, *p = NULL;
    if (msg == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_store_wait: no memory for %d keys", n);
    msg[0] = DT_STORE_OP_WAIT;
    dt__be64_put(msg + 1, (uint64_t)(int64_t)(t * 1000.0));
    dt__be32_put(msg + 9, (uint32_t)n);
    size_t off = 13, rn;
    for (int i = 0; i < n; i++) {
        size_t kl = strlen(keys[i]);
        dt__be32_put(msg + off, (uint32_t)kl);
        memcpy(msg + off + 4, keys[i], kl);
        off += 4 + kl;
    }
    dt_status st = rpc(store, msg, off, NULL, 0, t, "dt_store_wait", &status, &p, &rn);
    free(msg);
    if (st == DT_OK && status != DT_STORE_REPLY_OK)
        st = reply_error(store, status, p, rn, "dt_store_wait", keys[0]);
    free(p);
    return st;
}

dt_status dt_store_add(dt_store *store, const char *key, int64_t delta, int64_t *new_value)
{
    DT_ARG_NOT_NULL(store);
    DT_CHECK(check_key("dt_store_add", key));
    uint8_t hdr[16], pre[8], status, *p = NULL;
    size_t n;
    dt__be64_put(pre, (uint64_t)delta);
    size_t off = pack_key(hdr, DT_STORE_OP_ADD, pre, 8, strlen(key));
    DT_CHECK(rpc(store, hdr, off, key, strlen(key), 0, "dt_store_add", &status, &p, &n));
    dt_status st = DT_OK;
    if (status != DT_STORE_REPLY_OK)
        st = reply_error(store, status, p, n, "dt_store_add", key);
    else if (n != 8)
        st = DT_ERR(DT_ERR_FORMAT, "dt_store_add: reply of %zu bytes for key '%s'", n, key);
    else if (new_value != NULL)
        *new_value = (int64_t)dt__be64_get(p);
    free(p);
    return st;
}

dt_status dt_store_delete_prefix(dt_store *store, const char *prefix, int64_t *deleted)
{
    DT_ARG_NOT_NULL(store);
    DT_CHECK(check_key("dt_store_delete_prefix", prefix));
    uint8_t hdr[8], status, *p = NULL;
    size_t n;
    size_t off = pack_key(hdr, DT_STORE_OP_DELPFX, NULL, 0, strlen(prefix));
    DT_CHECK(
        rpc(store, hdr, off, prefix, strlen(prefix), 0, "dt_store_delete_prefix", &status, &p, &n));
    dt_status st = DT_OK;
    if (status != DT_STORE_REPLY_OK || n != 8)
        st = reply_error(store, status, p, n, "dt_store_delete_prefix", prefix);
    else if (deleted != NULL)
        *deleted = (int64_t)dt__be64_get(p);
    free(p);
    return st;
}

dt_status dt_store_allgather(dt_store *store, const char *prefix, int rank, int size,
                             const void *mine, size_t len, void *all)
{
    DT_ARG_NOT_NULL(store);
    DT_ARG_NOT_NULL(prefix);
    if (size < 1 || rank < 0 || rank >= size)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_store_allgather: rank %d of size %d", rank, size);
    if (len > 0 && (mine == NULL || all == NULL))
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_store_allgather: NULL buffer for %zu bytes", len);
    size_t kcap = strlen(prefix) + 16;
    char *key = malloc(kcap);
    if (key == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_store_allgather: no memory");
    dt_status st;
    snprintf(key, kcap, "%s/%d", prefix, rank);
    DT_CHECK_GOTO(dt_store_set(store, key, mine, len), st, out_free_key);
    for (int r = 0; r < size; r++) {
        void *v = NULL;
        size_t n = 0;
        snprintf(key, kcap, "%s/%d", prefix, r);
        DT_CHECK_GOTO(dt_store_get(store, key, &v, &n), st, out_free_key);
        if (n != len) {
            free(v);
            st = DT_ERR(DT_ERR_FORMAT,
                        "dt_store_allgather: rank %d published %zu bytes under "
                        "'%s', expected %zu",
                        r, n, prefix, len);
            goto out_free_key;
        }
        if (len > 0)
            memcpy((uint8_t *)all + (size_t)r * len, v, len);
        free(v);
    }
    st = DT_OK;
out_free_key:
    free(key);
    return st;
}
