/*
 * The virtual clock (see commsim.h). Each rank runs its schedule as
 * src/comm/work.c does: post a round's sends and receives, wait for all of
 * them, post the next round now if it is `early`, run the round's local
 * ops, go on. A matched message crosses a path of resources (the two ranks'
 * ports; across hosts both NICs; across switches both uplinks), each busy
 * for bytes / its bandwidth from the first gap that fits on all of them
 * (commsim_busy.h): messages sharing a NIC or a port queue behind each other. Events (a rank
 * resumes, a transfer ends) are handled in time order, so every reservation is made in causal
 * order.
 */
#include "commsim.h"
#include "commsim_busy.h"
#include "commsim_heap.h"
#include "commsim_match.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/ucx/ucx_shm_impl.h" /* dt__shm_window_slots, SHM_BULK_CHUNKS */

typedef struct rstate {
    uint32_t cur, posted; /* round being waited on; rounds posted */
    int pend[2];          /* unfinished transfers of rounds of each parity */
    bool waiting;
} rstate;

typedef struct sim {
    const cs_job *job;
    const cs_model *m;
    double stretch;  /* ranks per host over cores, at least 1 */
    int local;       /* ranks on a host */
    int slots;       /* the bulk window's slots on such a host */
    double coreless; /* the share of a host's ranks without a core: (ranks - cores) / ranks */
    double mem_call; /* the memory stretch of a copy from or into the caller's buffers */
    int hosts, switches;
    rstate *rs;
    cs_busy *port_out, *port_in; /* a rank's sends and receives */
    cs_busy *nic_out, *nic_in, *up, *down;
    int nbusy;        /* the cs_busy at port_out */
    double *cpu;      /* a rank's CPU: its local ops, and its shared-memory copies */
    double *xfer_end; /* when a rank's last transfer reserved so far ends */
    cs_heap heap;
    cs_match match;
    double end, now; /* the last event's time, and the current one's */
    bool nomem;
} sim;

/* The stretch of bytes @p over times what the cache holds. */
static double spill(const cs_model *m, double over)
{
    double f = over > 1 ? pow(over, m->mem_exp) : 1.0;
    f = f > m->mem_max ? m->mem_max : f;
    return f < 1 ? 1 : f; /* mem_max below 1 would speed memory up */
}

/* The memory stretch of an op on @p bytes: 1 while the host's ranks' ops of
 * this size (2 buffers each) fit the cache, more when their operands come
 * from memory. Per op, not per call: the fold's small pieces stay in the
 * cache where the ring's large blocks do not. */
static double mem(const sim *s, double bytes)
{
    return spill(s->m, 2.0 * bytes * s->local / s->m->cache_bytes);
}

/* The memory stretch of a call's own buffers (the caller's send and
 * receive buffers): 1 while those of all the host's ranks fit `cache_call`
 * (comm_bench, like a training step, calls again on the same buffers, so
 * they stay cached from one call to the next), more as they spill, with
 * mem_exp and mem_max as mem(). Whatever piece of them an op moves: a
 * segment of a large buffer streams from memory as the whole buffer does. */
static double mem_call(const sim *s)
{
    const cs_model *m = s->m;
    if (m->cache_call <= 0)
        return -1; /* per op */
    return spill(m, s->job->foot * s->local / m->cache_call);
}

/* The memory stretch of a shared-memory transfer of @p bytes: the mean of
 * its two copies', the sender's into the window and the receiver's out of
 * it. The window stays in the cache, so each copy streams one buffer: the
 * sender's or the receiver's, which is the caller's (mem_call) or the
 * schedule's scratch (per op: the fold's slots, a few pieces reused every
 * round, stay in the cache). */
static double mem_shm(const sim *s, double bytes, bool snd_scratch, bool rcv_scratch)
{
    double op = mem(s, bytes);
    if (s->mem_call < 0)
        return op;
    return ((snd_scratch ? op : s->mem_call) + (rcv_scratch ? op : s->mem_call)) / 2;
}

static const cs_shape *shape(const sim *s, int r)
{
    return &s->job->shapes[s->job->shape_of[r]];
}

static double maxd(double a, double b)
{
    return a > b ? a : b;
}

/* Whether ranks @p a and @p b (and every other rank awake on their host at
 * @p t) have a core each: the host's ranks awake are at most its cores.
 * A rank is asleep while it waits with nothing of its own in progress (an
 * oversubscribed rank yields its core and then sleeps in poll():
 * dt__ucx_progress), awake while it runs, copies or reduces (one that has
 * returned is back in the caller: awake). All or
 * nothing: otherwise the host's ranks share its cores as if all were awake
 * (a share by the ranks awake at one moment would give the transfers of one
 * all-to-all round unequal lengths, fixed when reserved, and leave gaps). */
static bool has_core(const sim *s, int a, int b, double t)
{
    if (s->stretch == 1)
        return true;
    const int lo = a / s->m->per_host * s->m->per_host, hi = lo + s->local;
    int n = 0;
    for (int r = lo; r < hi && r < s->job->ranks && n <= s->m->cores; r++)
        n += r == a || r == b || !s->rs[r].waiting || s->xfer_end[r] > t || s->cpu[r] > t;
    return n <= s->m->cores;
}

static double mind(double a, double b)
{
    return a < b ? a : b;
}

/* Whether a message of @p bytes from @p src to @p dst flows without a handshake. */
static bool eager_path(const cs_model *m, int src, int dst, double bytes)
{
    if (src / m->per_host == dst / m->per_host)
        return bytes <= m->eager_bytes;
    return bytes <= (m->eager_net > 0 ? m->eager_net : m->eager_bytes);
}

/* The bulk path's pipeline fill (ucx_shm_bulk.c): a message of one chunk is
 * copied in, then out, so its two copies run in sequence. A longer one
 * overlaps them from its first chunk on when the window has more slots than
 * a send keeps chunks in flight (each chunk lands in a slot its receiver
 * left flight_shm chunks ago, not the one it has just read) and both ranks
 * have a core to copy at once; otherwise its copies stay a chunk apart.
 * (The library's A/B of the 8 slots: 0.43-0.94x on 2 ranks, 0.76-1.0x on 3
 * and a median of 1.0 on 4, all on 2 cores.) */
static double bulk_fill(const sim *s, double bytes)
{
    const double chunk = s->m->chunk_shm;
    if (bytes <= chunk)
        return bytes;
    return s->slots > s->m->flight_shm && s->stretch == 1 ? 0 : chunk;
}

/* Reserve the @p n claims from the first gap at or after @p from that fits
 * them all: its start. */
static double reserve(sim *s, const cs_claim *c, int n, double from)
{
    double t0 = cs_busy_fit(c, n, from);
    for (int i = 0; i < n; i++)
        if (!cs_busy_add(c[i].busy, t0, c[i].dur, s->now))
            s->nomem = true;
    return t0;
}

/* Reserve the path src -> dst for @p bytes from @p start: when the last byte
 * arrives. @p ss, @p rs: the sender's, the receiver's buffer is scratch. */
static double transfer(sim *s, int src, int dst, double bytes, double start, bool ss, bool rs)
{
    const cs_model *m = s->m;
    int hs = src / m->per_host, hd = dst / m->per_host;
    /* larger than eager: a handshake (request, clear to send) first */
    const bool rndv = !eager_path(m, src, dst, bytes);
    const double hops = rndv ? 3 : 1;
    if (hs == hd) { /* shared memory: copies by both ranks' CPUs */
        /* the copies are CPU work, stretched when ranks share cores (but
         * for the ranks awake, has_core); the fill is a wait, in which the
         * ranks sharing the core run */
        double fill = rndv ? bulk_fill(s, bytes) : 0;
        const bool own = has_core(s, src, dst, start);
        const double stretch = own ? 1 : s->stretch;
        double dur =
            (bytes * stretch * mem_shm(s, bytes, ss, rs) + fill) / (rndv ? m->bw_shm : m->bw_eager);
        cs_claim c[2] = {{&s->port_out[src], dur}, {&s->port_in[dst], dur}};
        double t0 = reserve(s, c, 2, maxd(start, maxd(s->cpu[src], s->cpu[dst])));
        /* sharing cores, the handshake waits for the peer to be scheduled */
        double wake = rndv && !own ? m->o_switch * s->coreless : 0;
        double end = t0 + hops * m->lat_shm * stretch + wake + dur;
        s->xfer_end[src] = maxd(s->xfer_end[src], end);
        s->xfer_end[dst] = maxd(s->xfer_end[dst], end);
        return end;
    }
    int ws = hs / m->hosts_per_switch, wd = hd / m->hosts_per_switch;
    bool cross = ws != wd;
    double rate = cross && m->bw_uplink < m->bw_net ? m->bw_uplink : m->bw_net;
    /* kernel TCP: the CPUs copy, and may be slower than the link */
    double tcp = m->bw_tcp > 0 ? bytes / m->bw_tcp * s->stretch * mem(s, bytes) : 0;
    double dur = maxd(bytes / rate, tcp);
    cs_claim c[6] = {{&s->port_out[src], dur},
                     {&s->port_in[dst], dur},
                     {&s->nic_out[hs], bytes / m->bw_net},
                     {&s->nic_in[hd], bytes / m->bw_net},
                     {&s->up[ws], bytes / m->bw_uplink},
                     {&s->down[wd], bytes / m->bw_uplink}};
    double t0 = reserve(s, c, cross ? 6 : 4, start);
    if (m->bw_net_cpu > 0) { /* the CPUs move the bytes: both ranks' copies and ops wait */
        double cpu = t0 + mind(dur, maxd(bytes / m->bw_net_cpu, tcp));
        s->cpu[src] = maxd(s->cpu[src], cpu);
        s->cpu[dst] = maxd(s->cpu[dst], cpu);
    }
    return t0 + hops * (m->lat_net + (cross ? m->lat_switch : 0)) + dur;
}

static void push(sim *s, double t, int rank, int par)
{
    if (!cs_heap_push(&s->heap, t, rank, par))
        s->nomem = true;
}

/* One send or receive of rank @p r posted at @p t. */
static void post_op(sim *s, int r, const cs_op *op, int par, double t)
{
    const int p = s->job->ranks;
    const int peer = (r + op->peer) % p;
    const bool is_send = op->kind == CS_SEND;
    const bool eager = is_send && (double)op->bytes <= s->m->eager_bytes;
    cs_half h = {t, r, (int8_t)par, eager, op->scratch}, o;
    if (eager)
        push(s, t, r, par); /* an eager send is done once posted */
    int got = cs_match_post(&s->match, is_send ? r : peer, is_send ? peer : r, is_send, &h, &o);
    if (got < 0)
        s->nomem = true;
    if (got <= 0)
        return;
    const cs_half *snd = is_send ? &h : &o, *rcv = is_send ? &o : &h;
    /* an eager message flows once sent; a larger one once both sides posted */
    bool flows = snd->done || eager_path(s->m, snd->rank, rcv->rank, (double)op->bytes);
    double start = flows ? snd->t : maxd(snd->t, rcv->t);
    double end =
        transfer(s, snd->rank, rcv->rank, (double)op->bytes, start, snd->scratch, rcv->scratch);
    if (!snd->done)
        push(s, end, snd->rank, snd->par);
    push(s, maxd(end, rcv->t), rcv->rank, rcv->par);
}

/* Post round @p i of rank @p r at @p now; the time its CPU is done posting. */
static double post_round(sim *s, int r, uint32_t i, double now)
{
    const cs_shape *sh = shape(s, r);
    const cs_round *rd = &sh->rounds[i];
    for (uint32_t k = rd->first; k < rd->first + rd->count; k++) {
        const cs_op *op = &sh->ops[k];
        if (op->kind == CS_LOCAL)
            continue;
        now += (s->job->tiny ? s->m->o_tiny : s->m->o_msg) * s->stretch;
        s->rs[r].pend[i & 1]++;
        post_op(s, r, op, (int)(i & 1), now);
    }
    return now;
}

/* CPU time of rank @p r's round @p i's local ops at @p now, and whether it
 * has transfers (1), some to other hosts (2). */
static double local_cost(const sim *s, int r, const cs_shape *sh, uint32_t i, double now,
                         int *xfers)
{
    const cs_round *rd = &sh->rounds[i];
    const int per_host = s->m->per_host;
    double t = 0;
    *xfers = 0;
    for (uint32_t k = rd->first; k < rd->first + rd->count; k++) {
        const cs_op *op = &sh->ops[k];
        if (op->kind != CS_LOCAL)
            *xfers =
                *xfers == 2 || (r + op->peer) % s->job->ranks / per_host != r / per_host ? 2 : 1;
        else
            t += (double)op->bytes / (op->copy ? s->m->bw_copy : s->m->bw_reduce) *
                 mem(s, (double)op->bytes);
    }
    return has_core(s, r, r, now) ? t : t * s->stretch;
}

/* Run rank @p r from @p now until it waits for a transfer or its CPU is busy. */
static void advance(sim *s, int r, double now)
{
    rstate *st = &s->rs[r];
    const cs_shape *sh = shape(s, r);
    if (st->cur == sh->nrounds)
        return;
    if (st->posted == st->cur)
        now = post_round(s, r, st->posted++, now);
    if (st->pend[st->cur & 1] > 0) {
        st->waiting = true;
        return;
    }
    int xfers;
    double local = local_cost(s, r, sh, st->cur, now, &xfers);
    const cs_model *m = s->m;
    double sw = xfers == 2 && m->o_switch_net > 0 ? m->o_switch_net : m->o_switch;
    /* woken up with a core free; after transfers to other hosts a socket's
     * wake-up (o_switch_net, measured with the ranks competing) keeps its cost */
    if (xfers == 1 && has_core(s, r, r, now))
        now += s->job->tiny ? 0 : m->o_round;
    else if (xfers) /* woken up: by a context switch when ranks share cores */
        now += (s->job->tiny ? 0 : m->o_round) * s->stretch + sw * s->coreless;
    uint32_t next = st->cur + 1;
    /* the local ops hold the CPU, so an early round's shared-memory copies
     * (done by this CPU) follow them; a NIC's transfers overlap them */
    s->cpu[r] = maxd(s->cpu[r], now) + local;
    if (next < sh->nrounds && st->posted == next && sh->rounds[next].early)
        now = post_round(s, r, st->posted++, now);
    st->cur = next;
    now += local;
    s->end = maxd(s->end, now);
    if (next < sh->nrounds)
        push(s, now, r, -1);
}

static bool setup(sim *s, const cs_job *job, const cs_model *m)
{
    memset(s, 0, sizeof(*s));
    s->job = job, s->m = m;
    int p = job->ranks, local = m->per_host < p ? m->per_host : p;
    s->stretch = local > m->cores ? (double)local / m->cores : 1.0;
    s->local = local;
    /* the wide window where the library gives one (hosts of few ranks) */
    s->slots = dt__shm_window_slots(local) > SHM_BULK_CHUNKS ? m->slots_shm : m->flight_shm;
    /* a woken rank waits for a core as often as the host's ranks outnumber them */
    s->coreless = local > m->cores ? (double)(local - m->cores) / local : 0.0;
    s->mem_call = mem_call(s);
    s->hosts = (p + m->per_host - 1) / m->per_host;
    s->switches = (s->hosts + m->hosts_per_switch - 1) / m->hosts_per_switch;
    s->rs = calloc((size_t)p, sizeof(*s->rs));
    s->nbusy = 2 * p + 2 * s->hosts + 2 * s->switches;
    s->port_out = calloc((size_t)s->nbusy, sizeof(cs_busy));
    s->cpu = calloc((size_t)p, sizeof(double));
    s->xfer_end = calloc((size_t)p, sizeof(double));
    if (s->rs == NULL || s->port_out == NULL || s->cpu == NULL || s->xfer_end == NULL)
        return false;
    s->port_in = s->port_out + p;
    s->nic_out = s->port_in + p;
    s->nic_in = s->nic_out + s->hosts;
    s->up = s->nic_in + s->hosts;
    s->down = s->up + s->switches;
    return true;
}

/* The rank left unfinished, if any (a deadlock), into @p err. */
static bool stuck(const sim *s, char *err, size_t cap)
{
    for (int r = 0; r < s->job->ranks; r++)
        if (s->rs[r].cur < shape(s, r)->nrounds) {
            int a = 0, b = 0;
            cs_match_pending(&s->match, &a, &b);
            snprintf(err, cap, "deadlock: rank %d stops in round %u (a message %d -> %d unmatched)",
                     r, s->rs[r].cur, a, b);
            return true;
        }
    return false;
}

double cs_simulate(const cs_job *job, const cs_model *m, char *err, size_t cap)
{
    sim s;
    double result = -1;
    if (!setup(&s, job, m)) {
        snprintf(err, cap, "no memory for %d ranks", job->ranks);
        goto out;
    }
    for (int r = 0; r < job->ranks; r++)
        push(&s, 0.0, r, -1);
    while (s.heap.n > 0 && !s.nomem) {
        cs_event ev = cs_heap_pop(&s.heap);
        rstate *st = &s.rs[ev.rank];
        s.now = ev.t;
        s.end = maxd(s.end, ev.t);
        if (ev.par >= 0 && --st->pend[ev.par] > 0)
            continue;
        if (ev.par >= 0 && !(st->waiting && ev.par == (int)(st->cur & 1)))
            continue; /* the early round's transfers: the rank is not waiting on them yet */
        st->waiting = false;
        advance(&s, ev.rank, ev.t);
    }
    if (s.nomem)
        snprintf(err, cap, "no memory for the events of %d ranks", job->ranks);
    else if (!stuck(&s, err, cap))
        result = s.end;
out:
    free(s.rs);
    for (int i = 0; s.port_out != NULL && i < s.nbusy; i++)
        cs_busy_free(&s.port_out[i]);
    free(s.port_out);
    free(s.cpu);
    free(s.xfer_end);
    free(s.heap.e);
    cs_match_free(&s.match);
    return result;
}

double cs_busbw_factor(const char *coll, int n)
{
    if (strcmp(coll, "allreduce") == 0)
        return 2.0 * (n - 1) / n;
    if (strcmp(coll, "broadcast") == 0)
        return 1.0;
    return (double)(n - 1) / n;
}
