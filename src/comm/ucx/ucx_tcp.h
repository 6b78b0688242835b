/*
 * Direct TCP between hosts (ucx_tcp.c): large messages to a rank on another
 * host bypass UCX. One connected socket per pair of ranks on different
 * hosts, set up at bootstrap (the lower rank listens, the higher connects and
 * proves it read the store, which needs the job token); a message is a
 * 16-byte header (comm, tag, length) and the bytes, written straight from
 * the user's buffer and read straight into the posted receive's (an early
 * message lands in a malloc'd buffer until its receive comes). Matching is by
 * (comm, tag) in posting order, FIFO per pair, as UCX's tags. A closed or
 * reset socket marks the peer lost. Messages under DT_TCP_DIRECT_MIN_KB stay
 * on UCX: both sides choose by the message's size, so a pair agrees when the
 * sizes do (a mismatched call across the threshold waits for the timeout
 * instead: why the path is opt-in, DT_TCP_DIRECT=1; the world agrees on it).
 */
#ifndef DT_COMM_UCX_TCP_H
#define DT_COMM_UCX_TCP_H

#include <poll.h>

#include "comm/ucx/ucx_impl.h"

struct dt_store;

/* The wire: before each message's bytes. */
typedef struct dt_tcp_hdr {
    uint32_t comm, tag;
    uint64_t len;
} dt_tcp_hdr;

/* A message that came before its receive (or is still coming). */
typedef struct dt_tcp_early {
    struct dt_tcp_early *next;
    dt_tcp_hdr h;
    size_t have; /* bytes read so far */
    char *data;
} dt_tcp_early;

/* One socket to a rank on another host. */
typedef struct dt_tcp_peer {
    int fd;           /* -1: none (off, or closed) */
    const char *gone; /* why it closed */
    int wp;           /* its world rank */
    /* sends in order (linked by next_q); the head is being written */
    dt_ucx_req *sq, **sq_end;
    dt_tcp_hdr shdr; /* the head's header */
    size_t sent;     /* of the head: header and payload bytes written */
    char *orphan;    /* a cancelled head's unsent bytes, still owed to the stream */
    size_t orphan_len;
    /* posted receives not matched yet, and early messages, both in order */
    dt_ucx_req *rq, **rq_end;
    dt_tcp_early *eq, **eq_end;
    /* the message being read: header, then its bytes into rcur, ecur or nowhere */
    dt_tcp_hdr rhdr;
    size_t rhdr_got, body_got;
    bool in_body;
    dt_ucx_req *rcur;
    dt_tcp_early *ecur;
} dt_tcp_peer;

typedef struct dt_ucx_tcp {
    bool ready;         /* this rank connected to all its peers on other hosts */
    bool on;            /* agreed world-wide */
    size_t min_bytes;   /* messages from this size on go direct (agreed) */
    int n;              /* peers on other hosts */
    dt_tcp_peer *peers; /* them */
    int *slot;          /* world rank -> index in peers, -1 for this host */
    int active;         /* queued sends and posted receives */
    int partial;        /* messages half read (early ones, or to the sink) */
    unsigned idle;      /* progress calls since the sockets were last read */
    bool kick;          /* a socket was ready after a sleep */
    struct pollfd *pfd; /* 2 + n: the sleep's poll set */
    char *sink;         /* where bytes nobody wants are read to */
    unsigned long long sent_msgs, sent_bytes; /* for the log at teardown */
} dt_ucx_tcp;

/* Bootstrap, collective over the store (connect_all, after the peers are
 * known): listen, swap addresses, connect. A failure only leaves the path
 * off on this rank (logged); dt__ucx_tcp_agree then turns it off everywhere. */
dt_status dt__ucx_tcp_setup(dt_ucx_shared *sh, struct dt_store *store, double timeout_s);
/* Collective over the world: use the direct path only if every rank has it. */
dt_status dt__ucx_tcp_agree(dt_comm *world);
void dt__ucx_tcp_close(dt_ucx_shared *sh);
/* Whether a message of @p bytes to or from world rank @p wp goes direct. */
bool dt__ucx_tcp_carries(const dt_ucx_shared *sh, int wp, size_t bytes);
dt_status dt__ucx_tcp_isend(dt_comm *c, const void *buf, size_t bytes, int wp, uint32_t tag,
                            void **req);
dt_status dt__ucx_tcp_irecv(dt_comm *c, void *buf, size_t bytes, int wp, uint32_t tag, void **req);
/* Take @p r out of the path; the stream stays in step (see ucx_tcp.c). */
void dt__ucx_tcp_cancel(dt_ucx_shared *sh, dt_ucx_req *r);
/* Write queued sends and read arrived bytes: how many requests completed. */
int dt__ucx_tcp_progress(dt_ucx_shared *sh);
/* The poll set for a sleep: the sockets from index 2 on, slots 0 and 1 left
 * for the caller; @p two when there are no sockets. */
struct pollfd *dt__ucx_tcp_pollset(dt_ucx_shared *sh, struct pollfd *two, int *n);
/* Whether a wait should sleep on the sockets at once, not spin first. */
bool dt__ucx_tcp_busy(const dt_ucx_shared *sh);
/* After the poll: look at the sockets on the next progress. */
void dt__ucx_tcp_polled(dt_ucx_shared *sh, int rc);

#endif
