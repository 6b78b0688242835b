/* Server internals shared by store_server.c (I/O) and store_server_ops.c (requests). */
#ifndef DT_COMM_STORE_SERVER_IMPL_H
#define DT_COMM_STORE_SERVER_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/store/store_kv.h"
#include "comm/store/store_proto.h"
#include "comm/store/store_server.h"
#include "core/clock.h"

typedef struct dt_store_conn {
    int fd; /* -1 once dropped */
    bool authed;
    char peer[80];
    double last_rx; /* monotonic time of the last byte received */
    uint8_t hdr[DT_STORE_HDR];
    size_t hdr_got;
    uint8_t *in; /* the frame body being received */
    size_t in_len, in_need;
    uint8_t *out; /* queued replies */
    size_t out_len, out_off, out_cap;
    bool parked;        /* a GET/WAIT waits for keys */
    uint8_t *park_body; /* that request, kept to re-check and answer it */
    size_t park_len;
    double park_deadline; /* 0 = wait forever */
} dt_store_conn;

struct dt_store_server {
    int listen_fd, port;
    int wake_fd[2];
    pthread_t thread;
    char token[256];
    double stall_s;
    dt_store_kv kv;
    dt_store_conn *conns;
    size_t nconns, cap_conns;
    size_t ndropped;
    /* rejected clients are logged a few per window, the rest summarised */
    double drop_window; /* start of the current window */
    unsigned drop_logged, drop_quiet;
    char drop_last[160];        /* the last quiet drop: peer and why */
    double accept_paused_until; /* out of fds: stop polling the listener till then */
    bool lingering;             /* stopping once every client has disconnected */
    double linger_until;        /* ... or at this time */
};

/* Close and forget a misbehaving client, logging why (the store keeps serving). */
void dt__store_client_drop(dt_store_server *s, dt_store_conn *c, const char *why);
/* Queue a reply: status, then the bytes of a and b. False if the client was dropped. */
bool dt__store_reply(dt_store_server *s, dt_store_conn *c, uint8_t status, const void *a,
                     size_t alen, const void *b, size_t blen);
/* Handle one complete request body (owned: freed or parked here). */
void dt__store_dispatch(dt_store_server *s, dt_store_conn *c, uint8_t *body, size_t len);
/* A parked request's deadline passed: answer TIMEOUT naming the missing key. */
void dt__store_park_expire(dt_store_server *s, dt_store_conn *c);

#endif
