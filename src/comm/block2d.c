/*
 * 2-D blocks of bytes (dt__block2d): counting their contiguous runs, copying
 * one into another of a different shape, and the rule that decides which
 * rank of a same-host pair moves a block (DT__OP_PEER_COPY).
 */
#include "comm/comm_impl.h"
#include "comm/sched.h"
#include "comm/copy_stream.h"

#include <string.h>

#include "core/copy.h"
#include "core/error.h"

/* Blocks of at least this many bytes are copied with streaming stores: they
 * overflow the caches anyway, and storing around them saves reading each
 * destination line first (what glibc's memcpy does for one large run, but
 * never for the many short runs of a strided block). */
#define DT_BLOCK2D_STREAM_BYTES (4u << 20)

static uint64_t block_bytes(const dt__block2d *b)
{
    return b->rows * b->row_bytes;
}

uint64_t dt__block2d_runs(const dt__block2d *b)
{
    if (block_bytes(b) == 0)
        return 0;
    return (b->rows == 1 || b->pitch == b->row_bytes) ? 1 : b->rows;
}

dt__run_cursor dt__run_cursor_at(const dt__block2d *b, uint64_t offset)
{
    uint64_t bytes = block_bytes(b);
    dt__run_cursor c = {.addr = b->addr, .rows = b->rows, .run = b->row_bytes, .pitch = b->pitch};
    if (dt__block2d_runs(b) <= 1) /* one run: a single row of all the bytes */
        c = (dt__run_cursor){.addr = b->addr, .rows = 1, .run = bytes, .pitch = bytes};
    if (c.run > 0) {
        c.row = offset / c.run;
        c.off = offset % c.run;
    }
    return c;
}

void dt__block2d_part(const dt__block2d *b, uint32_t part, uint32_t nparts, uint64_t *off,
                      uint64_t *len)
{
    /* whole rows per part, so parts of blocks sharing rows touch the same rows */
    uint64_t units = dt__block2d_runs(b) > 1 ? b->rows : block_bytes(b);
    uint64_t unit = dt__block2d_runs(b) > 1 ? b->row_bytes : 1;
    uint64_t per = (units + nparts - 1) / (nparts ? nparts : 1);
    uint64_t u0 = (uint64_t)part * per < units ? (uint64_t)part * per : units;
    uint64_t u1 = u0 + per < units ? u0 + per : units;
    *off = u0 * unit;
    *len = (u1 - u0) * unit;
}

/* A copy between two blocks' byte streams, at a position kept between calls
 * (a ride's steps of one short row then cost no division). */
typedef struct copy_cursor {
    dt__run_cursor d, s;
    bool stream; /* streaming stores */
} copy_cursor;

/* Streaming stores for a large source (DT_BLOCK2D_STREAM_BYTES) copied in
 * more than one run; one run: glibc's own stores. */
static copy_cursor copy_at(const dt__block2d *dst, const dt__block2d *src, uint64_t offset)
{
    copy_cursor c = {dt__run_cursor_at(dst, offset), dt__run_cursor_at(src, offset), false};
    c.stream = block_bytes(src) >= DT_BLOCK2D_STREAM_BYTES && !(c.d.rows == 1 && c.s.rows == 1);
    return c;
}

/* The next @p bytes: the overlap of the current runs at a time. */
static void copy_next(copy_cursor *c, uint64_t bytes)
{
    while (bytes > 0) {
        uint64_t n =
            dt__run_left(&c->s) < dt__run_left(&c->d) ? dt__run_left(&c->s) : dt__run_left(&c->d);
        n = n < bytes ? n : bytes;
        if (c->stream)
            dt__copy_stream(dt__run_ptr(&c->d), dt__run_ptr(&c->s), n);
        else /* rows at any relative alignment: see core/copy.h */
            dt__copy_bytes(dt__run_ptr(&c->d), dt__run_ptr(&c->s), n);
        dt__run_skip(&c->d, n);
        dt__run_skip(&c->s, n);
        bytes -= n;
    }
}

void dt__block2d_copy(const dt__block2d *dst, const dt__block2d *src, uint64_t offset,
                      uint64_t bytes)
{
    copy_cursor c = copy_at(dst, src, offset);
    copy_next(&c, bytes);
    if (c.stream) /* glibc's own streaming stores fence themselves */
        dt__copy_stream_fence();
}

void dt__block2d_gather(void *dst, const dt__block2d *src, uint64_t offset, uint64_t bytes)
{
    dt__run_cursor s = dt__run_cursor_at(src, offset);
    char *d = dst;
    while (bytes > 0) {
        uint64_t n = dt__run_left(&s) < bytes ? dt__run_left(&s) : bytes;
        dt__copy_bytes(d, dt__run_ptr(&s), n);
        dt__run_skip(&s, n);
        d += n;
        bytes -= n;
    }
}

/* Gathered bytes between two steps of a ride: short runs go in batches. */
#define DT_RIDE_STEP_BYTES 1024u

/* floor(a * b / c) without overflow, b <= c. */
static uint64_t share(uint64_t a, uint64_t b, uint64_t c)
{
    __extension__ typedef unsigned __int128 u128;
    return (uint64_t)((u128)a * b / c);
}

/* A ride's copy {dst, src} in step with a gather, *done bytes of it so far:
 * one copy cursor for all its steps (placing both run cursors afresh per
 * 2 KiB row of S(0) -> S(1) took four divisions). */
typedef struct ride_cursor {
    copy_cursor c;
    uint64_t *done;
} ride_cursor;

static ride_cursor ride_begin(const dt__block2d ride[2], uint64_t *done)
{
    return (ride_cursor){copy_at(&ride[0], &ride[1], *done), done};
}

/* The ride's next @p bytes. */
static void ride_copy(ride_cursor *c, uint64_t bytes)
{
    *c->done += bytes;
    copy_next(&c->c, bytes);
}

/* The ride's bytes up to its share of @p at of the gathered stream's @p total
 * (its own bytes when the two are as long, S(0) -> S(1)'s stripes). */
static void ride_to(ride_cursor *c, uint64_t ride_total, uint64_t at, uint64_t total)
{
    uint64_t to = ride_total == total ? at : share(ride_total, at, total);
    if (to > *c->done)
        ride_copy(c, to - *c->done);
}

void dt__block2d_gather_ride(void *dst, const dt__block2d *src, uint64_t offset, uint64_t bytes,
                             const dt__block2d ride[2], uint64_t *ride_done)
{
    const uint64_t total = block_bytes(src), ride_total = block_bytes(&ride[1]);
    ride_cursor rc = ride_begin(ride, ride_done);
    /* Each row in address order: the stripe that lies first in it is copied
     * first. Backwards (the higher stripe, then the lower of the same row),
     * the hardware prefetcher loses the stream: one rank's copies of 2-KiB
     * halves of 4-KiB rows took 6-10 ms against 2.1-2.8 in order. */
    const bool ride_first = ride[1].addr <= src->addr;
    dt__run_cursor s = dt__run_cursor_at(src, offset);
    uint64_t at = offset, end = offset + bytes, stepped = offset;
    char *d = dst;
    while (at < end) {
        uint64_t n = dt__run_left(&s) < end - at ? dt__run_left(&s) : end - at;
        bool step = at + n - stepped >= DT_RIDE_STEP_BYTES || at + n == end;
        if (step && ride_first) /* the ride's share up to this run's end */
            ride_to(&rc, ride_total, at + n, total);
        dt__copy_row(d, dt__run_ptr(&s), n);
        if (step && !ride_first)
            ride_to(&rc, ride_total, at + n, total);
        stepped = step ? at + n : stepped;
        dt__run_skip(&s, n);
        d += n;
        at += n;
    }
    if (rc.c.stream)
        dt__copy_stream_fence();
}

bool dt__block2d_same_rows(const dt__block2d *a, const dt__block2d *b)
{
    uint64_t gap = a->addr < b->addr ? b->addr - a->addr : a->addr - b->addr;
    return a->rows == b->rows && a->row_bytes == b->row_bytes && a->pitch == b->pitch &&
           dt__block2d_runs(a) > 1 && gap < a->pitch;
}

void dt__block2d_gather_rows(const dt__gather_part *part, int n, uint64_t offset, uint64_t bytes,
                             const dt__block2d ride[2], uint64_t *ride_done)
{
    /* the stripes in address order, the ride as the one with dst NULL */
    dt__gather_part ord[DT__GATHER_ROWS_MAX + 1];
    int m = 0;
    for (int i = 0; i <= n && i <= DT__GATHER_ROWS_MAX; i++) {
        dt__gather_part g = i < n ? part[i] : (dt__gather_part){NULL, ride ? &ride[1] : NULL};
        if (g.src == NULL)
            continue;
        int j = m++;
        for (; j > 0 && ord[j - 1].src->addr > g.src->addr; j--)
            ord[j] = ord[j - 1];
        ord[j] = g;
    }
    ride_cursor rc = {.c.stream = false};
    if (ride != NULL) { /* the ride's bytes go as far as the stripes' */
        *ride_done = offset;
        rc = ride_begin(ride, ride_done);
    }
    dt__run_cursor s = dt__run_cursor_at(ord[0].src, offset);
    for (uint64_t at = offset, end = offset + bytes; at < end;) {
        uint64_t len = dt__run_left(&s) < end - at ? dt__run_left(&s) : end - at;
        uint64_t in_row = s.row * s.pitch + s.off; /* the same in every stripe */
        for (int i = 0; i < m; i++) {
            const char *from = (const char *)(uintptr_t)(ord[i].src->addr + in_row);
            if (ord[i].dst != NULL)
                dt__copy_row((char *)ord[i].dst + (at - offset), from, len);
            else
                ride_copy(&rc, len);
        }
        dt__run_skip(&s, len);
        at += len;
    }
    if (rc.c.stream)
        dt__copy_stream_fence();
}

/*
 * A pair (sender, receiver) sees the same two descriptors, so both evaluate
 * the same rule: the side made of fewer runs is the one addressed remotely
 * (the kernel pins remote memory run by run, while local runs are cheap);
 * on a tie the receiver reads, as UCX's and Open MPI's single-copy paths do
 * (measured: a 2-rank 8 MiB all-gather by writes was 5% slower).
 */
static bool sender_writes(const dt__block2d *send, const dt__block2d *recv)
{
    return dt__block2d_runs(recv) < dt__block2d_runs(send);
}

dt_status dt__peer_copy_run(dt_comm *c, const char *what, const dt__op *op)
{
    const dt__block2d *mine = op->src, *theirs = op->dst;
    bool sending = op->n == 1;
    const dt__block2d *send = sending ? mine : theirs, *recv = sending ? theirs : mine;
    if (block_bytes(send) != block_bytes(recv)) {
        int from = sending ? c->rank : op->peer, to = sending ? op->peer : c->rank;
        return DT_ERR(
            DT_ERR_INVALID_ARG, "%s: rank %d sends %llu bytes to rank %d, which expects %llu", what,
            from, (unsigned long long)block_bytes(send), to, (unsigned long long)block_bytes(recv));
    }
    if (block_bytes(send) == 0 || sending != sender_writes(send, recv))
        return DT_OK; /* nothing to move, or the peer moves it */
    uint64_t off, len;
    dt__block2d_part(mine, op->part, op->nparts, &off, &len);
    return len == 0 ? DT_OK : c->ops->peer_copy(c, op->peer, sending, mine, theirs, off, len);
}
