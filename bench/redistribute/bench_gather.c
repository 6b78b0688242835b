/*
 * The send side of S(0) -> S(1) on one core, without the transport: one
 * rank's shard (16384 / p rows of 4 KiB, f32 [16384, 1024] split by rows)
 * gathered in 128 KiB pieces into p - 1 rings of 4 pieces (the shared-memory
 * windows) with its own stripe copied in step (dt__block2d_gather_rows, or
 * dt__block2d_gather_ride on 2 ranks), against the bare all-to-all's copies
 * of the same bytes (each block memcpy'd into its ring, the own block
 * streamed), and against a pass per stripe (what full windows make of the
 * shared pass). Thread CPU time, best of --iters, the caches flushed before
 * each: what the copies cost when nothing else runs, to tell them apart from
 * what a multi-rank run adds (waits, other ranks on the core).
 *
 *   bench_gather [--ranks P] [--iters N]
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/block2d.h"
#include "comm/copy_stream.h"

#define ROWS      16384u
#define ROW_BYTES 4096u
#define PIECE     (128u * 1024)
#define RING      4u
#define FLUSH     (64u << 20)

typedef struct setup {
    int p;
    size_t rows, stripe, block; /* my rows; bytes of a row per rank; per block */
    char *x, *y, *flush, *stage, *ring[16];
    dt__block2d col[16], ride[2];
} setup;

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static char *page_buf(size_t n, int fill)
{
    char *b = aligned_alloc(4096, n);
    if (b == NULL) {
        fprintf(stderr, "bench_gather: no memory for %zu bytes\n", n);
        exit(1);
    }
    memset(b, fill, n);
    return b;
}

/* The length of the piece at @p off: PIECE but for the block's last. */
static size_t piece_len(const setup *s, size_t off)
{
    return s->block - off < PIECE ? s->block - off : PIECE;
}

static char *ring_piece(const setup *s, int q, size_t off)
{
    return s->ring[q] + (off / PIECE % RING) * PIECE;
}

/* The sent stripes' destinations for the piece at @p off: each peer's ring,
 * or with @p staged a staging piece per peer. Returns how many (p - 1). */
static int piece_parts(setup *s, size_t off, bool staged, dt__gather_part *part)
{
    int n = 0;
    for (int q = 1; q < s->p; q++)
        part[n++] = (dt__gather_part){
            staged ? s->stage + (size_t)(q - 1) * PIECE : ring_piece(s, q, off), &s->col[q]};
    return n;
}

/* S(0) -> S(1)'s pass: every sent stripe and the own one, row by row. */
static void gather_pass(setup *s)
{
    uint64_t ride_done = 0;
    for (size_t off = 0; off < s->block; off += PIECE) {
        size_t len = piece_len(s, off);
        dt__gather_part part[16];
        int n = piece_parts(s, off, false, part);
        if (s->p > 2)
            dt__block2d_gather_rows(part, n, off, len, s->ride, &ride_done);
        else
            dt__block2d_gather_ride(part[0].dst, &s->col[1], off, len, s->ride, &ride_done);
    }
}

/* The same stripes in a pass each (what a full window makes of the shared
 * pass): the own stripe streamed, each sent one gathered alone. */
static void split_passes(setup *s)
{
    dt__block2d own = s->col[0];
    dt__block2d_copy(&s->ride[0], &own, 0, s->block);
    for (int q = 1; q < s->p; q++)
        for (size_t off = 0; off < s->block; off += PIECE)
            dt__block2d_gather(ring_piece(s, q, off), &s->col[q], off, piece_len(s, off));
}

/* One pass into a staging piece per stripe, each then copied to its ring
 * (what a pass could do when windows are full: stage, drain later). */
static void staged_pass(setup *s)
{
    uint64_t ride_done = 0;
    for (size_t off = 0; off < s->block; off += PIECE) {
        size_t len = piece_len(s, off);
        dt__gather_part part[16];
        int n = piece_parts(s, off, true, part);
        dt__block2d_gather_rows(part, n, off, len, s->ride, &ride_done);
        for (int q = 1; q < s->p; q++)
            memcpy(ring_piece(s, q, off), s->stage + (size_t)(q - 1) * PIECE, len);
    }
}

/* The bare all-to-all's: the own block streamed, each sent block memcpy'd. */
static void bare_copies(setup *s)
{
    dt__copy_stream(s->y, s->x, s->block);
    dt__copy_stream_fence();
    for (int q = 1; q < s->p; q++)
        for (size_t off = 0; off < s->block; off += PIECE)
            memcpy(ring_piece(s, q, off), s->x + (size_t)q * s->block + off, piece_len(s, off));
}

static double best_of(setup *s, int iters, void (*pass)(setup *))
{
    double best = 1e30;
    for (int it = 0; it < iters; it++) {
        memset(s->flush, it, FLUSH); /* the shard comes from memory, as in a run */
        double t0 = cpu_s();
        pass(s);
        double t = cpu_s() - t0;
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    setup s = {.p = 4};
    int iters = 15;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--ranks") == 0)
            s.p = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--iters") == 0)
            iters = atoi(argv[i + 1]);
    }
    if (s.p < 2 || s.p > 16 || ROW_BYTES % (unsigned)s.p != 0 || iters < 1) {
        fprintf(stderr, "usage: bench_gather [--ranks 2|4|8|16] [--iters N >= 1]\n");
        return 2;
    }
    s.rows = ROWS / (size_t)s.p;
    s.stripe = ROW_BYTES / (size_t)s.p;
    s.block = s.rows * s.stripe;
    s.x = page_buf(s.rows * ROW_BYTES, 1);
    s.y = page_buf(s.block, 2);
    s.flush = page_buf(FLUSH, 3);
    s.stage = page_buf((size_t)(s.p - 1) * PIECE, 4);
    for (int q = 0; q < s.p; q++) {
        s.ring[q] = page_buf(RING * PIECE, 0);
        s.col[q] = (dt__block2d){(uint64_t)(uintptr_t)(s.x + (size_t)q * s.stripe), s.rows,
                                 s.stripe, ROW_BYTES};
    }
    s.ride[0] = (dt__block2d){(uint64_t)(uintptr_t)s.y, 1, s.block, s.block};
    s.ride[1] = s.col[0]; /* rank 0: its own stripe comes first in each row */
    double g = best_of(&s, iters, gather_pass), b = best_of(&s, iters, bare_copies);
    double sp = best_of(&s, iters, split_passes), st = best_of(&s, iters, staged_pass);
    printf("%d ranks' shard (%zu MiB), best of %d, / bare copies (%.3f ms): one pass %.2f, a "
           "pass per stripe %.2f, one pass staged %.2f\n",
           s.p, s.rows * ROW_BYTES >> 20, iters, b * 1e3, g / b, sp / b, st / b);
    return 0;
}
