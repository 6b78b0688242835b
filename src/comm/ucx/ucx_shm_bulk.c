/*
 * Messages too big for a ring between ranks of one host (see
 * ucx_shm_impl.h): the sender announces one with an RTS in the ring; the
 * receive that matches it answers with a CTS; the sender then streams it
 * through the pair's window of chunks and the receiver copies them out.
 *
 * Why two copies beat one: cross-memory attach (UCX's rendezvous here, and
 * Open MPI's) pins and copies page by page in the kernel at ~9 GB/s, while a
 * memcpy into or out of a shared mapping runs at ~30 GB/s, also when the
 * other core has just written the lines (measured on a 2-core AMD EPYC VM).
 * A 2-rank 256 KiB all-gather measured 24 us against 40 us.
 *
 * Why a CTS: only a matched message enters the window, so a message whose
 * receive is posted late never blocks the ones behind it, and the window
 * holds one message's chunks at a time in the order both sides agreed (the
 * receiver's CTS order, which the ring keeps).
 */
#include "comm/ucx/ucx_shm_impl.h"

#include "comm/copy_stream.h"
#include "comm/sched.h"
#include "core/copy.h"

bool dt__shm_bulk_announce(shm_peer *p, dt_ucx_req *r)
{
    shm_rts rts = {r->bulk_id, r->expect};
    return dt__shm_ring_put(p, &rts, sizeof(rts), SHM_RTS, r->tag, r->comm);
}

static bool send_cts(shm_peer *p, const dt_ucx_req *r)
{
    return dt__shm_ring_put(p, &r->bulk_id, sizeof(r->bulk_id), SHM_CTS, 0, 0);
}

void dt__shm_bulk_accept(shm_peer *p, dt_ucx_req *r, const shm_rts *rts)
{
    r->bulk = true;
    r->bulk_id = rts->id;
    r->total = rts->bytes;
    r->moved = 0;
    /* CTSs go out in order: behind any that wait for ring room */
    if (p->cts_due == NULL && send_cts(p, r))
        dt__shm_append(&p->sinks_end, r);
    else
        dt__shm_append(&p->cts_due_end, r);
}

void dt__shm_bulk_cleared(shm_peer *p, uint64_t id)
{
    for (dt_ucx_req **rp = &p->announced; *rp != NULL; rp = &(*rp)->next_q) {
        if ((*rp)->bulk_id == id) {
            dt__shm_append(&p->streams_end, dt__shm_unlink_at(rp, &p->announced_end));
            return;
        }
    }
    /* not found: the send was cancelled (its collective failed) */
}

/* Send queued CTSs while the ring has room; returns how many. */
static int flush_cts(shm_peer *p)
{
    int n = 0;
    while (p->cts_due != NULL && send_cts(p, p->cts_due)) {
        dt__shm_append(&p->sinks_end, dt__shm_unlink_at(&p->cts_due, &p->cts_due_end));
        n++;
    }
    return n;
}

static size_t chunk_len(size_t total, size_t moved)
{
    return total - moved < SHM_BULK_CHUNK ? total - moved : SHM_BULK_CHUNK;
}

/* A piece of a message of @p total bytes into its final place: with streaming
 * stores for a large one, which overflows the caches and is not read again
 * here (the caller fences once the message is whole). */
static void copy_out(void *dst, const void *src, size_t len, size_t total)
{
    if (total >= DT_COPY_STREAM_MIN_BYTES)
        dt__copy_stream(dst, src, len);
    else
        dt__copy_bytes(dst, src, len);
}

/*
 * Hosts of up to 4 ranks have 8 slots per window while plain sends keep 4
 * chunks in flight: each chunk then lands in a slot its receiver left 4
 * chunks ago rather than the one it just copied out. Measured (comm_bench,
 * quiet, builds alternating, medians of 10 runs), 2 ranks, all-gather,
 * all-reduce, reduce-scatter and all-to-all of 256 KiB - 64 MiB: 1.05-2.3x
 * faster but for the 16 MiB reduce-scatter (0.93x); 3 ranks 1.0-1.3x, 4
 * ranks 0.86-1.27x (median 1.0). 8 ranks keep 4 slots: their segments
 * must fit a 64 MiB /dev/shm.
 *
 * On 2 ranks a send gathered from rows fills all 8. It carries its own
 * stripe along (the ride), so each chunk costs its sender two copies and
 * its receiver one, and every copy waits on the one peer: with 4 in flight
 * the two ranks stalled each other whenever one was held up (S(0) -> S(1)
 * with a third process on the 2 cores: 17.2 ms median, 9.0 with 8). On
 * more ranks it keeps 4: the windows of 3 peers outgrow the caches (4
 * ranks: 90.6 -> 68.1% of the bare all-to-all with 8).
 */
int dt__shm_window_slots(int nlocal)
{
    return nlocal <= 4 ? SHM_BULK_WIDE_SLOTS : SHM_BULK_CHUNKS;
}

/* Whether @p p's window has room for one more chunk of its head stream. */
static bool window_room(const dt_ucx_shm *shm, shm_peer *p)
{
    const bool gathered = p->streams != NULL && p->streams->src2d != NULL;
    const uint64_t limit =
        shm->nlocal == 2 && gathered ? (uint64_t)shm->bulk_slots : SHM_BULK_CHUNKS;
    if (p->written - p->read_seen < limit)
        return true;
    p->read_seen = atomic_load_explicit(&p->out->bulk.read, memory_order_acquire);
    return p->written - p->read_seen < limit;
}

static void *next_chunk(const dt_ucx_shm *shm, const shm_peer *p)
{
    return dt__shm_chunk(shm, p->out, p->written);
}

/* All of @p p's head stream @p r is in the window: its buffer is free. */
static void finish_send(shm_peer *p, dt_ucx_req *r)
{
    dt__shm_unlink_at(&p->streams, &p->streams_end);
    r->status = UCS_OK;
    r->done = true;
}

/* The next chunk of @p p's window holds @p len more bytes of its head
 * stream @p r: publish it (the receiver copies it while I write the next),
 * and complete r once all of it is in the window. */
static void publish(shm_peer *p, dt_ucx_req *r, size_t len)
{
    atomic_store_explicit(&p->out->bulk.written, ++p->written, memory_order_release);
    r->moved += len;
    if (r->moved >= r->expect)
        finish_send(p, r);
}

/* A gathered send whose ride (if any) is column stripes of its own rows, at its offset. */
static bool gathers_rows(const dt_ucx_req *r)
{
    return r->src2d != NULL && (r->ride == NULL || (dt__block2d_same_rows(r->src2d, &r->ride[1]) &&
                                                    r->ride_done == r->moved));
}

/* Whether @p s, another peer's head stream, gathers stripes of @p r's rows,
 * as long as r, and can share a pass with it (one ride per pass). */
static bool same_rows(const dt_ucx_req *r, const dt_ucx_req *s)
{
    return s != NULL && s != r && gathers_rows(s) && s->expect == r->expect &&
           dt__block2d_same_rows(r->src2d, s->src2d) && (r->ride == NULL || s->ride == NULL);
}

/* Whether a stream over the same rows as @p r (same_rows) lags behind it
 * or is level with it but waits for window room: r then waits for it rather
 * than read its rows alone, so that the streams meet and go on in one pass
 * (without the wait, they drifted apart at the first full window: 10% of
 * the chunks went three at once on 4 ranks). A send still waiting for its
 * CTS (its receiver has not reached the call yet) counts as lagging too:
 * with more ranks than cores, the peers off the core joined late, and r's
 * rows went alone first, each stripe a pass of its own (2-2.5x the cost per
 * byte of one pass for all, bench_gather). Nothing waits for ever: the streams
 * furthest behind wait only for a CTS or a window to drain, which need
 * nothing but their receiver's progress, and then move on, together where
 * they can. */
static bool ahead(const dt_ucx_shm *shm, const dt_ucx_req *r)
{
    if (!gathers_rows(r))
        return false;
    for (int i = 0; i < shm->nring_peers; i++) {
        const shm_peer *q = &shm->peer[shm->ring_peers[i]];
        if (same_rows(r, q->streams) && q->streams->moved <= r->moved)
            return true;
        if (q->streams == NULL && same_rows(r, q->announced))
            return true;
    }
    return false;
}

/*
 * One chunk of @p r (@p p's head stream, @p len bytes) together with the
 * next chunk of every other peer's head stream that gathers other stripes
 * of the same rows at the same offset and has window room (S(0) -> S(1)'s
 * sends, all posted at once): each row is read once for all of them, where
 * a chunk per peer in turn read each row once per stripe. Returns the chunks
 * written; 0 when r has no such company (it then goes alone).
 */
static int stream_rows(const dt_ucx_shm *shm, shm_peer *p, dt_ucx_req *r, size_t len)
{
    if (!gathers_rows(r))
        return 0;
    shm_peer *peer[DT__GATHER_ROWS_MAX] = {p};
    dt_ucx_req *req[DT__GATHER_ROWS_MAX] = {r};
    dt__gather_part part[DT__GATHER_ROWS_MAX] = {{next_chunk(shm, p), r->src2d}};
    const dt__block2d *ride = r->ride;
    uint64_t *ride_done = &r->ride_done;
    int n = 1;
    for (int i = 0; i < shm->nring_peers && n < DT__GATHER_ROWS_MAX; i++) {
        shm_peer *q = &shm->peer[shm->ring_peers[i]];
        dt_ucx_req *s = q->streams;
        if (q == p || !same_rows(r, s) || s->moved != r->moved ||
            (s->ride != NULL && ride != NULL) || !window_room(shm, q))
            continue;
        if (s->ride != NULL) { /* one ride per pass */
            ride = s->ride;
            ride_done = &s->ride_done;
        }
        peer[n] = q;
        req[n] = s;
        part[n++] = (dt__gather_part){next_chunk(shm, q), s->src2d};
    }
    if (n == 1)
        return 0;
    dt__block2d_gather_rows(part, n, r->moved, len, ride, ride_done);
    for (int i = 0; i < n; i++) {
        publish(peer[i], req[i], len);
        if (i > 0) /* p is woken by the caller */
            dt__shm_wake_if_asleep(shm, peer[i]);
    }
    return n;
}

/* Stream cleared sends into @p p's window while it has room (with other
 * peers' in one pass where they gather the same rows); returns chunks written. */
static int stream_out(const dt_ucx_shm *shm, shm_peer *p)
{
    int n = 0;
    while (p->streams != NULL) {
        dt_ucx_req *r = p->streams;
        if (r->moved >= r->expect) { /* nothing to move */
            finish_send(p, r);
            continue;
        }
        if (!window_room(shm, p))
            return n;
        size_t len = chunk_len(r->expect, r->moved);
        int rows = stream_rows(shm, p, r, len);
        if (rows > 0) {
            n += rows;
            continue;
        }
        if (ahead(shm, r))
            return n;
        void *chunk = next_chunk(shm, p);
        if (r->ride != NULL) /* gathered from the rows, with a local copy in step */
            dt__block2d_gather_ride(chunk, r->src2d, r->moved, len, r->ride, &r->ride_done);
        else if (r->src2d != NULL) /* gathered from the rows: no packed copy */
            dt__block2d_gather(chunk, r->src2d, r->moved, len);
        else
            dt__copy_bytes(chunk, (const char *)r->buf + r->moved, len);
        publish(p, r, len);
        n++;
    }
    return n;
}

/* @p keep bytes of a chunk into receive @p r at r->moved: copied, or for an
 * irecv_reduce folded straight out of the window, which saves the pass that
 * copying it out and reducing it afterwards makes over the received bytes. */
static void land(dt_ucx_req *r, const void *chunk, size_t keep)
{
    char *dst = (char *)r->buf + r->moved;
    if (r->fold == NULL) {
        copy_out(dst, chunk, keep, r->total);
        return;
    }
    dt__reduce3(dst, chunk, (const char *)r->fold + r->moved, keep / dt_dtype_size(r->fold_dtype),
                r->fold_dtype, r->fold_op);
    r->folded = r->moved + keep;
}

/* Copy arrived chunks into the cleared receives; returns chunks consumed. */
static int stream_in(const dt_ucx_shm *shm, shm_peer *p)
{
    shm_bulk *w = &p->in->bulk;
    int n = 0;
    while (p->sinks != NULL) {
        dt_ucx_req *r = p->sinks;
        uint64_t written = atomic_load_explicit(&w->written, memory_order_acquire);
        while (r->moved < r->total && p->read < written) {
            size_t len = chunk_len(r->total, r->moved);
            /* a longer message than expected fails; only what fits is kept */
            size_t room = r->moved < r->expect ? r->expect - r->moved : 0;
            size_t keep = room < len ? room : len;
            if (keep > 0)
                land(r, dt__shm_chunk(shm, p->in, p->read), keep);
            r->moved += len;
            atomic_store_explicit(&w->read, ++p->read, memory_order_release);
            n++;
        }
        if (r->moved < r->total)
            break;
        dt__shm_unlink_at(&p->sinks, &p->sinks_end);
        if (r->total >= DT_COPY_STREAM_MIN_BYTES)
            dt__copy_stream_fence();
        dt__shm_finish_recv(r, r->total);
    }
    return n;
}

int dt__shm_bulk_progress(const dt_ucx_shm *shm, shm_peer *p)
{
    int cts = p->cts_due != NULL ? flush_cts(p) : 0;
    int out = stream_out(shm, p), in = stream_in(shm, p);
    if (cts + out + in > 0)
        dt__shm_wake_if_asleep(shm, p); /* it may wait for a CTS, a chunk or room */
    return cts + out + in;
}

bool dt__shm_bulk_busy(const shm_peer *p)
{
    return p->streams != NULL || p->sinks != NULL || p->cts_due != NULL;
}

void dt__shm_bulk_cancel(shm_peer *p, const dt_ucx_req *r)
{
    if (!dt__shm_unlink_req(&p->announced, &p->announced_end, r) &&
        !dt__shm_unlink_req(&p->streams, &p->streams_end, r) &&
        !dt__shm_unlink_req(&p->cts_due, &p->cts_due_end, r))
        dt__shm_unlink_req(&p->sinks, &p->sinks_end, r);
}
