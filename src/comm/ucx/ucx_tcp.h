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
 * on UCX (and 0-byte point-to-point ones go direct, see below). Both sides
 * choose by their own size, so a mismatched call whose sizes straddle the
 * threshold would leave the message on a path its receiver does not watch;
 * markers make it fail at once instead (ucx_tcp_mark.c): each direct message
 * also sends an empty UCX message with its tag, each direct receive posts a
 * 0-byte UCX receive for it, and UCX matches them in order with the pair's
 * other messages of that tag, so a straddling pair meets a marker where it
 * expected bytes or bytes where it expected a marker. Opt-in
 * (DT_TCP_DIRECT=1; the world agrees on it): measured faster than UCX over a
 * 1 Gbit/s link, slower at 10 Gbit/s (bench/comm/results_hosts.md).
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

static inline dt_tcp_peer *dt__tcp_peer_of(const dt_ucx_shared *sh, int wp)
{
    return &sh->tcp->peers[sh->tcp->slot[wp]];
}

/* Bootstrap, collective over the store (connect_all, after the peers are
 * known): listen, swap addresses, connect. A failure only leaves the path
 * off on this rank (logged); dt__ucx_tcp_agree then turns it off everywhere. */
dt_status dt__ucx_tcp_setup(dt_ucx_shared *sh, struct dt_store *store, double timeout_s);
/* Collective over the world: use the direct path only if every rank has it. */
dt_status dt__ucx_tcp_agree(dt_comm *world);
void dt__ucx_tcp_close(dt_ucx_shared *sh);
/* Whether world rank @p wp has a direct socket (the path is on). */
bool dt__ucx_tcp_reaches(const dt_ucx_shared *sh, int wp);
/* Whether a message of @p bytes with logical @p tag to or from world rank
 * @p wp goes direct: from DT_TCP_DIRECT_MIN_KB on, and 0-byte point-to-point
 * ones, which a marker would otherwise pass for (ucx_tcp_mark.c). */
bool dt__ucx_tcp_carries(const dt_ucx_shared *sh, int wp, size_t bytes, uint32_t tag);
dt_status dt__ucx_tcp_isend(dt_comm *c, const void *buf, size_t bytes, int wp, uint32_t tag,
                            void **req);
dt_status dt__ucx_tcp_irecv(dt_comm *c, void *buf, size_t bytes, int wp, uint32_t tag, void **req);
/* Take @p r out of the path and release it; the stream stays in step (see
 * ucx_tcp.c), its marker receive is cancelled. */
void dt__ucx_tcp_cancel(dt_comm *c, dt_ucx_req *r);

/* Markers (ucx_tcp_mark.c). The send's: an empty UCX message with @p tag. */
dt_status dt__ucx_tcp_mark_send(dt_comm *c, int wp, uint32_t tag);
/* The receive's: r->mark, a 0-byte UCX receive with r's tag. */
dt_status dt__ucx_tcp_mark_post(dt_comm *c, dt_ucx_req *r);
/* Direct receive @p r with r->mark: DT_IN_PROGRESS while the marker has not
 * come, DT_OK once it came (r->mark cleared; r may still be coming), or the
 * mismatch (r released). */
dt_status dt__ucx_tcp_marked(dt_comm *c, dt_ucx_req *r);
/* UCX receive @p r from a direct peer got 0 bytes where it expected more:
 * the error, naming the direct message a marker stood for when it is here
 * (taken out of the stream). */
dt_status dt__ucx_tcp_marker_met(dt_comm *c, const dt_ucx_req *r);

/* UCX's own tagged send and receive (ucx_p2p.c), never the rings or the
 * sockets: for the markers. The receive is returned done or not (NULL: no
 * memory); world rank @p wp. */
dt_status dt__ucx_isend_ucx(dt_comm *c, const void *buf, size_t bytes, int wp, uint32_t tag,
                            void **req);
dt_ucx_req *dt__ucx_recv_post(dt_ucx_shared *sh, uint32_t comm_id, void *buf, size_t bytes, int wp,
                              uint32_t tag);
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
