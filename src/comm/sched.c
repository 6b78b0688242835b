/*
 * Building collective schedules (see comm_impl.h): growable arrays of ops
 * and rounds. Allocation failures are remembered in s->status and reported
 * once by the caller, so algorithm files stay free of per-add checks.
 */
#include "comm/comm_impl.h"
#include "comm/sched.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"

void dt__sched_init(dt__sched *s, dt_dtype dtype, dt_reduce_op op)
{
    s->ops = s->inline_ops;
    s->nops = 0;
    s->cap_ops = DT__SCHED_INLINE_OPS;
    s->rounds = s->inline_rounds;
    s->nrounds = 0;
    s->cap_rounds = DT__SCHED_INLINE_ROUNDS;
    s->dtype = dtype;
    s->op = (op == DT_REDUCE_OP_AVG) ? DT_REDUCE_OP_SUM : op;
    s->divisor = 0;
    s->scratch = NULL;
    s->scratch_block = 0;
    s->p2p = false;
    s->p2p_tag = 0;
    s->status = DT_OK;
}

void dt__sched_free(dt__sched *s)
{
    if (s == NULL)
        return;
    if (s->ops != s->inline_ops)
        free(s->ops);
    if (s->rounds != s->inline_rounds)
        free(s->rounds);
    if (s->scratch != NULL)
        dt__host_allocator.free(0, s->scratch, s->scratch_block);
    s->ops = s->inline_ops;
    s->rounds = s->inline_rounds;
    s->scratch = NULL;
    s->nops = s->nrounds = 0;
}

void dt__sched_move(dt__sched *dst, dt__sched *src)
{
    /* the small header by value; the ops/rounds only as far as used */
    bool inl_ops = src->ops == src->inline_ops, inl_rounds = src->rounds == src->inline_rounds;
    dt__sched_init(dst, src->dtype, src->op);
    dst->divisor = src->divisor;
    dst->scratch = src->scratch;
    dst->scratch_block = src->scratch_block;
    dst->p2p = src->p2p;
    dst->p2p_tag = src->p2p_tag;
    dst->status = src->status;
    dst->nops = src->nops;
    dst->nrounds = src->nrounds;
    if (inl_ops)
        memcpy(dst->inline_ops, src->ops, src->nops * sizeof(dt__op));
    else
        dst->ops = src->ops, dst->cap_ops = src->cap_ops;
    if (inl_rounds)
        memcpy(dst->inline_rounds, src->rounds, src->nrounds * sizeof(dt__round));
    else
        dst->rounds = src->rounds, dst->cap_rounds = src->cap_rounds;
    dt__sched_init(src, src->dtype, src->op); /* src owns nothing now */
}

/* Grow @p *arr (which may be the schedule's inline storage) to hold @p need. */
static bool grow(void **arr, size_t *cap, size_t need, size_t elem, void *inline_store)
{
    if (need <= *cap)
        return true;
    size_t ncap = *cap * 2;
    while (ncap < need)
        ncap *= 2;
    void *p = (*arr == inline_store) ? malloc(ncap * elem) : realloc(*arr, ncap * elem);
    if (p == NULL)
        return false;
    if (*arr == inline_store)
        memcpy(p, inline_store, *cap * elem);
    *arr = p;
    *cap = ncap;
    return true;
}

void dt__sched_round(dt__sched *s, bool early)
{
    if (s->status != DT_OK)
        return;
    if (!grow((void **)&s->rounds, &s->cap_rounds, s->nrounds + 1, sizeof(*s->rounds),
              s->inline_rounds)) {
        s->status =
            DT_ERR(DT_ERR_NO_MEMORY, "collective schedule: no memory for round %zu", s->nrounds);
        return;
    }
    s->rounds[s->nrounds++] = (dt__round){.first = s->nops, .count = 0, .early = early};
}

static void add(dt__sched *s, dt__op op)
{
    if (s->status != DT_OK)
        return;
    if (s->nrounds == 0)
        dt__sched_round(s, false);
    if (s->status != DT_OK)
        return;
    if (!grow((void **)&s->ops, &s->cap_ops, s->nops + 1, sizeof(*s->ops), s->inline_ops)) {
        s->status = DT_ERR(DT_ERR_NO_MEMORY, "collective schedule: no memory for op %zu", s->nops);
        return;
    }
    s->ops[s->nops++] = op;
    s->rounds[s->nrounds - 1].count++;
}

void dt__sched_send(dt__sched *s, const void *src, size_t bytes, int peer)
{
    add(s, (dt__op){.kind = DT__OP_SEND, .peer = peer, .src = src, .n = bytes});
}

void dt__sched_send2d(dt__sched *s, const dt__block2d *src, const dt__block2d *ride, int peer)
{
    add(s, (dt__op){.kind = DT__OP_SEND2D,
                    .peer = peer,
                    .src = src,
                    .dst = (void *)(uintptr_t)ride,
                    .n = (size_t)(src->rows * src->row_bytes)});
}

void dt__sched_recv(dt__sched *s, void *dst, size_t bytes, int peer)
{
    add(s, (dt__op){.kind = DT__OP_RECV, .peer = peer, .dst = dst, .n = bytes});
}

void dt__sched_recv_reduce(dt__sched *s, void *dst, const void *src, size_t bytes, int peer)
{
    add(s, (dt__op){.kind = DT__OP_RECV, .peer = peer, .dst = dst, .src = src, .n = bytes});
}

void dt__sched_reduce(dt__sched *s, void *dst, const void *src, size_t count)
{
    if (count > 0)
        add(s, (dt__op){.kind = DT__OP_REDUCE, .peer = -1, .dst = dst, .src = src, .n = count});
}

void dt__sched_reduce3(dt__sched *s, void *dst, const void *x, const void *src, size_t count)
{
    if (count > 0)
        add(s, (dt__op){.kind = DT__OP_REDUCE,
                        .peer = -1,
                        .dst = dst,
                        .src = src,
                        .aux = (void *)(uintptr_t)x,
                        .n = count});
}

void dt__sched_copy(dt__sched *s, void *dst, const void *src, size_t bytes)
{
    if (bytes > 0 && dst != src)
        add(s, (dt__op){.kind = DT__OP_COPY, .peer = -1, .dst = dst, .src = src, .n = bytes});
}

void dt__sched_scale(dt__sched *s, void *dst, size_t count, int divisor)
{
    if (count > 0)
        add(s, (dt__op){.kind = DT__OP_SCALE, .peer = divisor, .dst = dst, .n = count});
}

void *dt__sched_scratch(dt__sched *s, size_t bytes)
{
    if (s->status != DT_OK)
        return NULL;
    if (s->scratch != NULL)
        dt__host_allocator.free(0, s->scratch, s->scratch_block);
    s->scratch = NULL;
    /* From the caching host allocator: a fresh malloc of a large block each
     * call is a fresh mmap, and faulting its pages in cost a 64 MiB
     * reduce-scatter more than its transfers (issue 21). */
    bool hit = false;
    dt_status st =
        dt__host_allocator.alloc(0, bytes > 0 ? bytes : 1, &s->scratch, &s->scratch_block, &hit);
    if (st != DT_OK) {
        s->scratch = NULL;
        s->status = DT_ERR(st, "collective schedule: no memory for %zu bytes of scratch: %s", bytes,
                           dt_last_error());
    }
    return s->scratch;
}

void dt__sched_copy2d(dt__sched *s, const dt__block2d *dst, const dt__block2d *src, uint32_t part,
                      uint32_t nparts)
{
    if (src->rows > 0 && src->row_bytes > 0 && dst->addr != src->addr)
        add(s, (dt__op){.kind = DT__OP_COPY2D,
                        .peer = -1,
                        .dst = (void *)dst,
                        .src = src,
                        .part = part,
                        .nparts = nparts});
}

void dt__sched_peer_copy(dt__sched *s, int peer, bool sending, const dt__block2d *mine,
                         const dt__block2d *theirs, uint64_t *status, uint32_t part,
                         uint32_t nparts)
{
    add(s, (dt__op){.kind = DT__OP_PEER_COPY,
                    .peer = peer,
                    .dst = (void *)theirs,
                    .src = mine,
                    .n = sending ? 1 : 0,
                    .aux = status,
                    .part = part,
                    .nparts = nparts});
}

void dt__sched_check(dt__sched *s, const uint64_t *status, size_t n)
{
    add(s, (dt__op){.kind = DT__OP_CHECK, .peer = -1, .src = status, .n = n});
}
