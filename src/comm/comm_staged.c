/* Collectives on device buffers over a host-memory transport: see comm_staged.h. */
#include <stdlib.h>
#include <string.h>

#include "comm/comm_staged.h"
#include "comm/work_impl.h"
#include "core/error.h"
#include "kernels/kernel_ops.h"

#define MAX_REGIONS 4

/* One device range and its host copy. */
typedef struct region {
    char *dev, *host;
    size_t bytes;
    dt_device device;
    bool out; /* written by the collective: copied back */
} region;

typedef struct staged {
    region r[MAX_REGIONS];
    int n;
    dt_work *inner; /* the host collective, when non-blocking */
} staged;

bool dt__comm_staged_needed(const dt_comm *comm, int n, const void *const *bufs)
{
    if (comm->ops->device_memory)
        return false;
    dt_device d;
    for (int i = 0; i < n; i++)
        if (dt__kernels_device_of(bufs[i], &d))
            return true;
    return false;
}

/* Add [p, p + bytes) when it is device memory, merged with ranges it touches. */
static void add(staged *s, const void *p, size_t bytes, bool out)
{
    dt_device d;
    if (bytes == 0 || !dt__kernels_device_of(p, &d))
        return;
    region nr = {(char *)p, NULL, bytes, d, out};
    for (int i = 0; i < s->n;) { /* absorb every region that overlaps the new one */
        region *o = &s->r[i];
        if (o->device.type == d.type && o->dev <= nr.dev + nr.bytes &&
            nr.dev <= o->dev + o->bytes) {
            char *lo = o->dev < nr.dev ? o->dev : nr.dev;
            char *hi =
                o->dev + o->bytes > nr.dev + nr.bytes ? o->dev + o->bytes : nr.dev + nr.bytes;
            nr.dev = lo;
            nr.bytes = (size_t)(hi - lo);
            nr.out = nr.out || o->out;
            s->r[i] = s->r[--s->n];
            i = 0;
            continue;
        }
        i++;
    }
    s->r[s->n++] = nr; /* at most one region per buffer argument: MAX_REGIONS */
}

static void stage_free(staged *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->r[i].host);
    free(s);
}

/* Host copies of every region (written ranges too: bytes left alone survive). */
static dt_status stage_in(staged *s, const char *fn)
{
    for (int i = 0; i < s->n; i++) {
        region *r = &s->r[i];
        const dt_kernel_ops *k = dt__kernels_for(r->device);
        if (k == NULL || k->copy_bytes == NULL)
            return DT_ERR(DT_ERR_UNSUPPORTED, "%s: %s device memory cannot be staged to the host",
                          fn, dt_device_type_name(r->device.type));
        r->host = aligned_alloc(64, (r->bytes + 63) & ~(size_t)63);
        if (r->host == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "%s: no host memory to stage %zu bytes of %s memory",
                          fn, r->bytes, dt_device_type_name(r->device.type));
        DT_CHECK(k->copy_bytes(r->host, r->dev, r->bytes));
    }
    return DT_OK;
}

static dt_status stage_out(staged *s)
{
    for (int i = 0; i < s->n; i++)
        if (s->r[i].out)
            DT_CHECK(dt__kernels_for(s->r[i].device)
                         ->copy_bytes(s->r[i].dev, s->r[i].host, s->r[i].bytes));
    return DT_OK;
}

/* The host address standing for @p p (p itself when it is host memory). A
 * device buffer of no bytes (an empty shard) maps to a host address that is
 * never touched, so the host collective never sees device memory. */
static void *map(staged *s, const void *p)
{
    dt_device d;
    for (int i = 0; i < s->n; i++)
        if ((const char *)p >= s->r[i].dev && (const char *)p < s->r[i].dev + s->r[i].bytes)
            return s->r[i].host + ((const char *)p - s->r[i].dev);
    return dt__kernels_device_of(p, &d) ? (void *)s : (void *)p;
}

static dt_status begin(const char *fn, staged **out)
{
    *out = calloc(1, sizeof(staged));
    return *out != NULL ? DT_OK : DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory to stage", fn);
}

static dt_status prepare(staged *s, const char *fn)
{
    dt_status st = stage_in(s, fn);
    if (st != DT_OK)
        stage_free(s);
    return st;
}

static dt_status work_test(dt_work *w)
{
    staged *s = w->native;
    bool done = false;
    dt_status st = dt_work_test(s->inner, &done);
    if (st != DT_OK)
        return st;
    return done ? stage_out(s) : DT_IN_PROGRESS;
}

static void work_free(dt_work *w)
{
    staged *s = w->native;
    dt_work_release(s->inner);
    stage_free(s);
}

/* After the host collective was started (@p st): copy back now, or when its work completes. */
static dt_status finish(dt_comm *comm, const char *fn, staged *s, dt_status st, dt_work **work)
{
    if (st == DT_OK && work == NULL)
        st = stage_out(s);
    if (st != DT_OK || work == NULL) {
        dt_work_release(s->inner);
        stage_free(s);
        return st;
    }
    st = dt__work_native(comm, fn, work_test, work_free, s, work);
    if (st != DT_OK) {
        dt_work_release(s->inner);
        stage_free(s);
    }
    return st;
}

/* The inner work slot: the staged one's when the caller wants a work. */
#define INNER(s, work) ((work) != NULL ? &(s)->inner : NULL)

/* Elements spanned by @p n blocks of counts[i] at displs[i] (packed when displs is NULL). */
static size_t span(int n, const size_t *counts, const size_t *displs)
{
    size_t end = 0, at = 0;
    for (int i = 0; i < n; i++) {
        size_t start = displs != NULL ? displs[i] : at;
        if (counts[i] > 0 && start + counts[i] > end)
            end = start + counts[i];
        at = start + counts[i];
    }
    return end;
}

dt_status dt__staged_allreduce(dt_comm *comm, const void *send, void *recv, size_t count,
                               dt_dtype dtype, dt_reduce_op op, dt_work **work)
{
    static const char fn[] = "dt_comm_allreduce";
    size_t b = count * dt_dtype_size(dtype);
    staged *s = NULL;
    DT_CHECK(begin(fn, &s));
    add(s, send, b, false);
    add(s, recv, b, true);
    DT_CHECK(prepare(s, fn));
    dt_status st =
        dt_comm_allreduce(comm, map(s, send), map(s, recv), count, dtype, op, INNER(s, work));
    return finish(comm, fn, s, st, work);
}

dt_status dt__staged_allgatherv(dt_comm *comm, const void *send, void *recv, const size_t *counts,
                                const size_t *displs, dt_dtype dtype, dt_work **work)
{
    static const char fn[] = "dt_comm_allgatherv";
    size_t es = dt_dtype_size(dtype);
    staged *s = NULL;
    DT_CHECK(begin(fn, &s));
    add(s, send, counts[comm->rank] * es, false);
    add(s, recv, span(comm->size, counts, displs) * es, true);
    DT_CHECK(prepare(s, fn));
    dt_status st =
        dt_comm_allgatherv(comm, map(s, send), map(s, recv), counts, displs, dtype, INNER(s, work));
    return finish(comm, fn, s, st, work);
}

dt_status dt__staged_reduce_scatterv(dt_comm *comm, const void *send, void *recv,
                                     const size_t *counts, dt_dtype dtype, dt_reduce_op op,
                                     dt_work **work)
{
    static const char fn[] = "dt_comm_reduce_scatterv";
    size_t es = dt_dtype_size(dtype);
    staged *s = NULL;
    DT_CHECK(begin(fn, &s));
    add(s, send, span(comm->size, counts, NULL) * es, false);
    add(s, recv, counts[comm->rank] * es, true);
    DT_CHECK(prepare(s, fn));
    dt_status st = dt_comm_reduce_scatterv(comm, map(s, send), map(s, recv), counts, dtype, op,
                                           INNER(s, work));
    return finish(comm, fn, s, st, work);
}

dt_status dt__staged_alltoallv(dt_comm *comm, const void *send, const size_t *sc, const size_t *sd,
                               void *recv, const size_t *rc, const size_t *rd, dt_dtype dtype,
                               dt_work **work)
{
    static const char fn[] = "dt_comm_alltoallv";
    size_t es = dt_dtype_size(dtype);
    staged *s = NULL;
    DT_CHECK(begin(fn, &s));
    add(s, send, span(comm->size, sc, sd) * es, false);
    add(s, recv, span(comm->size, rc, rd) * es, true);
    DT_CHECK(prepare(s, fn));
    dt_status st =
        dt_comm_alltoallv(comm, map(s, send), sc, sd, map(s, recv), rc, rd, dtype, INNER(s, work));
    return finish(comm, fn, s, st, work);
}

/* Elements spanned by @p n 2-D blocks. */
static size_t block_span(int n, const dt_comm_block *b)
{
    size_t end = 0;
    for (int i = 0; i < n; i++)
        if (b[i].rows > 0 && b[i].row_count > 0) {
            size_t e = b[i].offset + (b[i].rows - 1) * b[i].stride + b[i].row_count;
            end = e > end ? e : end;
        }
    return end;
}

dt_status dt__staged_alltoallw(dt_comm *comm, const void *send, const dt_comm_block *sb, void *recv,
                               const dt_comm_block *rb, dt_dtype dtype, dt_work **work)
{
    static const char fn[] = "dt_comm_alltoallw";
    size_t es = dt_dtype_size(dtype);
    staged *s = NULL;
    DT_CHECK(begin(fn, &s));
    add(s, send, block_span(comm->size, sb) * es, false);
    add(s, recv, block_span(comm->size, rb) * es, true);
    DT_CHECK(prepare(s, fn));
    dt_status st =
        dt_comm_alltoallw(comm, map(s, send), sb, map(s, recv), rb, dtype, INNER(s, work));
    return finish(comm, fn, s, st, work);
}

dt_status dt__staged_broadcast(dt_comm *comm, void *buf, size_t count, dt_dtype dtype, int root,
                               dt_work **work)
{
    static const char fn[] = "dt_comm_broadcast";
    staged *s = NULL;
    DT_CHECK(begin(fn, &s));
    add(s, buf, count * dt_dtype_size(dtype), comm->rank != root);
    DT_CHECK(prepare(s, fn));
    dt_status st = dt_comm_broadcast(comm, map(s, buf), count, dtype, root, INNER(s, work));
    return finish(comm, fn, s, st, work);
}

dt_status dt__staged_send(dt_comm *comm, const void *buf, size_t count, dt_dtype dtype, int peer,
                          int tag, dt_work **work)
{
    static const char fn[] = "dt_comm_send";
    staged *s = NULL;
    DT_CHECK(begin(fn, &s));
    add(s, buf, count * dt_dtype_size(dtype), false);
    DT_CHECK(prepare(s, fn));
    dt_status st = dt_comm_send(comm, map(s, buf), count, dtype, peer, tag, INNER(s, work));
    return finish(comm, fn, s, st, work);
}

dt_status dt__staged_recv(dt_comm *comm, void *buf, size_t count, dt_dtype dtype, int peer, int tag,
                          dt_work **work)
{
    static const char fn[] = "dt_comm_recv";
    staged *s = NULL;
    DT_CHECK(begin(fn, &s));
    add(s, buf, count * dt_dtype_size(dtype), true);
    DT_CHECK(prepare(s, fn));
    dt_status st = dt_comm_recv(comm, map(s, buf), count, dtype, peer, tag, INNER(s, work));
    return finish(comm, fn, s, st, work);
}

dt_status dt__staged_allgather(dt_comm *comm, const void *send, void *recv, size_t count,
                               dt_dtype dtype, dt_work **work)
{
    static const char fn[] = "dt_comm_allgather";
    size_t b = count * dt_dtype_size(dtype);
    staged *s = NULL;
    DT_CHECK(begin(fn, &s));
    add(s, send, b, false);
    add(s, recv, b * (size_t)comm->size, true);
    DT_CHECK(prepare(s, fn));
    dt_status st =
        dt_comm_allgather(comm, map(s, send), map(s, recv), count, dtype, INNER(s, work));
    return finish(comm, fn, s, st, work);
}

dt_status dt__staged_reduce_scatter(dt_comm *comm, const void *send, void *recv, size_t count,
                                    dt_dtype dtype, dt_reduce_op op, dt_work **work)
{
    static const char fn[] = "dt_comm_reduce_scatter";
    size_t b = count * dt_dtype_size(dtype);
    staged *s = NULL;
    DT_CHECK(begin(fn, &s));
    add(s, send, b * (size_t)comm->size, false);
    add(s, recv, b, true);
    DT_CHECK(prepare(s, fn));
    dt_status st =
        dt_comm_reduce_scatter(comm, map(s, send), map(s, recv), count, dtype, op, INNER(s, work));
    return finish(comm, fn, s, st, work);
}

dt_status dt__staged_alltoall(dt_comm *comm, const void *send, void *recv, size_t count,
                              dt_dtype dtype, dt_work **work)
{
    static const char fn[] = "dt_comm_alltoall";
    size_t b = count * dt_dtype_size(dtype) * (size_t)comm->size;
    staged *s = NULL;
    DT_CHECK(begin(fn, &s));
    add(s, send, b, false);
    add(s, recv, b, true);
    DT_CHECK(prepare(s, fn));
    dt_status st = dt_comm_alltoall(comm, map(s, send), map(s, recv), count, dtype, INNER(s, work));
    return finish(comm, fn, s, st, work);
}
