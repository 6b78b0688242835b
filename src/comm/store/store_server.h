/*
 * The store server: one background thread, poll() over the listening socket
 * and every client. Waiting requests (GET/WAIT on missing keys) are parked and
 * answered when the keys arrive or their deadline passes; nothing busy-loops.
 * A client that fails authentication, sends an unparsable or oversized frame,
 * or stalls mid-frame (or before authenticating) for stall_s is dropped.
 */
#ifndef DT_COMM_STORE_SERVER_H
#define DT_COMM_STORE_SERVER_H

#include "dtensor/core.h"

typedef struct dt_store_server dt_store_server;

/* Bind @p bind:@p port (port 0 = any free port), start the thread. @p token
 * NULL or "" accepts any AUTH frame. */
dt_status dt__store_server_start(const char *bind, int port, const char *token, double stall_s,
                                 dt_store_server **out);
int dt__store_server_port(const dt_store_server *s);
/* Stop the thread, close every connection, free. NULL-safe. With @p linger_s
 * > 0, keep serving until every client has disconnected or linger_s passed. */
void dt__store_server_stop(dt_store_server *s, double linger_s);

typedef struct dt_store dt_store;
/* dt_store_destroy, the serving rank waiting at most @p max_linger_s for the
 * other clients to hang up (< 0: the default, at most 30 s); after a failure
 * a stopped rank never will. */
void dt__store_destroy_linger(dt_store *store, double max_linger_s);

#endif
