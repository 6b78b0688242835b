/*
 * The TCP store's wire protocol, shared by server and client.
 *
 * Every message is a frame: a 4-byte big-endian body length, then the body.
 * A request body starts with a 1-byte opcode; a response body with a 1-byte
 * status. Integers are big-endian; strings are a u32 length and the bytes.
 *
 *   AUTH   token bytes (rest of body)            -> OK | AUTH_FAILED (then close)
 *   SET    str key, value bytes (rest of body)   -> OK
 *   GET    i64 timeout_ms, str key               -> OK value | TIMEOUT key
 *   WAIT   i64 timeout_ms, u32 n, n x str key    -> OK | TIMEOUT first-missing-key
 *   ADD    i64 delta, str key                    -> OK i64 new value | NOT_INTEGER
 *   DELPFX str prefix                            -> OK i64 deleted
 *
 * The first frame must be AUTH and at most DT_STORE_PRE_AUTH_MAX bytes; later
 * frames at most DT_STORE_FRAME_MAX. A timeout_ms < 0 waits forever.
 */
#ifndef DT_COMM_STORE_PROTO_H
#define DT_COMM_STORE_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define DT_STORE_FRAME_MAX    (64u << 20) /* 64 MiB: larger lengths drop the client */
#define DT_STORE_PRE_AUTH_MAX 4096u       /* an unauthenticated peer gets no more */
#define DT_STORE_HDR          4u

enum dt_store_op {
    DT_STORE_OP_AUTH = 1,
    DT_STORE_OP_SET,
    DT_STORE_OP_GET,
    DT_STORE_OP_WAIT,
    DT_STORE_OP_ADD,
    DT_STORE_OP_DELPFX,
};

enum dt_store_reply {
    DT_STORE_REPLY_OK = 0,
    DT_STORE_REPLY_TIMEOUT,
    DT_STORE_REPLY_BAD_REQUEST,
    DT_STORE_REPLY_AUTH_FAILED,
    DT_STORE_REPLY_NOT_INTEGER,
};

static inline void dt__be32_put(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline uint32_t dt__be32_get(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline void dt__be64_put(uint8_t *p, uint64_t v)
{
    dt__be32_put(p, (uint32_t)(v >> 32));
    dt__be32_put(p + 4, (uint32_t)v);
}

static inline uint64_t dt__be64_get(const uint8_t *p)
{
    return ((uint64_t)dt__be32_get(p) << 32) | dt__be32_get(p + 4);
}

/* A bounds-checked reader over one frame body. */
typedef struct dt_store_rd {
    const uint8_t *p;
    size_t left;
    int bad; /* set once a read ran past the end */
} dt_store_rd;

/* The next @p n bytes (advancing past them), or NULL and r->bad when fewer are left. */
static inline const uint8_t *dt__store_rd_take(dt_store_rd *r, size_t n)
{
    if (r->bad || r->left < n) {
        r->bad = 1;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    r->left -= n;
    return p;
}

static inline uint64_t dt__store_rd_u64(dt_store_rd *r)
{
    const uint8_t *p = dt__store_rd_take(r, 8);
    return p != NULL ? dt__be64_get(p) : 0;
}

static inline uint32_t dt__store_rd_u32(dt_store_rd *r)
{
    const uint8_t *p = dt__store_rd_take(r, 4);
    return p != NULL ? dt__be32_get(p) : 0;
}

/* A length-prefixed string: pointer into the frame (not NUL-terminated). */
static inline const uint8_t *dt__store_rd_str(dt_store_rd *r, uint32_t *len)
{
    *len = dt__store_rd_u32(r);
    return dt__store_rd_take(r, *len);
}

#endif
