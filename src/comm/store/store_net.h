/* Blocking-with-deadline socket helpers for the store client. */
#ifndef DT_COMM_STORE_NET_H
#define DT_COMM_STORE_NET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "dtensor/core.h"

/* Connect to host:port, retrying refused connections (the server may not be
 * up yet) until @p deadline (monotonic seconds). DT_ERR_TIMEOUT names both. */
dt_status dt__store_connect(const char *host, int port, double deadline, int *fd_out);

/* Send one frame: header, then @p a and @p b back to back. */
dt_status dt__store_send_frame(int fd, const void *a, size_t alen, const void *b, size_t blen,
                               double deadline, const char *what);

/* Receive one frame body (caller frees). EOF = DT_ERR_PEER_LOST; deadline =
 * DT_ERR_TIMEOUT; a body over DT_STORE_FRAME_MAX = DT_ERR_FORMAT. */
dt_status dt__store_recv_frame(int fd, double deadline, const char *what, uint8_t **body,
                               size_t *len);

/* This client's end of its store connection (getsockname): the address
 * other hosts reach this one by (the direct TCP path publishes it). */
struct dt_store;
dt_status dt__store_local_addr(const struct dt_store *s, struct sockaddr_storage *out,
                               socklen_t *len);

#endif
