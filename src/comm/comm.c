/*
 * The public collectives: validate (naming the bad value), pick the backend's
 * native collective when it has one, otherwise pick a generic algorithm by
 * message size and group size (DT_ALGO overrides), build its schedule and run
 * it - blocking, or as a work handle.
 */
#include "comm/comm_impl.h"
#include "comm/work_impl.h"
#include "comm/comm_check.h"
#include "comm/comm_choose.h"
#include "comm/comm_dispatch.h"
#include "comm/comm_staged.h"
#include "comm/comm_tiny.h"
#include "comm/algo/hier_topo.h"

#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

int dt_comm_rank(const dt_comm *comm)
{
    return comm ? comm->rank : -1;
}

int dt_comm_size(const dt_comm *comm)
{
    return comm ? comm->size : 0;
}

const char *dt_comm_backend(const dt_comm *comm)
{
    return comm ? comm->ops->name : "none";
}

void dt_comm_destroy(dt_comm *comm)
{
    if (comm != NULL) {
        dt__work_drop_spare(comm);
        free(comm->algo);
        dt__comm_family_release(comm->family);
        comm->ops->destroy(comm);
    }
}

dt_status dt_comm_set_algo(dt_comm *comm, const char *spec)
{
    if (comm == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_comm_set_algo: argument 'comm' is NULL");
    if (spec == NULL)
        spec = dt__config_str("DT_ALGO");
    char *copy = NULL;
    if (spec != NULL && spec[0] != '\0' && (copy = strdup(spec)) == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_comm_set_algo: no memory for '%s'", spec);
    free(comm->algo);
    comm->algo = copy;
    comm->algo_loaded = true;
    return DT_OK;
}

/* ------------------------------------------------------------ validation */

dt_status dt__comm_check_dtype(const char *fn, dt_dtype dtype)
{
    if (dt_dtype_size(dtype) == 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: invalid dtype %d", fn, (int)dtype);
    return DT_OK;
}

static dt_status check_reduce(const char *fn, dt_dtype dtype, dt_reduce_op op)
{
    DT_CHECK(dt__comm_check_dtype(fn, dtype));
    if ((int)op < 0 || op >= DT_REDUCE_OP_COUNT)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: invalid reduce op %d", fn, (int)op);
    if (!dt__reduce_supported(dtype, op))
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: reduce op %s on dtype %s is not supported", fn,
                      dt_reduce_op_name(op), dt_dtype_name(dtype));
    return DT_OK;
}

/* Device memory on a host-memory transport: the collective runs on host copies. */
#define STAGED(a, b) dt__comm_staged_needed(comm, 2, (const void *const[]){(a), (b)})

static dt_status check_buf(const char *fn, const char *name, const void *p, size_t count,
                           dt_dtype dtype)
{
    if (count > SIZE_MAX / 16)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: count %zu is too large", fn, count);
    if (p == NULL && count > 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s is NULL with count %zu (%s)", fn, name, count,
                      dt_dtype_name(dtype));
    return DT_OK;
}

/* Also fails at once on an aborted family (comm_abort.c). */
dt_status dt__comm_check_comm(const char *fn, const dt_comm *comm)
{
    if (comm == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'comm' is NULL", fn);
    return dt__comm_alive(fn, comm);
}

/* ------------------------------------------------------------ algorithm choice */

/* The algorithm DT_ALGO forces for @p coll ("allreduce"), or NULL. */
const char *dt__comm_forced_algo(dt_comm *comm, const char *coll, char *buf, size_t cap)
{
    if (!comm->algo_loaded) /* once per comm: getenv was 8% of a small collective */
        dt_comm_set_algo(comm, NULL);
    const char *spec = comm->algo;
    if (spec == NULL || spec[0] == '\0')
        return NULL;
    size_t clen = strlen(coll);
    for (const char *p = spec; *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > clen + 1 && strncmp(p, coll, clen) == 0 && p[clen] == ':') {
            size_t n = len - clen - 1 < cap - 1 ? len - clen - 1 : cap - 1;
            memcpy(buf, p + clen + 1, n);
            buf[n] = '\0';
            return buf;
        }
        p = end ? end + 1 : p + len;
    }
    return NULL;
}

dt_status dt__comm_unknown_algo(const char *coll, const char *algo)
{
    return DT_ERR(DT_ERR_INVALID_ARG, "DT_ALGO: unknown %s algorithm '%s'", coll, algo);
}

/* ------------------------------------------------------------ running */

dt_status dt__comm_run(dt_comm *comm, const char *what, dt__sched *s, dt_work **work)
{
    dt_work *w = NULL;
    DT_CHECK(dt__work_start(comm, what, s, &w));
    if (work != NULL) {
        *work = w;
        return DT_OK;
    }
    dt_status st = dt__work_finish(w, -1);
    dt_work_release(w);
    return st;
}

void dt__comm_sched_for(dt__sched *s, const dt_comm *comm, dt_dtype dtype, dt_reduce_op op)
{
    dt__sched_init(s, dtype, op);
    if (op == DT_REDUCE_OP_AVG)
        s->divisor = comm->size;
}

/* Whether every rank's block is empty: then there is nothing to move and the
 * collective completes locally (as in MPI; it is no synchronisation point). */
static bool all_empty(const size_t *counts, int n)
{
    for (int i = 0; i < n; i++)
        if (counts[i] != 0)
            return false;
    return true;
}

/* What the algorithm choice needs to know of @p comm (the same on every member). */
static dt__comm_shape shape_of(const dt_comm *comm)
{
    bool pc = dt__comm_can_peer_copy(comm);
    return (dt__comm_shape){comm->size, pc, pc && dt__comm_p2p_shm(comm)};
}

/* ------------------------------------------------------------ all-reduce */

/* @p algo, or "hier" where it is the ring and the comm spans hosts of one
 * size (algo/hier_topo.h): the two-level algorithm moves fewer bytes over
 * the network. The size thresholds themselves are comm_choose.c's. */
static const char *hier_for_ring(dt_comm *comm, const char *algo)
{
    return strcmp(algo, "ring") == 0 && dt__hier_applies(comm) ? "hier" : algo;
}

dt_status dt_comm_allreduce(dt_comm *comm, const void *send, void *recv, size_t count,
                            dt_dtype dtype, dt_reduce_op op, dt_work **work)
{
    static const char fn[] = "dt_comm_allreduce";
    DT_CHECK(dt__comm_check_comm(fn, comm));
    DT_CHECK(check_reduce(fn, dtype, op));
    DT_CHECK(check_buf(fn, "send", send, count, dtype));
    DT_CHECK(check_buf(fn, "recv", recv, count, dtype));
    if (STAGED(send, recv))
        return dt__staged_allreduce(comm, send, recv, count, dtype, op, work);
    DT__COMM_BEGIN(fn, dtype, op, -1, count, 0);
    if (comm->size > 1 && comm->ops->allreduce != NULL)
        return comm->ops->allreduce(comm, send, recv, count, dtype, op, work);
    if (dt__comm_tiny(comm, count * dt_dtype_size(dtype), work))
        return dt__tiny_allreduce(comm, send, recv, count, dtype, op);

    dt__sched s;
    dt__comm_sched_for(&s, comm, dtype, op);
    size_t bytes = count * dt_dtype_size(dtype);
    if (comm->size == 1 || count == 0) {
        dt__sched_copy(&s, recv, send, bytes);
        return dt__comm_run(comm, fn, &s, work);
    }
    char name[32];
    const char *algo = dt__comm_forced_algo(comm, "allreduce", name, sizeof(name));
    if (algo == NULL) /* across hosts, the two-level algorithm where the ring would run */
        algo = hier_for_ring(comm, dt__choose_allreduce(comm->size, bytes, count));
    dt_status st;
    if (strcmp(algo, "direct") == 0)
        st = dt__algo_allreduce_direct(comm, send, recv, count, &s);
    else if (strcmp(algo, "ring") == 0)
        st = dt__algo_allreduce_ring(comm, send, recv, count, &s);
    else if (strcmp(algo, "recursive_doubling") == 0 || strcmp(algo, "rd") == 0)
        st = dt__algo_allreduce_recursive_doubling(comm, send, recv, count, &s);
    else if (strcmp(algo, "hier") == 0)
        st = dt__algo_allreduce_hier(comm, send, recv, count, &s);
    else
        st = dt__comm_unknown_algo("allreduce", algo);
    if (st != DT_OK) {
        dt__sched_free(&s);
        return st;
    }
    return dt__comm_run(comm, fn, &s, work);
}

/* ------------------------------------------------------------ all-gather */

/* counts/displs arrays of @p n entries (equal counts; packed displacements). */
static dt_status equal_counts(const char *fn, int n, size_t count, size_t **counts, size_t **displs)
{
    size_t *c = malloc(2 * (size_t)n * sizeof(*c));
    if (c == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory for %d counts", fn, n);
    for (int i = 0; i < n; i++) {
        c[i] = count;
        c[n + i] = (size_t)i * count;
    }
    *counts = c;
    *displs = c + n;
    return DT_OK;
}

/* An all-gather(v) as dt_comm_alltoallw: my block to everyone, block q of
 * recv from rank q (in place, my own block is already there). */
static dt_status allgather_as_blocks(dt_comm *comm, const void *send, void *recv,
                                     const size_t *counts, const size_t *displs, dt_dtype dtype,
                                     dt_work **work)
{
    size_t p = (size_t)comm->size, me = (size_t)comm->rank;
    dt_comm_block *blk = malloc(2 * p * sizeof(*blk));
    if (blk == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_comm_allgather: no memory for %zu blocks", 2 * p);
    for (size_t q = 0; q < p; q++) {
        blk[q] = (dt_comm_block){0, 1, counts[me], counts[me]};
        blk[p + q] = (dt_comm_block){displs[q], 1, counts[q], counts[q]};
    }
    dt_status st = dt_comm_alltoallw(comm, send, blk, recv, blk + p, dtype, work);
    free(blk);
    return st;
}

static dt_status allgatherv_impl(const char *fn, dt_comm *comm, const void *send, void *recv,
                                 const size_t *counts, const size_t *displs, dt_dtype dtype,
                                 dt_work **work)
{
    if (comm->size > 1 && comm->ops->allgatherv != NULL)
        return comm->ops->allgatherv(comm, send, recv, counts, displs, dtype, work);
    char name[32];
    const char *algo = dt__comm_forced_algo(comm, "allgather", name, sizeof(name));
    if (algo != NULL && strcmp(algo, "ring") != 0 && strcmp(algo, "direct") != 0 &&
        strcmp(algo, "peer_copy") != 0 && strcmp(algo, "hier") != 0)
        return dt__comm_unknown_algo("allgather", algo);
    size_t total = 0, least = SIZE_MAX;
    for (int i = 0; i < comm->size; i++) {
        total += counts[i];
        least = counts[i] < least ? counts[i] : least;
    }
    dt__comm_shape sh = shape_of(comm);
    if (algo == NULL)
        algo = hier_for_ring(comm, dt__choose_allgather(&sh, total * dt_dtype_size(dtype),
                                                        least * dt_dtype_size(dtype)));
    if (strcmp(algo, "peer_copy") == 0 && sh.peer_copy)
        return allgather_as_blocks(comm, send, recv, counts, displs, dtype, work);
    dt__sched s;
    dt__comm_sched_for(&s, comm, dtype, DT_REDUCE_OP_SUM);
    if (total == 0)
        return dt__comm_run(comm, fn, &s, work);
    dt_status st;
    if (algo != NULL && strcmp(algo, "direct") == 0)
        st = dt__algo_allgatherv_direct(comm, send, recv, counts, displs, &s);
    else if (algo != NULL && strcmp(algo, "hier") == 0)
        st = dt__algo_allgatherv_hier(comm, send, recv, counts, displs, &s);
    else
        st = dt__algo_allgatherv_ring(comm, send, recv, counts, displs, &s);
    if (st != DT_OK) {
        dt__sched_free(&s);
        return st;
    }
    return dt__comm_run(comm, fn, &s, work);
}

dt_status dt_comm_allgather(dt_comm *comm, const void *send, void *recv, size_t count,
                            dt_dtype dtype, dt_work **work)
{
    static const char fn[] = "dt_comm_allgather";
    DT_CHECK(dt__comm_check_comm(fn, comm));
    DT_CHECK(dt__comm_check_dtype(fn, dtype));
    DT_CHECK(check_buf(fn, "send", send, count, dtype));
    DT_CHECK(check_buf(fn, "recv", recv, count * (size_t)comm->size, dtype));
    if (STAGED(send, recv))
        return dt__staged_allgather(comm, send, recv, count, dtype, work);
    DT__COMM_BEGIN(fn, dtype, -1, -1, count, 0);
    if (dt__comm_tiny(comm, count * dt_dtype_size(dtype), work))
        return dt__tiny_allgather(comm, send, recv, count, dtype);
    size_t *counts = NULL, *displs = NULL;
    DT_CHECK(equal_counts(fn, comm->size, count, &counts, &displs));
    dt_status st = allgatherv_impl(fn, comm, send, recv, counts, displs, dtype, work);
    free(counts);
    return st;
}

dt_status dt_comm_allgatherv(dt_comm *comm, const void *send, void *recv, const size_t *recv_counts,
                             const size_t *displs, dt_dtype dtype, dt_work **work)
{
    static const char fn[] = "dt_comm_allgatherv";
    DT_CHECK(dt__comm_check_comm(fn, comm));
    DT_CHECK(dt__comm_check_dtype(fn, dtype));
    if (recv_counts == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'recv_counts' is NULL", fn);
    for (int i = 0; i < comm->size; i++)
        DT_CHECK(check_buf(fn, "recv", recv, recv_counts[i], dtype));
    DT_CHECK(check_buf(fn, "send", send, recv_counts[comm->rank], dtype));
    if (STAGED(send, recv))
        return dt__staged_allgatherv(comm, send, recv, recv_counts, displs, dtype, work);
    DT__COMM_BEGIN(fn, dtype, -1, -1, dt__counts_total(recv_counts, comm->size),
                   dt__counts_hash(recv_counts, comm->size));
    if (displs != NULL)
        return allgatherv_impl(fn, comm, send, recv, recv_counts, displs, dtype, work);
    size_t *packed = malloc((size_t)comm->size * sizeof(*packed));
    if (packed == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory for %d displacements", fn, comm->size);
    size_t o = 0;
    for (int i = 0; i < comm->size; i++) {
        packed[i] = o;
        o += recv_counts[i];
    }
    dt_status st = allgatherv_impl(fn, comm, send, recv, recv_counts, packed, dtype, work);
    free(packed);
    return st;
}

/* ------------------------------------------------------------ reduce-scatter */

static dt_status reduce_scatterv_impl(const char *fn, dt_comm *comm, const void *send, void *recv,
                                      const size_t *counts, dt_dtype dtype, dt_reduce_op op,
                                      dt_work **work)
{
    if (comm->size > 1 && comm->ops->reduce_scatterv != NULL)
        return comm->ops->reduce_scatterv(comm, send, recv, counts, dtype, op, work);
    dt__sched s;
    dt__comm_sched_for(&s, comm, dtype, op);
    if (comm->size == 1 || all_empty(counts, comm->size)) {
        dt__sched_copy(&s, recv, send, counts[0] * dt_dtype_size(dtype));
        return dt__comm_run(comm, fn, &s, work);
    }
    char name[32];
    const char *algo = dt__comm_forced_algo(comm, "reduce_scatter", name, sizeof(name));
    if (algo != NULL && strcmp(algo, "ring") != 0 && strcmp(algo, "direct") != 0 &&
        strcmp(algo, "hier") != 0 && strcmp(algo, "fold") != 0) {
        dt__sched_free(&s);
        return dt__comm_unknown_algo("reduce_scatter", algo);
    }
    size_t total = 0;
    for (int i = 0; i < comm->size; i++)
        total += counts[i];
    if (algo == NULL) {
        size_t bytes = total * dt_dtype_size(dtype);
        dt__comm_shape sh = shape_of(comm);
        algo = hier_for_ring(comm, dt__choose_reduce_scatter(&sh, bytes));
    }
    dt_status st;
    if (algo != NULL && strcmp(algo, "direct") == 0)
        st = dt__algo_reduce_scatterv_direct(comm, send, recv, counts, &s);
    else if (algo != NULL && strcmp(algo, "hier") == 0)
        st = dt__algo_reduce_scatterv_hier(comm, send, recv, counts, &s);
    else if (algo != NULL && strcmp(algo, "fold") == 0)
        st = dt__algo_reduce_scatterv_fold(comm, send, recv, counts, &s);
    else
        st = dt__algo_reduce_scatterv_ring(comm, send, recv, counts, &s);
    if (st != DT_OK) {
        dt__sched_free(&s);
        return st;
    }
    return dt__comm_run(comm, fn, &s, work);
}

dt_status dt_comm_reduce_scatter(dt_comm *comm, const void *send, void *recv, size_t count,
                                 dt_dtype dtype, dt_reduce_op op, dt_work **work)
{
    static const char fn[] = "dt_comm_reduce_scatter";
    DT_CHECK(dt__comm_check_comm(fn, comm));
    DT_CHECK(check_reduce(fn, dtype, op));
    DT_CHECK(check_buf(fn, "send", send, count * (size_t)comm->size, dtype));
    DT_CHECK(check_buf(fn, "recv", recv, count, dtype));
    if (STAGED(send, recv))
        return dt__staged_reduce_scatter(comm, send, recv, count, dtype, op, work);
    DT__COMM_BEGIN(fn, dtype, op, -1, count, 0);
    if (dt__comm_tiny(comm, count * dt_dtype_size(dtype), work))
        return dt__tiny_reduce_scatter(comm, send, recv, count, dtype, op);
    size_t *counts = NULL, *displs = NULL;
    DT_CHECK(equal_counts(fn, comm->size, count, &counts, &displs));
    dt_status st = reduce_scatterv_impl(fn, comm, send, recv, counts, dtype, op, work);
    free(counts);
    return st;
}

dt_status dt_comm_reduce_scatterv(dt_comm *comm, const void *send, void *recv,
                                  const size_t *recv_counts, dt_dtype dtype, dt_reduce_op op,
                                  dt_work **work)
{
    static const char fn[] = "dt_comm_reduce_scatterv";
    DT_CHECK(dt__comm_check_comm(fn, comm));
    DT_CHECK(check_reduce(fn, dtype, op));
    if (recv_counts == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'recv_counts' is NULL", fn);
    for (int i = 0; i < comm->size; i++)
        DT_CHECK(check_buf(fn, "send", send, recv_counts[i], dtype));
    DT_CHECK(check_buf(fn, "recv", recv, recv_counts[comm->rank], dtype));
    if (STAGED(send, recv))
        return dt__staged_reduce_scatterv(comm, send, recv, recv_counts, dtype, op, work);
    DT__COMM_BEGIN(fn, dtype, op, -1, dt__counts_total(recv_counts, comm->size),
                   dt__counts_hash(recv_counts, comm->size));
    return reduce_scatterv_impl(fn, comm, send, recv, recv_counts, dtype, op, work);
}

/* ------------------------------------------------------------ all-to-all */

static dt_status alltoallv_impl(const char *fn, dt_comm *comm, const void *send, const size_t *sc,
                                const size_t *sd, void *recv, const size_t *rc, const size_t *rd,
                                dt_dtype dtype, dt_work **work)
{
    if (comm->size > 1 && comm->ops->alltoallv != NULL)
        return comm->ops->alltoallv(comm, send, sc, sd, recv, rc, rd, dtype, work);
    char name[32];
    const char *algo = dt__comm_forced_algo(comm, "alltoall", name, sizeof(name));
    if (algo != NULL && strcmp(algo, "pairwise") != 0)
        return dt__comm_unknown_algo("alltoall", algo);
    dt__sched s;
    dt__comm_sched_for(&s, comm, dtype, DT_REDUCE_OP_SUM);
    dt_status st = dt__algo_alltoallv_pairwise(comm, send, sc, sd, recv, rc, rd, &s);
    if (st != DT_OK) {
        dt__sched_free(&s);
        return st;
    }
    return dt__comm_run(comm, fn, &s, work);
}

/* dt_comm_alltoall as contiguous blocks of dt_comm_alltoallw. */
static dt_status alltoall_as_blocks(dt_comm *comm, const void *send, void *recv, size_t count,
                                    dt_dtype dtype, dt_work **work)
{
    dt_comm_block *blk = malloc((size_t)comm->size * sizeof(*blk));
    if (blk == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_comm_alltoall: no memory for %d blocks", comm->size);
    for (int q = 0; q < comm->size; q++)
        blk[q] = (dt_comm_block){(size_t)q * count, 1, count, count};
    dt_status st = dt_comm_alltoallw(comm, send, blk, recv, blk, dtype, work);
    free(blk);
    return st;
}

dt_status dt_comm_alltoall(dt_comm *comm, const void *send, void *recv, size_t count,
                           dt_dtype dtype, dt_work **work)
{
    static const char fn[] = "dt_comm_alltoall";
    DT_CHECK(dt__comm_check_comm(fn, comm));
    DT_CHECK(dt__comm_check_dtype(fn, dtype));
    DT_CHECK(check_buf(fn, "send", send, count * (size_t)comm->size, dtype));
    DT_CHECK(check_buf(fn, "recv", recv, count * (size_t)comm->size, dtype));
    if (send == recv && count > 0 && comm->size > 1)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: in-place (send == recv) is not supported", fn);
    if (STAGED(send, recv))
        return dt__staged_alltoall(comm, send, recv, count, dtype, work);
    DT__COMM_BEGIN(fn, dtype, -1, -1, count, 0);
    if (dt__comm_tiny(comm, count * dt_dtype_size(dtype), work))
        return dt__tiny_alltoall(comm, send, recv, count, dtype);
    if (count == 0 && comm->ops->alltoallv == NULL) { /* nothing moves anywhere (as in MPI) */
        dt__sched s;
        dt__comm_sched_for(&s, comm, dtype, DT_REDUCE_OP_SUM);
        return dt__comm_run(comm, fn, &s, work);
    }
    char name[32];
    const char *algo = dt__comm_forced_algo(comm, "alltoall", name, sizeof(name));
    dt__comm_shape sh = shape_of(comm);
    bool copies = algo != NULL ? sh.peer_copy && strcmp(algo, "peer_copy") == 0
                               : dt__choose_alltoall_peer_copy(&sh, count * dt_dtype_size(dtype));
    if (copies)
        return alltoall_as_blocks(comm, send, recv, count, dtype, work);
    size_t *counts = NULL, *displs = NULL;
    DT_CHECK(equal_counts(fn, comm->size, count, &counts, &displs));
    dt_status st =
        alltoallv_impl(fn, comm, send, counts, displs, recv, counts, displs, dtype, work);
    free(counts);
    return st;
}

dt_status dt_comm_alltoallv(dt_comm *comm, const void *send, const size_t *send_counts,
                            const size_t *send_displs, void *recv, const size_t *recv_counts,
                            const size_t *recv_displs, dt_dtype dtype, dt_work **work)
{
    static const char fn[] = "dt_comm_alltoallv";
    DT_CHECK(dt__comm_check_comm(fn, comm));
    DT_CHECK(dt__comm_check_dtype(fn, dtype));
    if (send_counts == NULL || send_displs == NULL || recv_counts == NULL || recv_displs == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: counts and displacements must not be NULL", fn);
    for (int i = 0; i < comm->size; i++) {
        DT_CHECK(check_buf(fn, "send", send, send_counts[i], dtype));
        DT_CHECK(check_buf(fn, "recv", recv, recv_counts[i], dtype));
    }
    if (send_counts[comm->rank] != recv_counts[comm->rank])
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: rank %d sends itself %zu elements but expects "
                      "%zu",
                      fn, comm->rank, send_counts[comm->rank], recv_counts[comm->rank]);
    if (STAGED(send, recv))
        return dt__staged_alltoallv(comm, send, send_counts, send_displs, recv, recv_counts,
                                    recv_displs, dtype, work);
    DT__COMM_BEGIN(fn, dtype, -1, -1, 0, 0); /* counts differ by rank: the lengths check them */
    return alltoallv_impl(fn, comm, send, send_counts, send_displs, recv, recv_counts, recv_displs,
                          dtype, work);
}

/* ------------------------------------------------------------ broadcast, barrier */

dt_status dt_comm_broadcast(dt_comm *comm, void *buf, size_t count, dt_dtype dtype, int root,
                            dt_work **work)
{
    static const char fn[] = "dt_comm_broadcast";
    DT_CHECK(dt__comm_check_comm(fn, comm));
    DT_CHECK(dt__comm_check_dtype(fn, dtype));
    DT_CHECK(check_buf(fn, "buf", buf, count, dtype));
    if (root < 0 || root >= comm->size)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: root %d is not a rank of a comm of size %d", fn,
                      root, comm->size);
    if (STAGED(buf, buf))
        return dt__staged_broadcast(comm, buf, count, dtype, root, work);
    DT__COMM_BEGIN(fn, dtype, -1, root, count, 0);
    if (dt__comm_tiny(comm, count * dt_dtype_size(dtype), work))
        return dt__tiny_broadcast(comm, buf, count, dtype, root);
    if (comm->size > 1 && comm->ops->broadcast != NULL)
        return comm->ops->broadcast(comm, buf, count, dtype, root, work);
    dt__sched s;
    dt__comm_sched_for(&s, comm, dtype, DT_REDUCE_OP_SUM);
    if (comm->size == 1)
        return dt__comm_run(comm, fn, &s, work);
    char name[32];
    const char *algo = dt__comm_forced_algo(comm, "broadcast", name, sizeof(name));
    size_t bytes = count * dt_dtype_size(dtype);
    dt__comm_shape sh = shape_of(comm);
    if (algo != NULL && strcmp(algo, "peer_copy") == 0 && !sh.peer_copy)
        algo = NULL; /* forced, but not every member is reachable so: by size */
    if (algo == NULL)
        algo = dt__choose_broadcast(&sh, bytes);
    dt_status st;
    if (strcmp(algo, "direct") == 0)
        st = dt__algo_broadcast_direct(comm, buf, count, root, &s);
    else if (strcmp(algo, "binomial") == 0)
        st = dt__algo_broadcast_binomial(comm, buf, count, root, &s);
    else if (strcmp(algo, "pipeline") == 0)
        st = dt__algo_broadcast_pipeline(comm, buf, count, root, &s);
    else if (strcmp(algo, "peer_copy") == 0)
        st = dt__algo_broadcast_peer_copy(comm, buf, count, root, &s);
    else
        st = dt__comm_unknown_algo("broadcast", algo);
    if (st != DT_OK) {
        dt__sched_free(&s);
        return st;
    }
    return dt__comm_run(comm, fn, &s, work);
}

dt_status dt_comm_barrier(dt_comm *comm, dt_work **work)
{
    static const char fn[] = "dt_comm_barrier";
    DT_CHECK(dt__comm_check_comm(fn, comm));
    DT__COMM_BEGIN(fn, DT_DTYPE_U8, -1, -1, 0, 0);
    if (comm->size > 1 && comm->ops->barrier != NULL)
        return comm->ops->barrier(comm, work);
    dt__sched s;
    dt__comm_sched_for(&s, comm, DT_DTYPE_U8, DT_REDUCE_OP_SUM);
    dt_status st = dt__algo_barrier_dissemination(comm, &s);
    if (st != DT_OK) {
        dt__sched_free(&s);
        return st;
    }
    return dt__comm_run(comm, fn, &s, work);
}
