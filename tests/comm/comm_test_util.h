/*
 * Helpers for the multi-rank comm tests: every rank fills its input from
 * (rank, index) deterministically, so each rank can compute locally what any
 * collective must return. Values are small integers (sums within +-6 * ranks,
 * products +-2^k), exact in every dtype including bf16 and f16, so results
 * must match bit for bit whatever the reduction order.
 */
#ifndef DT_TEST_COMM_UTIL_H
#define DT_TEST_COMM_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "comm/comm_impl.h" /* dt__comm_isolate */
#include "dtensor.h"

static const dt_dtype ct_dtypes[] = {DT_DTYPE_F32, DT_DTYPE_F64, DT_DTYPE_BF16,
                                     DT_DTYPE_F16, DT_DTYPE_I32, DT_DTYPE_I64};
#define CT_NDTYPES (sizeof(ct_dtypes) / sizeof(ct_dtypes[0]))
static const size_t ct_sizes[] = {0, 1, 7, 4095, (1u << 20) + 3};
#define CT_NSIZES (sizeof(ct_sizes) / sizeof(ct_sizes[0]))

#define CT_OK(call)                                                                                \
    do {                                                                                           \
        dt_status ct_s_ = (call);                                                                  \
        if (ct_s_ != DT_OK)                                                                        \
            fail_msg("%s -> %s: %s", #call, dt_status_str(ct_s_), dt_last_error());                \
    } while (0)

/* The integer-valued input of (rank, i) for reduce op @p op. */
static inline double ct_value(int rank, size_t i, dt_reduce_op op)
{
    if (op == DT_REDUCE_OP_PROD) {
        int m = (int)((i + (size_t)rank) % 3);
        return m == 0 ? 2.0 : (m == 1 ? 1.0 : -1.0);
    }
    return (double)((int)(((size_t)rank * 7 + i * 3) % 13) - 6);
}

static inline void ct_store(void *buf, size_t i, dt_dtype dt, double v)
{
    switch (dt) {
    case DT_DTYPE_F32:
        ((float *)buf)[i] = (float)v;
        break;
    case DT_DTYPE_F64:
        ((double *)buf)[i] = v;
        break;
    case DT_DTYPE_BF16:
        ((uint16_t *)buf)[i] = dt_f32_to_bf16((float)v);
        break;
    case DT_DTYPE_F16:
        ((uint16_t *)buf)[i] = dt_f32_to_f16((float)v);
        break;
    case DT_DTYPE_I32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case DT_DTYPE_I64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    default:
        break;
    }
}

/* Values repeat with period 39 in the index (13 for sums, 3 for products). */
#define CT_PERIOD 39

/* Fill @p n elements of rank @p rank's input, element i having global index base + i. */
static inline void ct_fill(void *buf, size_t n, size_t base, dt_dtype dt, int rank, dt_reduce_op op)
{
    size_t esz = dt_dtype_size(dt);
    char tab[CT_PERIOD * 8];
    for (size_t k = 0; k < CT_PERIOD; k++)
        ct_store(tab, k, dt, ct_value(rank, k, op));
    for (size_t i = 0; i < n; i++)
        memcpy((char *)buf + i * esz, tab + ((base + i) % CT_PERIOD) * esz, esz);
}

/* The reduction over @p p ranks of element @p i, stored as the collective computes it. */
static inline void ct_reduced(void *buf, size_t at, size_t i, dt_dtype dt, int p, dt_reduce_op op)
{
    double acc = ct_value(0, i, op);
    for (int r = 1; r < p; r++) {
        double v = ct_value(r, i, op);
        switch (op) {
        case DT_REDUCE_OP_MAX:
            acc = v > acc ? v : acc;
            break;
        case DT_REDUCE_OP_MIN:
            acc = v < acc ? v : acc;
            break;
        case DT_REDUCE_OP_PROD:
            acc *= v;
            break;
        default:
            acc += v;
            break;
        }
    }
    if (op != DT_REDUCE_OP_AVG) {
        ct_store(buf, at, dt, acc);
        return;
    }
    switch (dt) { /* avg: the sum is exact; one division in the dtype's arithmetic */
    case DT_DTYPE_F32:
        ((float *)buf)[at] = (float)acc / (float)p;
        break;
    case DT_DTYPE_F64:
        ((double *)buf)[at] = acc / (double)p;
        break;
    case DT_DTYPE_BF16:
        ((uint16_t *)buf)[at] = dt_f32_to_bf16((float)acc / (float)p);
        break;
    case DT_DTYPE_F16:
        ((uint16_t *)buf)[at] = dt_f32_to_f16((float)acc / (float)p);
        break;
    case DT_DTYPE_I32:
        ((int32_t *)buf)[at] = (int32_t)acc / p;
        break;
    case DT_DTYPE_I64:
        ((int64_t *)buf)[at] = (int64_t)acc / p;
        break;
    default:
        break;
    }
}

/* want[i] = the reduction over p ranks of global element base + i, for n elements. */
static inline void ct_want(void *want, size_t n, size_t base, dt_dtype dt, int p, dt_reduce_op op)
{
    size_t esz = dt_dtype_size(dt);
    char tab[CT_PERIOD * 8];
    for (size_t k = 0; k < CT_PERIOD; k++)
        ct_reduced(tab, k, k, dt, p, op);
    for (size_t i = 0; i < n; i++)
        memcpy((char *)want + i * esz, tab + ((base + i) % CT_PERIOD) * esz, esz);
}

/* Compare @p n elements; fail naming the first differing index. */
static inline void ct_expect_equal(const void *got, const void *want, size_t n, dt_dtype dt,
                                   const char *what)
{
    size_t esz = dt_dtype_size(dt);
    if (n == 0 || memcmp(got, want, n * esz) == 0)
        return;
    for (size_t i = 0; i < n; i++) {
        if (memcmp((const char *)got + i * esz, (const char *)want + i * esz, esz) != 0) {
            uint64_t g = 0, w = 0;
            memcpy(&g, (const char *)got + i * esz, esz);
            memcpy(&w, (const char *)want + i * esz, esz);
            fail_msg("%s: %s element %zu of %zu: got bits 0x%llx, want 0x%llx", what,
                     dt_dtype_name(dt), i, n, (unsigned long long)g, (unsigned long long)w);
        }
    }
}

static inline void *ct_alloc(size_t n, dt_dtype dt)
{
    void *p = malloc(n * dt_dtype_size(dt) + 16);
    assert_non_null(p);
    memset(p, 0xA5, n * dt_dtype_size(dt) + 16); /* garbage: results must overwrite it */
    return p;
}

/* One runtime per test process, shared by the cmocka tests in it. */
static dt_runtime *ct_rt;

static inline int ct_setup(void **state)
{
    (void)state;
    setenv("DT_TIMEOUT_S", "60", 0); /* a broken test fails instead of hanging the suite */
    dt_status st = dt_init(NULL, &ct_rt);
    if (st != DT_OK) {
        fprintf(stderr, "dt_init: %s: %s\n", dt_status_str(st), dt_last_error());
        return -1;
    }
    return 0;
}

static inline int ct_teardown(void **state)
{
    (void)state;
    if (ct_rt != NULL)
        dt_comm_barrier(dt_runtime_world(ct_rt), NULL);
    dt_runtime_destroy(ct_rt);
    ct_rt = NULL;
    return 0;
}

/* ------------------------------------------------------------ failures */

/*
 * A failure on a comm aborts its whole family (the world and every comm split
 * from it) on every rank. A test that breaks a comm on purpose breaks a
 * duplicate of the world with a family of its own (dt__comm_isolate), checks
 * the failure reached every rank and stuck, and goes on with the world.
 */
static inline dt_comm *ct_isolated_dup(void)
{
    dt_comm *w = dt_runtime_world(ct_rt), *dup = NULL;
    CT_OK(dt_comm_split(w, 0, dt_comm_rank(w), &dup));
    dt__comm_isolate(dup);
    return dup;
}

/* @p c was aborted (on this rank too, within seconds): the next calls fail at
 * once with the recorded error, which names the world rank that failed first;
 * then it is destroyed and the world still works. */
static inline void ct_expect_aborted(dt_comm *c, dt_status want)
{
    int32_t x = 1;
    dt_status st = dt_comm_allreduce(c, &x, &x, 1, DT_DTYPE_I32, DT_REDUCE_OP_SUM, NULL);
    if (st == DT_OK)
        fail_msg("a collective on the aborted comm succeeded");
    if (want != DT_OK)
        assert_int_equal(st, want);
    if (strstr(dt_last_error(), "aborted after world rank") == NULL)
        fail_msg("the error does not name the rank that failed: %s", dt_last_error());
    assert_int_equal(dt_comm_barrier(c, NULL), st);
    assert_int_equal(dt_comm_status(c), st);
    dt_comm_destroy(c);
    CT_OK(dt_comm_barrier(dt_runtime_world(ct_rt), NULL));
}

/* ------------------------------------------------------------ point-to-point */

/* Byte @p i of message @p m from rank @p from. */
static inline unsigned char ct_msg_byte(int from, int m, size_t i)
{
    return (unsigned char)(from * 131 + m * 17 + (int)(i % 251));
}

/* Message @p m of rank @p from, @p n bytes (caller frees). */
static inline unsigned char *ct_msg_filled(int from, int m, size_t n)
{
    unsigned char *b = malloc(n > 0 ? n : 1);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++)
        b[i] = ct_msg_byte(from, m, i);
    return b;
}

/* Fails naming the first byte of @p got that is not message @p m from @p from. */
static inline void ct_msg_check(const unsigned char *got, int from, int m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != ct_msg_byte(from, m, i))
            fail_msg("message %d (%zu bytes) from rank %d, byte %zu: %u, expected %u", m, n, from,
                     i, got[i], ct_msg_byte(from, m, i));
}

/*
 * Every rank sends @p n messages (message m: lens[m] bytes) to its right
 * under @p tag, on a duplicate of the world when m % every == 0 and on the
 * world otherwise, before it posts a receive. The receives go up the
 * duplicate's first, in order within each comm, and are waited for in
 * reverse; every message must arrive intact.
 */
static inline void ct_sent_before_received(const size_t *lens, int n, int every, int tag)
{
    dt_comm *w = dt_runtime_world(ct_rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    const int right = (me + 1) % p, left = (me + p - 1) % p;
    dt_comm *dup = NULL;
    CT_OK(dt_comm_split(w, 0, me, &dup));
    unsigned char **out = calloc((size_t)n, sizeof(*out)), **in = calloc((size_t)n, sizeof(*in));
    dt_work **sw = calloc((size_t)n, sizeof(*sw)), **rw = calloc((size_t)n, sizeof(*rw));
    assert_true(out != NULL && in != NULL && sw != NULL && rw != NULL);
    for (int m = 0; m < n; m++) {
        out[m] = ct_msg_filled(me, m, lens[m]);
        in[m] = calloc(1, lens[m] > 0 ? lens[m] : 1);
        CT_OK(dt_comm_send(m % every ? w : dup, out[m], lens[m], DT_DTYPE_U8, right, tag, &sw[m]));
    }
    for (int on_world = 0; on_world < 2; on_world++)
        for (int m = 0; m < n; m++)
            if ((m % every != 0) == on_world)
                CT_OK(dt_comm_recv(on_world ? w : dup, in[m], lens[m], DT_DTYPE_U8, left, tag,
                                   &rw[m]));
    for (int m = n - 1; m >= 0; m--) {
        CT_OK(dt_work_wait(rw[m], -1));
        dt_work_release(rw[m]);
        ct_msg_check(in[m], left, m, lens[m]);
    }
    for (int m = 0; m < n; m++) {
        CT_OK(dt_work_wait(sw[m], -1));
        dt_work_release(sw[m]);
        free(out[m]);
        free(in[m]);
    }
    free(out);
    free(in);
    free(sw);
    free(rw);
    dt_comm_destroy(dup);
}

#endif
