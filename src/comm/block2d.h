/*
 * 2-D blocks of bytes: the unit of same-host peer copies (CMA, shared memory)
 * and of the packed all-to-all. A descriptor is sent between ranks as is.
 */
#ifndef DT_COMM_BLOCK2D_H
#define DT_COMM_BLOCK2D_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A 2-D block of bytes at an address of this or a peer process: rows rows of
 * row_bytes, starting pitch bytes apart. Sent between ranks of one host as
 * is (a descriptor), so fixed-width fields.
 */
typedef struct dt__block2d {
    uint64_t addr, rows, row_bytes, pitch;
} dt__block2d;

/* Contiguous runs the block is made of (1 when it is one run). */
uint64_t dt__block2d_runs(const dt__block2d *b);
/* Copy bytes [offset, offset + bytes) of block @p src's byte stream (row by
 * row) to the same bytes of block @p dst's (the shapes may differ). */
void dt__block2d_copy(const dt__block2d *dst, const dt__block2d *src, uint64_t offset,
                      uint64_t bytes);
/* Bytes [offset, offset + bytes) of block @p src's byte stream into @p dst
 * (contiguous), with ordinary stores: a shared-memory window stays cached for
 * the rank that copies it out. */
void dt__block2d_gather(void *dst, const dt__block2d *src, uint64_t offset, uint64_t bytes);
/* dt__block2d_gather, and the copy of block ride[1] to ride[0] in step with
 * it: after each stretch of @p src's rows, ride's bytes are copied up to the
 * same share of its stream (*ride_done bytes so far). Two column stripes of
 * the same rows (S(0) -> S(1)'s own and sent blocks) are then read row by
 * row, each row once from memory, as one sequential stream. */
void dt__block2d_gather_ride(void *dst, const dt__block2d *src, uint64_t offset, uint64_t bytes,
                             const dt__block2d ride[2], uint64_t *ride_done);
/* One stripe of dt__block2d_gather_rows: block @p src's bytes go to @p dst. */
typedef struct dt__gather_part {
    void *dst;
    const dt__block2d *src;
} dt__gather_part;
/* Whether blocks @p a and @p b are column stripes of the same rows (same
 * shape, starting less than a row apart): their byte streams then cover the
 * same rows at the same offsets, and dt__block2d_gather_rows reads them in
 * one pass. */
bool dt__block2d_same_rows(const dt__block2d *a, const dt__block2d *b);
/* At most this many parts in one dt__block2d_gather_rows. */
#define DT__GATHER_ROWS_MAX 16
/* dt__block2d_gather of bytes [offset, offset + bytes) for each of @p n
 * (1 to DT__GATHER_ROWS_MAX) parts, whose blocks are column stripes of the same rows
 * (dt__block2d_same_rows), and, with @p ride not NULL, the copy of the same
 * bytes of ride[1] (the same rows too) to ride[0], *ride_done (== offset)
 * advanced: each row is read once, its stripes in address order, where a
 * pass per stripe read 1 KiB of every 4 KiB row at ~2x the cost per byte of
 * a contiguous read (S(0) -> S(1) on 4 ranks). */
void dt__block2d_gather_rows(const dt__gather_part *part, int n, uint64_t offset, uint64_t bytes,
                             const dt__block2d ride[2], uint64_t *ride_done);
/* The byte range of part @p part of @p nparts of @p b: whole rows, so the
 * parts of blocks that share rows (column stripes) cover the same rows. */
void dt__block2d_part(const dt__block2d *b, uint32_t part, uint32_t nparts, uint64_t *off,
                      uint64_t *len);

/* A position in a block's byte stream, run by run (one run if contiguous). */
typedef struct dt__run_cursor {
    uint64_t addr, rows, run, pitch; /* run: bytes per run */
    uint64_t row, off;               /* the position: run index, byte in it */
} dt__run_cursor;

dt__run_cursor dt__run_cursor_at(const dt__block2d *b, uint64_t offset);
static inline uint64_t dt__run_left(const dt__run_cursor *c)
{
    return c->run - c->off;
}
static inline char *dt__run_ptr(const dt__run_cursor *c)
{
    return (char *)(uintptr_t)(c->addr + c->row * c->pitch + c->off);
}
static inline void dt__run_skip(dt__run_cursor *c, uint64_t n)
{
    c->off += n;
    if (c->off == c->run) {
        c->row++;
        c->off = 0;
    }
}

#endif
