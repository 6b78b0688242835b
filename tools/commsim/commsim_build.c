/*
 * Every rank's schedule, built by the runtime's own algorithm files on a
 * stand-in comm that has a rank and a size and no transport. Buffers are
 * fake addresses (a schedule only stores them) and the link step wraps
 * dt__sched_scratch (-Wl,--wrap) so a 4096-rank direct exchange reserves
 * nothing. A rank's schedule is reduced to its shape (transfers with peers
 * relative to the rank, byte counts) and ranks with equal shapes share it:
 * a 4096-rank ring is one shape of 16k ops, not 4096 of them.
 */
#include "commsim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_choose.h"
#include "comm/comm_impl.h"
#include "comm/comm_tiny.h"
#include "comm/sched.h"

#define FAKE_SEND    ((void *)(uintptr_t)(1ull << 44))
#define FAKE_RECV    ((void *)(uintptr_t)(2ull << 44))
#define FAKE_SCRATCH ((void *)(uintptr_t)(3ull << 44))

void *__wrap_dt__sched_scratch(dt__sched *s, size_t bytes);
void *__wrap_dt__sched_scratch(dt__sched *s, size_t bytes)
{
    (void)s, (void)bytes; /* nothing is read or written through it */
    return FAKE_SCRATCH;
}

const char *const cs_collectives[] = {"allreduce", "allgather", "reduce_scatter", "broadcast",
                                      NULL};
static const char *const allreduce_algos[] = {"ring", "recursive_doubling", "direct", "hier", NULL};
static const char *const gather_algos[] = {"ring", "direct", "hier", NULL};
static const char *const reduce_scatter_algos[] = {"ring", "direct", "fold", "hier", NULL};
static const char *const broadcast_algos[] = {"pipeline", "binomial", "direct", NULL};

const char *const *cs_algorithms(const char *coll)
{
    if (strcmp(coll, "allreduce") == 0)
        return allreduce_algos;
    if (strcmp(coll, "allgather") == 0)
        return gather_algos;
    if (strcmp(coll, "reduce_scatter") == 0)
        return reduce_scatter_algos;
    if (strcmp(coll, "broadcast") == 0)
        return broadcast_algos;
    return NULL;
}

bool cs_hier_applies(int ranks, int per_host)
{
    return ranks >= 4 && per_host > 1 && ranks > per_host && ranks % per_host == 0;
}

const char *cs_dispatch(const char *coll, int ranks, int per_host, uint64_t bytes)
{
    /* one host: cross-memory attach and shared-memory send/recv (<= 9 ranks) */
    bool one_host = ranks <= per_host;
    dt__comm_shape sh = {ranks, one_host, one_host && ranks <= 9};
    size_t b = (size_t)bytes, n = b / 4, block = n / (size_t)ranks * 4;
    const char *algo;
    if (strcmp(coll, "allreduce") == 0)
        algo = dt__choose_allreduce(ranks, b, n);
    else if (strcmp(coll, "allgather") == 0)
        algo = dt__choose_allgather(&sh, block * (size_t)ranks, block);
    else if (strcmp(coll, "reduce_scatter") == 0)
        algo = dt__choose_reduce_scatter(&sh, block * (size_t)ranks);
    else
        return dt__choose_broadcast(&sh, b);
    /* as comm.c's hier_for_ring: across hosts the ring becomes two-level */
    return strcmp(algo, "ring") == 0 && cs_hier_applies(ranks, per_host) ? "hier" : algo;
}

bool cs_tiny(const char *coll, int ranks, int per_host, uint64_t bytes)
{
    /* the largest message: the whole vector, or one rank's block */
    uint64_t msg = strcmp(coll, "allgather") == 0 || strcmp(coll, "reduce_scatter") == 0
                       ? bytes / 4 / (uint64_t)ranks * 4
                       : bytes;
    return ranks <= per_host && dt__tiny_fits(ranks, msg);
}

/* The stand-in comm's hosts: ranks 0..per_host-1 on host 0, and so on
 * (impl points at per_host). */
static int sim_host_of(const dt_comm *c, int rank)
{
    return rank / *(const int *)c->impl;
}
static const dt_comm_ops sim_ops = {.host_of = sim_host_of};

/* Fill @p s with rank @p r's schedule; @p counts: p equal blocks, @p displs theirs. */
static dt_status build_one(const char *coll, const char *algo, dt_comm *c, size_t n,
                           const size_t *counts, const size_t *displs, dt__sched *s)
{
    bool ring = strcmp(algo, "ring") == 0, direct = strcmp(algo, "direct") == 0;
    if (strcmp(algo, "hier") == 0) /* the runtime's two-level files, on sim_host_of's hosts */
        return strcmp(coll, "allreduce") == 0
                   ? dt__algo_allreduce_hier(c, FAKE_SEND, FAKE_RECV, n, s)
               : strcmp(coll, "allgather") == 0
                   ? dt__algo_allgatherv_hier(c, FAKE_SEND, FAKE_RECV, counts, displs, s)
                   : dt__algo_reduce_scatterv_hier(c, FAKE_SEND, FAKE_RECV, counts, s);
    if (strcmp(coll, "allreduce") == 0)
        return ring     ? dt__algo_allreduce_ring(c, FAKE_SEND, FAKE_RECV, n, s)
               : direct ? dt__algo_allreduce_direct(c, FAKE_SEND, FAKE_RECV, n, s)
                        : dt__algo_allreduce_recursive_doubling(c, FAKE_SEND, FAKE_RECV, n, s);
    if (strcmp(coll, "allgather") == 0)
        return direct ? dt__algo_allgatherv_direct(c, FAKE_SEND, FAKE_RECV, counts, displs, s)
                      : dt__algo_allgatherv_ring(c, FAKE_SEND, FAKE_RECV, counts, displs, s);
    if (strcmp(coll, "reduce_scatter") == 0)
        return direct ? dt__algo_reduce_scatterv_direct(c, FAKE_SEND, FAKE_RECV, counts, s)
               : strcmp(algo, "fold") == 0
                   ? dt__algo_reduce_scatterv_fold(c, FAKE_SEND, FAKE_RECV, counts, s)
                   : dt__algo_reduce_scatterv_ring(c, FAKE_SEND, FAKE_RECV, counts, s);
    return strcmp(algo, "pipeline") == 0 ? dt__algo_broadcast_pipeline(c, FAKE_SEND, n, 0, s)
           : direct                      ? dt__algo_broadcast_direct(c, FAKE_SEND, n, 0, s)
                                         : dt__algo_broadcast_binomial(c, FAKE_SEND, n, 0, s);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The shape of rank @p r's schedule @p s (into @p sh, allocated). */
static bool shape_of(const dt__sched *s, int r, int p, cs_shape *sh)
{
    /* zeroed: the hash and the comparison read the structs' padding */
    sh->ops = calloc(s->nops + 1, sizeof(cs_op));
    sh->rounds = calloc(s->nrounds + 1, sizeof(cs_round));
    if (sh->ops == NULL || sh->rounds == NULL) {
        free(sh->ops);
        free(sh->rounds);
        return false;
    }
    for (size_t i = 0; i < s->nops; i++) {
        const dt__op *o = &s->ops[i];
        cs_op *d = &sh->ops[i];
        d->kind = CS_LOCAL;
        d->bytes = o->n;
        if (o->kind == DT__OP_SEND || o->kind == DT__OP_RECV) {
            d->kind = o->kind == DT__OP_SEND ? CS_SEND : CS_RECV;
            d->peer = (int32_t)(((o->peer - r) % p + p) % p);
            d->scratch =
                (uintptr_t)(o->kind == DT__OP_SEND ? o->src : o->dst) >= (uintptr_t)FAKE_SCRATCH;
        } else if (o->kind == DT__OP_COPY) {
            d->copy = 1;
        } else {
            d->bytes = o->n * dt_dtype_size(s->dtype); /* REDUCE, SCALE: elements */
        }
    }
    for (size_t i = 0; i < s->nrounds; i++)
        sh->rounds[i].first = (uint32_t)s->rounds[i].first,
        sh->rounds[i].count = (uint32_t)s->rounds[i].count,
        sh->rounds[i].early = s->rounds[i].early;
    sh->nops = (uint32_t)s->nops;
    sh->nrounds = (uint32_t)s->nrounds;
    sh->hash = fnv(fnv(14695981039346656037ull, sh->ops, sh->nops * sizeof(cs_op)), sh->rounds,
                   sh->nrounds * sizeof(cs_round));
    return true;
}

static bool same_shape(const cs_shape *a, const cs_shape *b)
{
    return a->hash == b->hash && a->nops == b->nops && a->nrounds == b->nrounds &&
           memcmp(a->ops, b->ops, a->nops * sizeof(cs_op)) == 0 &&
           memcmp(a->rounds, b->rounds, a->nrounds * sizeof(cs_round)) == 0;
}

/* The index of @p sh in @p job, added (taking it) if new, freed if not. */
static bool intern(cs_job *job, cs_shape *sh, uint32_t *idx)
{
    for (uint32_t i = 0; i < job->nshapes; i++)
        if (same_shape(&job->shapes[i], sh)) {
            free(sh->ops);
            free(sh->rounds);
            *idx = i;
            return true;
        }
    if (job->nshapes == job->cap) {
        uint32_t cap = job->cap ? 2 * job->cap : 8;
        cs_shape *n = realloc(job->shapes, cap * sizeof(*n));
        if (n == NULL)
            return false;
        job->shapes = n, job->cap = cap;
    }
    job->shapes[job->nshapes] = *sh;
    *idx = job->nshapes++;
    return true;
}

static bool known(const char *coll, const char *algo)
{
    const char *const *a = cs_algorithms(coll);
    for (; a != NULL && *a != NULL; a++)
        if (strcmp(*a, algo) == 0)
            return true;
    return false;
}

bool cs_build(cs_job *job, const char *coll, const char *algo, int ranks, int per_host,
              uint64_t bytes, char *err, size_t cap)
{
    *job = (cs_job){.ranks = ranks, .bytes = bytes};
    /* the caller's buffers: the largest, and the other (a block of it, the
     * same size for the all-reduce, none for the broadcast: in place) */
    job->foot = (double)bytes * (strcmp(coll, "allreduce") == 0   ? 2.0
                                 : strcmp(coll, "broadcast") == 0 ? 1.0
                                                                  : 1.0 + 1.0 / ranks);
    if (!known(coll, algo)) {
        snprintf(err, cap, "unknown %s algorithm '%s'", coll, algo);
        return false;
    }
    if (strcmp(algo, "hier") == 0 && !cs_hier_applies(ranks, per_host)) {
        snprintf(err, cap, "%s hier: %d ranks are not several hosts of %d (> 1) ranks each", coll,
                 ranks, per_host);
        return false;
    }
    per_host = per_host > 0 ? per_host : 1;
    size_t n = (size_t)(bytes / 4), block = n / (size_t)ranks;
    size_t *counts = malloc(2 * (size_t)ranks * sizeof(size_t));
    job->shape_of = malloc((size_t)ranks * sizeof(uint32_t));
    bool ok = counts != NULL && job->shape_of != NULL;
    for (int i = 0; ok && i < ranks; i++)
        counts[i] = block, counts[ranks + i] = (size_t)i * block;
    for (int r = 0; ok && r < ranks; r++) {
        dt_comm c = {.ops = &sim_ops, .impl = &per_host, .rank = r, .size = ranks};
        dt__sched s;
        dt__sched_init(&s, DT_DTYPE_F32, DT_REDUCE_OP_SUM);
        cs_shape sh;
        ok = build_one(coll, algo, &c, n, counts, counts + ranks, &s) == DT_OK &&
             shape_of(&s, r, ranks, &sh) && intern(job, &sh, &job->shape_of[r]);
        dt__sched_free(&s);
    }
    free(counts);
    if (!ok) {
        snprintf(err, cap, "%s %s on %d ranks: no memory for the schedules", coll, algo, ranks);
        cs_job_free(job);
    }
    return ok;
}

void cs_job_free(cs_job *job)
{
    for (uint32_t i = 0; i < job->nshapes; i++) {
        free(job->shapes[i].ops);
        free(job->shapes[i].rounds);
    }
    free(job->shapes);
    free(job->shape_of);
    *job = (cs_job){0};
}
