/*
 * Private to the same-host shared-memory transport: ucx_shm.c (segments,
 * rings, matching, sleeping) and ucx_shm_bulk.c (messages too big for a
 * ring, streamed through a per-pair window of chunks).
 */
#ifndef DT_UCX_SHM_IMPL_H
#define DT_UCX_SHM_IMPL_H

#include <stdatomic.h>
#include <sys/un.h>

#include "comm/ucx/ucx_impl.h"

#define SHM_SLOTS   256
#define SHM_SLOT    512
#define SHM_HDR     16
#define SHM_PAYLOAD (SHM_SLOT - SHM_HDR)
#define SHM_PAGE    4096

/* A slot header's len is the payload length, or'ed with one kind flag. */
#define SHM_LEN_MASK 0x1fffu
#define SHM_RTS      0x8000u /* a bulk message's announcement: shm_rts */
#define SHM_CTS      0x4000u /* clear to send the bulk message: its id (uint64_t) */

/*
 * Bulk window: chunks of SHM_BULK_CHUNK bytes per ordered pair, in the
 * receiver's segment behind the pair's ring. A plain send keeps at most
 * SHM_BULK_CHUNKS in flight: 4 x 128 KiB measured best of 2-8 chunks of
 * 16-256 KiB (2 ranks, 256 KiB - 4 MiB blocks): smaller chunks make the two
 * cores trade the same lines, fewer stall the sender. On hosts of up to 4
 * ranks the window has SHM_BULK_WIDE_SLOTS slots all the same, so a sender
 * writes the slot its receiver released 4 chunks ago, not the one it has
 * just read (see dt__shm_window_slots).
 */
#define SHM_BULK_CHUNK      (128 * 1024)
#define SHM_BULK_CHUNKS     4
#define SHM_BULK_WIDE_SLOTS 8

typedef struct shm_slot {
    _Atomic uint64_t seq; /* the message's first absolute slot index + 1 */
    uint32_t tag;         /* tag, comm and len: in a message's first slot */
    uint16_t comm;
    uint16_t len;
    char data[SHM_PAYLOAD];
} shm_slot;

/* Chunks move in order; `written` and `read` count them from the start. The
 * window's slots follow the ring (dt__shm_chunk). */
typedef struct shm_bulk {
    _Atomic uint64_t written; /* by the sender, released after the chunk's bytes */
    char pad0[64 - sizeof(uint64_t)];
    _Atomic uint64_t read; /* by the receiver, released after it copied the chunk out */
    char pad1[SHM_PAGE - 64 - sizeof(uint64_t)];
} shm_bulk;

typedef struct shm_ring {
    _Atomic uint64_t tail; /* slots the owner has consumed */
    char pad[SHM_PAGE - sizeof(uint64_t)];
    shm_slot slot[SHM_SLOTS];
    shm_bulk bulk;
} shm_ring;

typedef struct shm_ctl {
    _Atomic uint32_t sleeping; /* the owner sleeps (or is about to): wake it */
    char pad[SHM_PAGE - sizeof(uint32_t)];
} shm_ctl;

/* What an RTS carries: the sender's id for the message and its length. */
typedef struct shm_rts {
    uint64_t id, bytes;
} shm_rts;

/* A message that arrived before its receive was posted (a bulk one: only its RTS). */
typedef struct shm_msg {
    struct shm_msg *next;
    uint32_t tag;
    uint16_t comm, len;
    bool bulk;
    shm_rts rts;
    char data[];
} shm_msg;

/* What this rank keeps about one same-host peer. */
typedef struct shm_peer {
    shm_ring *in;  /* its messages to me, in my segment (NULL: not a ring peer) */
    shm_ring *out; /* mine to it, in its segment */
    shm_ctl *ctl;  /* its segment, which starts with its control page */
    struct sockaddr_un wake;
    socklen_t wake_len;
    uint64_t head, tail_seen;           /* out: slots written; its tail as last read */
    uint64_t next;                      /* in: the next slot to consume */
    dt_ucx_req *posted, **posted_end;   /* receives waiting, in posting order */
    dt_ucx_req *pending, **pending_end; /* sends waiting for a slot, in order */
    shm_msg *unexp, **unexp_end;        /* arrived, not yet received, in order */
    /* bulk, sending: RTS sent, waiting for its CTS; then cleared, streamed in order */
    uint64_t bulk_ids;
    dt_ucx_req *announced, **announced_end;
    dt_ucx_req *streams, **streams_end;
    uint64_t written, read_seen; /* out->bulk: chunks written; its read as last seen */
    /* bulk, receiving: CTS waiting for ring room; then cleared, filled in order */
    dt_ucx_req *cts_due, **cts_due_end;
    dt_ucx_req *sinks, **sinks_end;
    uint64_t read; /* in->bulk: chunks consumed */
} shm_peer;

struct dt_ucx_shm {
    dt_ucx_shared *sh; /* the worker state it belongs to */
    bool on;           /* agreed world-wide: the rings carry small messages */
    bool ready;        /* this rank mapped every same-host peer's segment */
    int nlocal;
    size_t seg_bytes;
    shm_ctl *ctl; /* my segment */
    char name[64];
    bool linked; /* my segment's name still exists */
    int wake_fd;
    bool membarrier;   /* this process is registered for MEMBARRIER_CMD_GLOBAL_EXPEDITED */
    bool asym;         /* agreed world-wide: sleepers membarrier, senders skip the fence */
    int bulk_slots;    /* chunks in each pair's window: dt__shm_window_slots */
    size_t ring_bytes; /* a ring and its window */
    int *ring_peers;   /* world ranks of the same-host peers */
    int nring_peers;
    shm_peer *peer; /* world_size entries */
};

/* ucx_shm.c, for the bulk path */
/* Write one message (@p kind: 0, SHM_RTS or SHM_CTS) into @p p's ring;
 * false when the ring is full. */
bool dt__shm_ring_put(shm_peer *p, const void *buf, size_t len, uint16_t kind, uint32_t tag,
                      uint16_t comm);
/* ucx_shm_sleep.c */
/* Wake @p p if it sleeps (after my store to its ring, window or my tail). */
void dt__shm_wake_if_asleep(const dt_ucx_shm *shm, const shm_peer *p);
/* Register this process for the sleepers' membarrier; false if it cannot. */
bool dt__shm_membarrier_register(void);
/* Append @p r to a list whose last link is *@p end. */
void dt__shm_append(dt_ucx_req ***end, dt_ucx_req *r);
/* Unlink the request at *@p rp from a list whose last link is *@p end. */
dt_ucx_req *dt__shm_unlink_at(dt_ucx_req **rp, dt_ucx_req ***end);
/* Unlink @p r from the list at @p head; true if it was there. */
bool dt__shm_unlink_req(dt_ucx_req **head, dt_ucx_req ***end, const dt_ucx_req *r);
/* Complete receive @p r with a message of @p len bytes (a different length
 * than expected fails it: dt__ucx_req_status). */
void dt__shm_finish_recv(dt_ucx_req *r, size_t len);

/* ucx_shm_bulk.c */
/* The chunks in each pair's window on a host of @p nlocal ranks. */
int dt__shm_window_slots(int nlocal);
/* Slot @p k (mod the window's slots) of @p ring's window. */
static inline char *dt__shm_chunk(const dt_ucx_shm *shm, const shm_ring *ring, uint64_t k)
{
    return (char *)(ring + 1) + (size_t)(k % (uint64_t)shm->bulk_slots) * SHM_BULK_CHUNK;
}
/* Announce bulk send @p r (RTS); false when the ring is full. */
bool dt__shm_bulk_announce(shm_peer *p, dt_ucx_req *r);
/* Receive @p r takes the bulk message @p rts: clear it to send. */
void dt__shm_bulk_accept(shm_peer *p, dt_ucx_req *r, const shm_rts *rts);
/* The receiver cleared message @p id: stream it after those cleared before. */
void dt__shm_bulk_cleared(shm_peer *p, uint64_t id);
/* Queued CTSs, chunks out and in; returns how many moved. */
int dt__shm_bulk_progress(const dt_ucx_shm *shm, shm_peer *p);
/* Forget @p r (cancelled) wherever the bulk path holds it. */
void dt__shm_bulk_cancel(shm_peer *p, const dt_ucx_req *r);
/* Whether the bulk path has work queued with @p p. */
bool dt__shm_bulk_busy(const shm_peer *p);

#endif
