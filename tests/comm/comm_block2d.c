/*
 * 2-D block copies of one process (comm/block2d.h): dt__block2d_gather_ride,
 * the gather of a strided send block into window pieces with another block
 * copied in step (S(0) -> S(1)'s own stripe). The ride may differ from the
 * sent block in rows, row length and size (uneven shards), pieces come in
 * any length, and the gaps between rows must stay untouched; one ride is big
 * enough for streaming stores. Stripes of one buffer put the ride before or
 * after the sent stripe (the order in which each row is copied). And
 * dt__block2d_gather_rows: the stripes of several sends and the ride from
 * one pass over the rows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "comm/block2d.h"

static dt__block2d block_of(unsigned char *base, uint64_t rows, uint64_t row_bytes, uint64_t pitch)
{
    return (dt__block2d){(uint64_t)(uintptr_t)base, rows, row_bytes, pitch};
}

/* Byte @p i of block @p b's stream. */
static unsigned char *at(const dt__block2d *b, uint64_t i)
{
    return (unsigned char *)(uintptr_t)(b->addr + (i / b->row_bytes) * b->pitch + i % b->row_bytes);
}

/* Gather all of @p src in pieces of @p piece bytes, riding ride[1] -> a
 * fresh ride[0] of the same shape; checks every byte of both. */
static void check_blocks(dt__block2d src, dt__block2d rsrc, uint64_t piece)
{
    uint64_t n = src.rows * src.row_bytes;
    uint64_t rrows = rsrc.rows, rrow_bytes = rsrc.row_bytes, rpitch = rsrc.pitch;
    uint64_t rn = rrows * rrow_bytes;
    unsigned char *out = malloc(n), *rdst = malloc(rrows * rpitch + 1);
    assert_non_null(out);
    assert_non_null(rdst);
    memset(rdst, 0xEE, rrows * rpitch + 1);
    dt__block2d ride[2] = {block_of(rdst, rrows, rrow_bytes, rpitch), rsrc};
    uint64_t done = 0;
    for (uint64_t off = 0; off < n; off += piece) {
        uint64_t len = n - off < piece ? n - off : piece;
        dt__block2d_gather_ride(out + off, &src, off, len, ride, &done);
        assert_true(done <= rn);
    }
    assert_int_equal(done, rn);
    for (uint64_t i = 0; i < n; i++)
        assert_int_equal(out[i], *at(&src, i));
    for (uint64_t i = 0; i < rn; i++)
        assert_int_equal(*at(&ride[0], i), *at(&ride[1], i));
    for (uint64_t r = 0; r < rrows; r++) /* the gaps between the ride's rows */
        for (uint64_t c = rrow_bytes; c < rpitch; c++)
            assert_int_equal(rdst[r * rpitch + c], 0xEE);
    assert_int_equal(rdst[rrows * rpitch], 0xEE);
    free(out);
    free(rdst);
}

static void fill(unsigned char *b, uint64_t n, unsigned mul)
{
    for (uint64_t i = 0; i < n; i++)
        b[i] = (unsigned char)(i * mul + 1);
}

/* The sent block and the ride in buffers of their own. */
static void check_case(uint64_t rows, uint64_t row_bytes, uint64_t pitch, uint64_t rrows,
                       uint64_t rrow_bytes, uint64_t rpitch, uint64_t piece)
{
    unsigned char *sbuf = malloc(rows * pitch), *rsrc = malloc(rrows * rpitch);
    assert_non_null(sbuf);
    assert_non_null(rsrc);
    fill(sbuf, rows * pitch, 7);
    fill(rsrc, rrows * rpitch, 13);
    check_blocks(block_of(sbuf, rows, row_bytes, pitch), block_of(rsrc, rrows, rrow_bytes, rpitch),
                 piece);
    free(sbuf);
    free(rsrc);
}

/* Column stripes of one [rows, pitch] buffer, as S(0) -> S(1) sends: the
 * sent one at byte @p scol of each row (@p sbytes wide), the ride at @p rcol
 * (@p rbytes wide), the ride before or after the sent stripe. */
static void check_stripes(uint64_t rows, uint64_t pitch, uint64_t scol, uint64_t sbytes,
                          uint64_t rcol, uint64_t rbytes, uint64_t piece)
{
    unsigned char *buf = malloc(rows * pitch);
    assert_non_null(buf);
    fill(buf, rows * pitch, 7);
    check_blocks(block_of(buf + scol, rows, sbytes, pitch),
                 block_of(buf + rcol, rows, rbytes, pitch), piece);
    free(buf);
}

static void test_same_rows(void **state)
{
    (void)state;
    check_case(64, 2048, 4096, 64, 2048, 4096, 128 * 1024); /* S(0) -> S(1), 2 ranks */
    check_case(64, 2048, 4096, 64, 2048, 2048, 5000);       /* contiguous ride, odd pieces */
    check_case(300, 1376, 4128, 300, 1368, 4128, 65536);    /* uneven columns (3 ranks) */
}

static void test_other_shapes(void **state)
{
    (void)state;
    check_case(100, 12, 40, 7, 33, 50, 96);  /* short runs, ride of other rows */
    check_case(5, 1000, 1000, 3, 10, 20, 7); /* contiguous send, tiny pieces */
    check_case(9, 3, 8, 1, 1, 1, 4);         /* a one-byte ride */
}

static void test_stripes_either_order(void **state)
{
    (void)state; /* the ride is copied first or last in each row, by address */
    check_stripes(64, 4096, 2048, 2048, 0, 2048, 128 * 1024); /* rank 1 of 2 */
    check_stripes(64, 4096, 0, 2048, 2048, 2048, 128 * 1024); /* rank 0 of 2 */
    check_stripes(96, 4096, 0, 1024, 3072, 1024, 5000);       /* rank 3 of 4, odd pieces */
    check_stripes(50, 4128, 2752, 1376, 1376, 1376, 777);     /* rank 1 of 3 */
    check_stripes(33, 4130, 1377, 1376, 2753, 1377, 1000);    /* uneven, ride after */
    check_stripes(33, 4130, 2754, 1376, 0, 1377, 3);          /* uneven, ride before */
}

static void test_streaming_ride(void **state)
{
    (void)state; /* a ride of 4 MiB and more takes streaming stores */
    check_case(2048, 2048, 4096, 2048, 2048, 4096, 128 * 1024);
}

/* dt__block2d_gather_rows over the @p k stripes of @p w bytes of a [rows,
 * pitch] buffer (all but stripe @p rk, which rides into a contiguous block;
 * none rides with rk < 0), in pieces of @p piece bytes; checks every byte,
 * and that the ride's copy leaves the bytes around it untouched. */
static void check_rows(uint64_t rows, uint64_t pitch, int k, uint64_t w, int rk, uint64_t piece)
{
    uint64_t n = rows * w;
    unsigned char *buf = malloc(rows * pitch), *out = malloc((size_t)k * n + 1);
    assert_non_null(buf);
    assert_non_null(out);
    fill(buf, rows * pitch, 7);
    memset(out, 0xEE, (size_t)k * n + 1);
    dt__block2d blk[DT__GATHER_ROWS_MAX];
    for (int i = 0; i < k; i++) {
        blk[i] = block_of(buf + i * w, rows, w, pitch);
        assert_true(dt__block2d_same_rows(&blk[0], &blk[i]));
    }
    dt__block2d ride[2] = {block_of(out + (size_t)(rk < 0 ? 0 : rk) * n, 1, n, n),
                           blk[rk < 0 ? 0 : rk]};
    uint64_t done = 0;
    for (uint64_t off = 0; off < n; off += piece) {
        uint64_t len = n - off < piece ? n - off : piece;
        dt__gather_part part[DT__GATHER_ROWS_MAX];
        int np = 0;
        for (int i = k - 1; i >= 0; i--) /* not in address order */
            if (i != rk)
                part[np++] = (dt__gather_part){out + (size_t)i * n + off, &blk[i]};
        assert_int_equal(done, rk < 0 ? 0 : off);
        dt__block2d_gather_rows(part, np, off, len, rk < 0 ? NULL : ride, &done);
    }
    for (int i = 0; i < k; i++)
        for (uint64_t j = 0; j < n; j++)
            assert_int_equal(out[(size_t)i * n + j], *at(&blk[i], j));
    assert_int_equal(out[(size_t)k * n], 0xEE);
    free(buf);
    free(out);
}

static void test_rows_in_one_pass(void **state)
{
    (void)state;
    check_rows(64, 4096, 4, 1024, 0, 128 * 1024);   /* S(0) -> S(1), 4 ranks, rank 0 */
    check_rows(64, 4096, 4, 1024, 2, 5000);         /* rank 2, odd pieces */
    check_rows(40, 4100, 4, 1025, -1, 777);         /* no ride, a gap after the stripes */
    check_rows(17, 24, 3, 8, 1, 3);                 /* short runs, tiny pieces */
    check_rows(1024, 8192, 2, 4096, 1, 128 * 1024); /* a 4 MiB ride: streaming stores */
}

static void test_same_rows_rule(void **state)
{
    (void)state; /* stripes of the same rows: same shape, less than a row apart */
    unsigned char b[64];
    dt__block2d a = block_of(b, 4, 4, 16);
    dt__block2d near = block_of(b + 12, 4, 4, 16), far = block_of(b + 16, 4, 4, 16);
    assert_true(dt__block2d_same_rows(&a, &near));
    assert_false(dt__block2d_same_rows(&a, &far));
    dt__block2d wider = block_of(b + 4, 4, 8, 16), one_run = block_of(b, 4, 16, 16);
    assert_false(dt__block2d_same_rows(&a, &wider));
    assert_false(dt__block2d_same_rows(&one_run, &one_run));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_rows),
        cmocka_unit_test(test_other_shapes),
        cmocka_unit_test(test_stripes_either_order),
        cmocka_unit_test(test_streaming_ride),
        cmocka_unit_test(test_rows_in_one_pass),
        cmocka_unit_test(test_same_rows_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
