/*
 * Point-to-point and splitting a comm into groups.
 *
 * The generic split (backends without a native one) all-gathers every rank's
 * (color, key, next free comm id) over the parent, orders each color by
 * (key, old rank) and asks the backend for a subgroup over the same
 * transport. The new comm id is the largest "next free id" of the parent's
 * ranks, so it differs from every live comm on every member.
 */
#include "comm/comm_impl.h"
#include "comm/work_impl.h"
#include "comm/comm_staged.h"

#include <stdlib.h>

#include "core/error.h"

static dt_status p2p(const char *fn, dt_comm *comm, void *buf, size_t count, dt_dtype dtype,
                     int peer, int tag, bool is_send, dt_work **work)
{
    if (comm == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'comm' is NULL", fn);
    DT_CHECK(dt__comm_alive(fn, comm));
    if (dt_dtype_size(dtype) == 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: invalid dtype %d", fn, (int)dtype);
    if (buf == NULL && count > 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: buf is NULL with count %zu", fn, count);
    if (peer < 0 || peer >= comm->size)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: peer %d is not a rank of a comm of size %d", fn,
                      peer, comm->size);
    if (tag < 0 || (uint32_t)tag > DT__TAG_VALUE_MASK)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: tag %d is outside [0, %u]", fn, tag,
                      DT__TAG_VALUE_MASK);
    dt__sched s;
    dt__sched_init(&s, dtype, DT_REDUCE_OP_SUM);
    s.p2p = true;
    s.p2p_tag = (uint32_t)tag;
    size_t bytes = count * dt_dtype_size(dtype);
    if (is_send)
        dt__sched_send(&s, buf, bytes, peer);
    else
        dt__sched_recv(&s, buf, bytes, peer);
    dt_work *w = NULL;
    DT_CHECK(dt__work_start(comm, fn, &s, &w));
    if (work != NULL) {
        *work = w;
        return DT_OK;
    }
    dt_status st = dt__work_finish(w, -1);
    dt_work_release(w);
    return st;
}

dt_status dt_comm_send(dt_comm *comm, const void *buf, size_t count, dt_dtype dtype, int peer,
                       int tag, dt_work **work)
{
    if (comm != NULL && dt__comm_staged_needed(comm, 1, (const void *const[]){buf}))
        return dt__staged_send(comm, buf, count, dtype, peer, tag, work);
    return p2p("dt_comm_send", comm, (void *)buf, count, dtype, peer, tag, true, work);
}

dt_status dt_comm_recv(dt_comm *comm, void *buf, size_t count, dt_dtype dtype, int peer, int tag,
                       dt_work **work)
{
    if (comm != NULL && dt__comm_staged_needed(comm, 1, (const void *const[]){buf}))
        return dt__staged_recv(comm, buf, count, dtype, peer, tag, work);
    return p2p("dt_comm_recv", comm, buf, count, dtype, peer, tag, false, work);
}

/* A split comm shares its parent's family (the backend may have set it). */
static void join_family(dt_comm *c, dt_comm *parent)
{
    if (c == NULL || c->family != NULL)
        return;
    c->family = dt__comm_family_of(parent);
    if (c->family != NULL)
        c->family->refs++;
}

dt_status dt_comm_split(dt_comm *comm, int color, int key, dt_comm **out)
{
    static const char fn[] = "dt_comm_split";
    if (comm == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'comm' is NULL", fn);
    DT_ARG_NOT_NULL(out);
    DT_CHECK(dt__comm_alive(fn, comm));
    if (color < 0 && color != DT_COMM_SPLIT_NOCOLOR)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: color %d is negative (only "
                      "DT_COMM_SPLIT_NOCOLOR = -1 is allowed)",
                      fn, color);
    if (comm->ops->split != NULL) {
        dt_comm *c = NULL;
        DT_CHECK(comm->ops->split(comm, color, key, &c));
        join_family(c, comm);
        *out = c;
        return DT_OK;
    }
    const int p = comm->size;
    int64_t mine[3] = {color, key, comm->ops->next_comm_id(comm)};
    int64_t *all = malloc((size_t)p * sizeof(mine));
    int *members = malloc((size_t)p * sizeof(*members));
    dt_status st = DT_OK;
    if (all == NULL || members == NULL) {
        st = DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory for %d ranks", fn, p);
        goto out_free;
    }
    DT_CHECK_GOTO(dt_comm_allgather(comm, mine, all, 3, DT_DTYPE_I64, NULL), st, out_free);
    uint32_t id = 0;
    for (int i = 0; i < p; i++)
        id = (uint32_t)all[3 * i + 2] > id ? (uint32_t)all[3 * i + 2] : id;
    if (color == DT_COMM_SPLIT_NOCOLOR) {
        *out = NULL;
        goto out_free;
    }
    /* members of my color ordered by (key, old rank): insertion sort, p is small */
    int n = 0, my_rank = -1;
    for (int i = 0; i < p; i++) {
        if (all[3 * i] != color)
            continue;
        int j = n++;
        while (j > 0 && all[3 * members[j - 1] + 1] > all[3 * i + 1]) {
            members[j] = members[j - 1];
            j--;
        }
        members[j] = i;
    }
    for (int i = 0; i < n; i++)
        if (members[i] == comm->rank)
            my_rank = i;
    dt_comm *c = NULL;
    DT_CHECK_GOTO(comm->ops->subgroup(comm, n, members, my_rank, id, &c), st, out_free);
    c->timeout_s = comm->timeout_s;
    join_family(c, comm);
    *out = c;
out_free:
    free(members);
    free(all);
    return st;
}
