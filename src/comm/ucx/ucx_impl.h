/*
 * UCX backend internals: one ucp context + worker per process, shared by the
 * world comm and every comm split from it (a split is a local regroup: a new
 * member table and comm id over the same endpoints).
 *
 * Tags (64 bits): [comm id 16][logical tag 28][source world rank 20]. A
 * receive names its source exactly, so comms and peers never cross-talk,
 * and UCX's per-sender ordering gives FIFO per (peer, tag); a collective's
 * check bits are masked out of the match and compared once it arrived.
 * Comm id DT_UCX_NOTICE_ID carries abort notices (ucx_abort.c).
 */
#ifndef DT_COMM_UCX_IMPL_H
#define DT_COMM_UCX_IMPL_H

#include <ucp/api/ucp.h>

#include "comm/comm_impl.h"

#define DT_UCX_ID_BITS   16
#define DT_UCX_RANK_BITS 20
#define DT_UCX_NOTICE_ID 0xffffu

typedef struct dt_ucx_shared dt_ucx_shared;
typedef struct dt_ucx_shm dt_ucx_shm;
typedef struct dt_ucx_req dt_ucx_req;

/*
 * Peer failure. UCX 1.x shared-memory transports cannot report a dead peer
 * (no UCP_ERR_HANDLING_MODE_PEER support), and asking for it would push all
 * traffic onto TCP loopback. So: peers on another host get UCX's peer error
 * handling; peers on this host use shared memory with error handling off,
 * and a waiting rank checks every DT_UCX_LIVENESS_S that their processes
 * (pid + start time, swapped at bootstrap) still exist.
 */
#define DT_UCX_LIVENESS_S 0.1

typedef struct dt_ucx_peer {
    dt_ucx_shared *shared;
    ucp_ep_h ep;
    int world_rank;
    bool dead;        /* set by the endpoint error handler or the liveness check */
    ucs_status_t why; /* the status it reported */
    bool local;       /* same host: shared memory, liveness by pid */
    int host;         /* lowest world rank on its host (dt__ucx_host_ids) */
    int pid;
    unsigned long long start_time; /* /proc/<pid>/stat field 22 */
} dt_ucx_peer;

/* What each rank publishes besides its worker address. */
typedef struct dt_ucx_info {
    uint64_t cma_probe; /* address of a known word: peers test cross-memory attach on it */
    int pid;
    unsigned long long start_time;
    char host[64];
    char boot_id[40]; /* /proc/sys/kernel/random/boot_id: tells machines apart */
    uint64_t pid_ns;  /* inodes of /proc/self/ns/pid and /ns/ipc: containers */
    uint64_t ipc_ns;
    uint32_t instance; /* this process's count of UCX worlds (names its rings) */
} dt_ucx_info;

/* Fill @p out for this process. */
void dt__ucx_info_self(dt_ucx_info *out);
/*
 * Whether two ranks share a host: the same hostname, boot and pid and IPC
 * namespaces, which the same-host shortcuts need (liveness by pid, CMA, UCX's
 * SysV segments). A hostname alone is not enough: machines or containers
 * named alike would read each other's pids as their own.
 */
bool dt__ucx_same_host(const dt_ucx_info *a, const dt_ucx_info *b);
/* peers[i].host for every world rank: the lowest rank on the same host.
 * Test-only: DT_TEST_RANKS_PER_HOST=k pretends world rank i is on host i / k
 * (the transports still see the real hosts; only the hierarchical
 * collectives' layout changes), so they run on one machine. */
void dt__ucx_host_ids(dt_ucx_peer *peers, const dt_ucx_info *infos, int n);
/*
 * Automatic spin (DT_SPIN_US = -1): before sleeping on the event fd a wait
 *   1. polls plainly for an adaptive budget between DT_UCX_SPIN_MIN_US and
 *      DT_UCX_SPIN_MAX_US (none when there are more local ranks than cores:
 *      the peer we wait for may need this very core). A wake-up sooner than
 *      the maximum doubles the budget (the peer answers quickly: polling
 *      catches it at the lowest latency), a longer one halves it (the peer
 *      is computing: polling would only take CPU from it or other work);
 *   2. while the host is contended (more local ranks than cores, or
 *      /proc/loadavg shows more runnable threads than cores), polls for
 *      DT_UCX_SPIN_YIELD_US more with sched_yield after every poll, handing
 *      the core to whoever is runnable and polling only when it would idle.
 * DT_SPIN_US >= 0: plain polling for that long, no yielding, no adapting.
 */
#define DT_UCX_SPIN_MAX_US   200
#define DT_UCX_SPIN_MIN_US   5
#define DT_UCX_SPIN_YIELD_US 50
void dt__ucx_update_spin(dt_ucx_shared *sh, double now);
/*
 * Cross-memory attach (process_vm_readv/writev) to the ranks of this host:
 * the peer_copy entry of dt_comm_alltoallw. dt__ucx_cma_probe reads each
 * local peer's probe word (bootstrap) and keeps the answer in sh->cma; the
 * world then agrees (dt__ucx_cma_agree), so every comm decides alike.
 */
void dt__ucx_cma_probe(dt_ucx_shared *sh, const dt_ucx_info *infos);
uint64_t dt__ucx_cma_probe_addr(void);
dt_status dt__ucx_cma_agree(dt_comm *world);
dt_status dt__ucx_peer_copy(dt_comm *c, int peer, bool to_peer, const dt__block2d *local,
                            const dt__block2d *remote, uint64_t offset, uint64_t bytes);
bool dt__ucx_peer_copy_ok(const dt_comm *c);
/* Mark local peers whose process is gone as dead (rate-limited; @p now: dt__clock_now()). */
void dt__ucx_check_liveness(dt_ucx_shared *sh, bool force, double now);
/* A world rank on this host whose process is stopped (SIGSTOP, a debugger),
 * @p first checked before the others, and its pid; -1 when none is. */
int dt__ucx_stopped_peer(const dt_comm *c, int first, int *pid);

/*
 * Messages between ranks of one host (ucx_shm.c): each rank owns a POSIX
 * shared-memory segment with one ring of 512-byte slots per same-host
 * sender; a message of at most DT_UCX_SHM_MAX_BYTES takes consecutive slots
 * (an 8 B message one cache line), matched by (comm, tag) in order like
 * UCX's tags, at a fraction of UCX's per-message cost. A larger message is
 * announced in the ring and, once its receive is matched, streamed through
 * the pair's window of 128 KiB chunks (ucx_shm_bulk.c): two memcpys at
 * ~30 GB/s beat one cross-memory-attach copy at ~9 GB/s. Other hosts and
 * DT_SHM=0 go through UCX. Which transport a pair uses is agreed world-wide.
 */
#define DT_UCX_SHM_MAX_BYTES 4080
/* Bootstrap, collective over the store (connect_all): create this rank's
 * segment and wake socket, swap readiness, map the peers' segments. A
 * failure only turns shared memory off (logged), never fails the world. */
dt_status dt__ucx_shm_setup(dt_ucx_shared *sh, struct dt_store *store, const dt_ucx_info *infos);
/* Collective over the world: use the rings only if every rank set them up. */
dt_status dt__ucx_shm_agree(dt_comm *world);
void dt__ucx_shm_close(dt_ucx_shared *sh);
/* Whether every pair of @p c's members talks through shared memory (agreed). */
bool dt__ucx_shm_p2p_ok(const dt_comm *c);
/* Whether messages to or from world rank @p wp go through shared memory. */
bool dt__ucx_shm_carries(const dt_ucx_shared *sh, int wp);
dt_status dt__ucx_shm_isend(dt_comm *c, const void *buf, size_t bytes, int wp, uint32_t tag,
                            void **req);
dt_status dt__ucx_shm_irecv(dt_comm *c, void *buf, size_t bytes, int wp, uint32_t tag, void **req);
void dt__ucx_shm_cancel(dt_ucx_shared *sh, dt_ucx_req *r);
/* Deliver arrived messages and flush queued sends; returns how many moved. */
int dt__ucx_shm_progress(dt_ucx_shared *sh);
/* Before sleeping: announce it (senders then wake us through the socket) and
 * look once more; false = something arrived, do not sleep. */
bool dt__ucx_shm_sleep_begin(dt_ucx_shared *sh);
/* After sleeping: withdraw the announcement, drain the socket if @p woken. */
void dt__ucx_shm_sleep_end(dt_ucx_shared *sh, bool woken);
/* The socket senders wake this rank through (-1: none). */
int dt__ucx_shm_wake_fd(const dt_ucx_shared *sh);

/*
 * Abort notices (ucx_abort.c): a comm family aborted on this rank is told to
 * its other ranks with one small message each, through the rings or UCX.
 * The rings hand a notice to dt__ucx_notice_arrived as it is drained; for
 * UCX one wildcard receive stays posted for them.
 */
typedef struct dt_ucx_fam {
    dt__comm_family *f;     /* a reference */
    dt__abort_notice *sent; /* what this rank sent (UCX may still read it) */
} dt_ucx_fam;
dt__comm_family *dt__ucx_family_open(dt_comm *c, uint32_t id);
void dt__ucx_notify_abort(dt_comm *c, const dt__comm_family *f);
void dt__ucx_notice_arrived(dt_ucx_shared *sh, int from, const void *buf, size_t len);
dt_status dt__ucx_notice_post(dt_ucx_shared *sh);
/* Handle a notice the posted receive took (called from progress). */
void dt__ucx_notice_take(dt_ucx_shared *sh);
/* Teardown: cancel the posted receive, drop the families. */
void dt__ucx_notice_close(dt_ucx_shared *sh);

struct dt_ucx_shared {
    int refs; /* comms using this worker */
    ucp_context_h context;
    ucp_worker_h worker;
    int efd;
    int world_rank, world_size;
    dt_ucx_peer *peers;  /* world_size entries */
    uint32_t next_id;    /* lowest comm id not used by this process yet */
    double spin_s;       /* plain polling before sleeping (adapted, <= spin_max_s) */
    double spin_max_s;   /* DT_SPIN_US or the automatic choice */
    double spin_min_s;   /* the budget never shrinks below this */
    double yield_s;      /* then polling with sched_yield (contended host) */
    bool spin_auto;      /* DT_SPIN_US = -1: see above */
    bool oversubscribed; /* more local ranks than cores */
    int cores;
    double last_load;                /* when /proc/loadavg was last read */
    int orphans;                     /* requests the core gave up on that UCX still owns */
    struct dt_ucx_req **orphan_list; /* them, freed at teardown if never completed */
    int orphan_cap;
    /* scratch of failed collectives, which abandoned requests may still write:
     * freed after the worker is destroyed (dt__ucx_defer_free) */
    void **grave;
    size_t *grave_block;
    int n_grave, grave_cap;
    struct dt_ucx_req *free_reqs; /* recycled request records (no malloc per message) */
    int nfree_reqs;
    double last_liveness;   /* when local peers' processes were last checked */
    bool cma;               /* cross-memory attach reaches every local peer (agreed) */
    void *cma_bounce;       /* staging for short strided runs (DT_UCX_CMA_BOUNCE bytes) */
    dt_ucx_shm *shm;        /* same-host rings (NULL: none) */
    struct dt_ucx_tcp *tcp; /* direct sockets to other hosts (NULL: none; ucx_tcp.h) */
    dt_ucx_fam *fams;       /* comm families by id (ucx_abort.c) */
    int nfams, cap_fams;
    void *notice_req;    /* the posted notice receive (NULL: none) */
    bool notice_arrived; /* it completed: dt__ucx_notice_take */
    size_t notice_len;   /* its length and sender */
    int notice_from;
    dt__abort_notice *notice; /* its buffer */
};

typedef struct dt_ucx_comm {
    dt_ucx_shared *shared;
    uint32_t id;
    int *members;   /* comm rank -> world rank */
    bool all_local; /* every member runs on this host */
} dt_ucx_comm;

/* One outstanding send or receive. */
struct dt_ucx_req {
    void *ucp_req;       /* NULL once completed */
    bool done, orphaned; /* orphaned: cancelled by the core, the callback frees */
    ucs_status_t status;
    bool is_recv;
    size_t expect; /* receive: bytes expected; ring send: bytes to send */
    size_t got;
    int world_peer;
    dt_ucx_shared *shared;
    struct dt_ucx_req *next_free;
    /* a ring message (ucx_shm.c): queued on its peer until it moves */
    bool shm;
    uint16_t comm;    /* comm id */
    uint32_t tag;     /* logical tag */
    uint32_t got_tag; /* receive: the matched message's (its check bits) */
    void *buf;        /* receive: where it lands; send: what is sent */
    struct dt_ucx_req *next_q;
    bool tcp;                /* on a direct socket (ucx_tcp.c) */
    struct dt_ucx_req *mark; /* a direct receive: its marker's UCX receive, until checked */
    /* a bulk message (ucx_shm_bulk.c): streamed through the pair's window */
    bool bulk;
    uint64_t bulk_id;         /* the sender's id, echoed by the receiver's CTS */
    size_t moved;             /* bytes streamed so far */
    size_t total;             /* receive: the message's length (the sender's) */
    const dt__block2d *src2d; /* isend2d: the message is this block's rows (buf NULL) */
    const dt__block2d *ride;  /* isend2d: {dst, src} copied alongside, ride_done bytes so far */
    uint64_t ride_done;
    /* irecv_reduce: buf = op(received, fold), done for the first `folded` bytes */
    const void *fold;
    size_t folded;
    dt_dtype fold_dtype;
    dt_reduce_op fold_op;
};

/* Request records: from the worker's free list, back to it. */
dt_ucx_req *dt__ucx_req_new(dt_ucx_shared *sh);
void dt__ucx_req_put(dt_ucx_req *r);
/* A finished request's status as ours (a length mismatch, a lost peer, ...). */
dt_status dt__ucx_req_status(dt_comm *c, const dt_ucx_req *r);
/* Free the recycled request records (teardown). */
void dt__ucx_req_pool_clear(dt_ucx_shared *sh);

extern const dt_comm_ops dt__ucx_ops;

uint64_t dt__ucx_tag(uint32_t comm_id, uint32_t tag, int src_world_rank);
dt_status dt__ucx_isend(dt_comm *c, const void *buf, size_t bytes, int peer, uint32_t tag,
                        void **req);
dt_status dt__ucx_irecv(dt_comm *c, void *buf, size_t bytes, int peer, uint32_t tag, void **req);
dt_status dt__ucx_isend2d(dt_comm *c, const dt__block2d *src, const dt__block2d *ride, int peer,
                          uint32_t tag, void **req);
dt_status dt__ucx_irecv_reduce(dt_comm *c, void *buf, size_t bytes, int peer, uint32_t tag,
                               const void *fold, dt_dtype dtype, dt_reduce_op op, void **req);
/* An irecv_reduce's fold of the bytes received up to @p upto (none for a plain receive). */
void dt__ucx_fold(dt_ucx_req *r, size_t upto);
dt_status dt__ucx_req_test(dt_comm *c, void *req);
void dt__ucx_req_cancel(dt_comm *c, void *req);
/* dt_comm_ops.defer_free: keep @p p until the worker is gone (leaked if the list cannot grow). */
void dt__ucx_defer_free(dt_comm *c, void *p, size_t block);
dt_status dt__ucx_progress(dt_comm *c, double wait_s);

#endif
