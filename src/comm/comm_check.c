/*
 * The consistency check of collective calls (comm_check.h): descriptors,
 * their hash (the tags' check bits), the messages that name both calls, and
 * the DT_DEBUG=detail exchange.
 */
#include "comm/comm_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/work_impl.h"
#include "core/config.h"
#include "core/error.h"
#include "dtensor/comm.h"

static _Thread_local dt__comm_ctx context;
/* World rank whose message failed the last check on this thread (-1: none). */
static _Thread_local int mismatch_from = -1;

dt__comm_ctx dt__comm_context_set(uint32_t hash, const char *text)
{
    dt__comm_ctx old = context;
    context = (dt__comm_ctx){hash, text};
    return old;
}

void dt__comm_context_restore(dt__comm_ctx saved)
{
    context = saved;
}

uint32_t dt__comm_hash(uint32_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    h ^= 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 16777619u;
    return h;
}

/* Independent multiplies, one finaliser: a few nanoseconds per call (the
 * 8 B all-reduce it rides on takes ~300 ns). */
static uint32_t desc_hash(const dt__coll_desc *d, size_t len)
{
    /* the name by its length and last 8 bytes ("..._allreduce" vs "..._allgather") */
    uint64_t tail = 0;
    memcpy(&tail, d->what + (len > 8 ? len - 8 : 0), len < 8 ? len : 8);
    uint64_t w1 = (uint64_t)(uint8_t)d->dtype | (uint64_t)(uint8_t)d->op << 8 |
                  (uint64_t)(uint32_t)d->root << 16;
    uint64_t h = (tail ^ len) * 0x9e3779b97f4a7c15ull ^ w1 * 0xc2b2ae3d27d4eb4full ^
                 d->count * 0x165667b19e3779f9ull ^
                 (d->counts ^ (uint64_t)d->ctx << 32) * 0xff51afd7ed558ccdull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return (uint32_t)(h ^ (h >> 32));
}

/* "dt_comm_allreduce(f32, 16 elements, sum)" and the context. */
static void desc_str(const dt__coll_desc *d, const char *ctx, char *buf, size_t n)
{
    int k = snprintf(buf, n, "%s(%s, %llu elements", d->what, dt_dtype_name((dt_dtype)d->dtype),
                     (unsigned long long)d->count);
    if (d->counts != 0 && k >= 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, " [counts %08llx]", (unsigned long long)d->counts);
    if (d->op >= 0 && k >= 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, ", %s", dt_reduce_op_name((dt_reduce_op)d->op));
    if (d->root >= 0 && k >= 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, ", root %d", d->root);
    if (k >= 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, ")%s%s", ctx != NULL && ctx[0] ? " in " : "",
                 ctx != NULL ? ctx : "");
}

dt_status dt__comm_check_mismatch(int from, uint32_t mine, uint32_t theirs)
{
    mismatch_from = from;
    return DT_ERR(DT_ERR_INVALID_ARG,
                  "the ranks called different collectives: a message from world rank %d "
                  "carries check %03x, this rank's call %03x",
                  from, theirs & DT__TAG_CHECK_MASK, mine & DT__TAG_CHECK_MASK);
}

dt_status dt__check_explain(const dt_work *w, dt_status st)
{
    return dt__check_explain_call(w->what, &w->desc, st);
}

dt_status dt__check_explain_call(const char *what, const dt__coll_desc *d, dt_status st)
{
    int from = mismatch_from;
    mismatch_from = -1;
    if (from < 0 || st != DT_ERR_INVALID_ARG)
        return st;
    char call[256];
    desc_str(d, NULL, call, sizeof(call));
    return DT_ERR(st,
                  "%s: the ranks called different collectives: world rank %d's call differs "
                  "from this rank's %s (DT_DEBUG=detail prints both)",
                  what, from, call);
}

/* ------------------------------------------------------------ DT_DEBUG=detail */

/* What the detailed check swaps: the descriptor, the name, the context. */
typedef struct rec {
    int32_t dtype, op, root, world;
    uint64_t count, counts;
    uint32_t ctx, pad;
    char what[32];
    char text[160];
} rec;

static void rec_of(const dt_comm *c, const dt__coll_desc *d, rec *r)
{
    memset(r, 0, sizeof(*r));
    r->dtype = d->dtype, r->op = d->op, r->root = d->root;
    r->world = dt__comm_world_rank(c, c->rank);
    r->count = d->count, r->counts = d->counts, r->ctx = d->ctx;
    snprintf(r->what, sizeof(r->what), "%s", d->what);
    snprintf(r->text, sizeof(r->text), "%s", context.text != NULL ? context.text : "");
}

static bool rec_same(const rec *a, const rec *b)
{
    return a->dtype == b->dtype && a->op == b->op && a->root == b->root && a->count == b->count &&
           a->counts == b->counts && a->ctx == b->ctx && strcmp(a->what, b->what) == 0;
}

static void rec_str(const rec *r, char *buf, size_t n)
{
    dt__coll_desc d = {r->what, r->dtype, r->op, r->root, r->count, r->counts, r->ctx};
    desc_str(&d, r->text, buf, n);
}

/* Every rank's record: the same table, so every rank words the same error.
 * The odd one out is the first rank that differs from the majority. */
static dt_status compare(const dt__coll_desc *d, const rec *all, int n)
{
    int odd = -1, agree0 = 0;
    for (int q = 0; q < n; q++)
        agree0 += rec_same(&all[q], &all[0]);
    for (int q = 0; q < n && odd < 0; q++)
        if (agree0 * 2 >= n ? !rec_same(&all[q], &all[0]) : rec_same(&all[q], &all[0]))
            odd = q;
    if (agree0 == n)
        return DT_OK;
    int other = (odd == 0) ? 1 : 0;
    while (other < n && rec_same(&all[other], &all[odd]))
        other++;
    char a[320], b[320];
    rec_str(&all[odd], a, sizeof(a));
    rec_str(&all[other < n ? other : 0], b, sizeof(b));
    return DT_ERR(DT_ERR_INVALID_ARG,
                  "%s: the ranks called different collectives (DT_DEBUG=detail): world rank %d "
                  "called %s, world rank %d %s",
                  d->what, all[odd].world, a, all[other < n ? other : 0].world, b);
}

static int detail_mode = -1; /* DT_DEBUG=detail, read once */

static dt_status exchange(dt_comm *c, const dt__coll_desc *d)
{
    rec mine, *all = malloc((size_t)c->size * sizeof(rec));
    if (all == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory for %d call records", d->what, c->size);
    rec_of(c, d, &mine);
    c->checking = true;
    dt_status st = dt_comm_allgather(c, &mine, all, sizeof(rec), DT_DTYPE_U8, NULL);
    c->checking = false;
    if (st == DT_OK)
        st = compare(d, all, c->size);
    free(all);
    if (st != DT_OK)
        st = dt__comm_fail(c, d->what, st);
    return st;
}

bool dt__comm_check_detail(void)
{
    if (detail_mode < 0) {
        const char *v = dt__config_str("DT_DEBUG");
        detail_mode = v != NULL && strcmp(v, "detail") == 0;
    }
    return detail_mode;
}

dt_status dt__comm_begin(dt_comm *c, const dt__coll_desc *d, size_t what_len)
{
    if (detail_mode != 0 && dt__comm_check_detail() && !c->checking && c->size > 1) {
        dt__coll_desc full = *d;
        full.ctx = context.hash;
        DT_CHECK(exchange(c, &full)); /* first: its own all-gather starts a call too */
    }
    c->desc = *d;
    c->desc.ctx = context.hash;
    c->check = desc_hash(&c->desc, what_len) & DT__TAG_CHECK_MASK;
    return DT_OK;
}
