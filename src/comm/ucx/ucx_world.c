/*
 * UCX backend set-up: context and worker (tag matching + wakeup), worker
 * addresses swapped through the bootstrap store, one endpoint per peer with
 * peer-failure handling, subgroups (splits) over the same worker, teardown.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <sched.h>

#include "comm/ucx/ucx_impl.h"
#include "comm/ucx/ucx_tcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "dtensor/store.h"

static void ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)ep;
    dt_ucx_peer *peer = arg;
    if (!peer->dead)
        DT_LOG_INFO("comm", "ucx: endpoint to world rank %d failed: %s", peer->world_rank,
                    ucs_status_string(status));
    peer->dead = true;
    peer->why = status;
}

static dt_status ucx_check(ucs_status_t us, const char *what)
{
    if (us == UCS_OK)
        return DT_OK;
    return DT_ERR(DT_ERR_BACKEND, "ucx: %s failed: %s", what, ucs_status_string(us));
}

/*
 * UCX settings dtensor chooses for the traffic UCX carries, each applied
 * only where the environment leaves UCX_<name> unset (the user's own value
 * wins; ucp_config_read has read it). With the shared-memory rings on, UCX
 * carries only messages between hosts, i.e. TCP (docs/ARCHITECTURE.md).
 */
static const struct {
    const char *name, *value;
} ucx_defaults[] = {
    /* Eager below 256 KiB instead of rendezvous from ~19 KiB. Over TCP a
     * rendezvous adds two one-way trips (RTS, RTR) before the data, each
     * needing the peer scheduled to answer: a 2 x 2-rank 256 KiB hierarchical
     * all-reduce (128 KiB messages) made 48 syscalls and slept 1.8 times per
     * call and rank with it, 32 and 0.8 eager (bench/comm/results_hosts.md
     * "Two hosts"). From 512 KiB on the eager path cost more CPU (UCX's 64 KiB
     * fragments, copied once more out of its receive buffers; 1 MiB
     * all-reduce: 2.5 against 1.75 ms per rank), where the rendezvous'
     * put lands in the user's buffer. */
    {"RNDV_THRESH", "256K"},
};

static void apply_ucx_defaults(ucp_config_t *cfg)
{
    if (dt__config_int("DT_SHM") == 0)
        return; /* UCX carries same-host traffic too: leave its protocols alone */
    for (size_t i = 0; i < sizeof(ucx_defaults) / sizeof(ucx_defaults[0]); i++) {
        char env[64];
        snprintf(env, sizeof(env), "UCX_%s", ucx_defaults[i].name);
        if (getenv(env) != NULL)
            continue;
        ucs_status_t us = ucp_config_modify(cfg, ucx_defaults[i].name, ucx_defaults[i].value);
        if (us != UCS_OK)
            DT_LOG_WARN("comm", "ucx: setting %s=%s failed: %s", env, ucx_defaults[i].value,
                        ucs_status_string(us));
        else
            DT_LOG_DEBUG("comm", "ucx: %s=%s (dtensor's default)", env, ucx_defaults[i].value);
    }
}

static dt_status shared_open(int rank, int size, dt_ucx_shared **out)
{
    dt_status st = DT_OK;
    dt_ucx_shared *sh = calloc(1, sizeof(*sh));
    if (sh == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "ucx: no memory for the worker state");
    sh->world_rank = rank;
    sh->world_size = size;
    sh->efd = -1;
    sh->next_id = 1; /* id 0 is the world */
    sh->peers = calloc((size_t)size, sizeof(*sh->peers));
    if (sh->peers == NULL) {
        st = DT_ERR(DT_ERR_NO_MEMORY, "ucx: no memory for %d peers", size);
        goto err_free;
    }
    ucp_config_t *cfg = NULL;
    DT_CHECK_GOTO(ucx_check(ucp_config_read(NULL, NULL, &cfg), "ucp_config_read"), st, err_free);
    apply_ucx_defaults(cfg);
    ucp_params_t prm = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
        .features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP,
        .mt_workers_shared = 0,
    };
    ucs_status_t us = ucp_init(&prm, cfg, &sh->context);
    ucp_config_release(cfg);
    DT_CHECK_GOTO(ucx_check(us, "ucp_init"), st, err_free);
    ucp_worker_params_t wp = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE,
    };
    DT_CHECK_GOTO(ucx_check(ucp_worker_create(sh->context, &wp, &sh->worker), "ucp_worker_create"),
                  st, err_cleanup_context);
    DT_CHECK_GOTO(ucx_check(ucp_worker_get_efd(sh->worker, &sh->efd), "ucp_worker_get_efd"), st,
                  err_destroy_worker);
    *out = sh;
    return DT_OK;

err_destroy_worker:
    ucp_worker_destroy(sh->worker);
err_cleanup_context:
    ucp_cleanup(sh->context);
err_free:
    free(sh->peers);
    free(sh);
    return st;
}

/*
 * Close every endpoint. Normally flush (a peer may still be reading our last
 * messages); after a failure - requests abandoned on the endpoints, a dead
 * peer, or an aborted family (a stopped peer never answers a flush) - force:
 * that completes them with an error so the worker can be destroyed.
 */
static void close_endpoints(dt_ucx_shared *sh, bool aborted)
{
    bool force = aborted || sh->orphans > 0;
    for (int i = 0; i < sh->world_size; i++)
        force = force || sh->peers[i].dead;
    for (int i = 0; i < sh->world_size; i++) {
        dt_ucx_peer *p = &sh->peers[i];
        if (p->ep == NULL)
            continue;
        ucp_request_param_t prm = {
            .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
            .flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0,
        };
        ucs_status_ptr_t sp = ucp_ep_close_nbx(p->ep, &prm);
        double deadline = dt__clock_now() + 2.0;
        while (UCS_PTR_IS_PTR(sp) && ucp_request_check_status(sp) == UCS_INPROGRESS &&
               dt__clock_now() < deadline)
            ucp_worker_progress(sh->worker);
        if (UCS_PTR_IS_PTR(sp)) {
            if (ucp_request_check_status(sp) == UCS_INPROGRESS)
                DT_LOG_WARN("comm", "ucx: closing the endpoint to world rank %d timed out", i);
            ucp_request_free(sp);
        }
        p->ep = NULL;
    }
    /* let the abandoned requests' callbacks run (they free our bookkeeping);
     * a send to a dead same-host peer never completes, so do not wait long */
    double deadline = dt__clock_now() + 0.2;
    while (sh->orphans > 0 && dt__clock_now() < deadline)
        ucp_worker_progress(sh->worker);
    if (sh->orphans > 0)
        DT_LOG_INFO("comm", "ucx: %d abandoned requests still pending at teardown", sh->orphans);
}

static void shared_release(dt_ucx_shared *sh)
{
    if (sh == NULL || --sh->refs > 0)
        return;
    bool aborted = false;
    for (int i = 0; i < sh->nfams; i++)
        aborted = aborted || sh->fams[i].f->status != DT_OK;
    dt__ucx_notice_close(sh);
    close_endpoints(sh, aborted);
    ucp_worker_destroy(sh->worker);
    ucp_cleanup(sh->context);
    for (int i = 0; i < sh->orphans; i++) /* UCX never completed them */
        free(sh->orphan_list[i]);
    free(sh->orphan_list);
    for (int i = 0; i < sh->n_grave; i++) /* nothing writes into them now */
        dt__host_allocator.free(0, sh->grave[i], sh->grave_block[i]);
    free(sh->grave);
    free(sh->grave_block);
    free(sh->cma_bounce);
    dt__ucx_shm_close(sh);
    dt__ucx_tcp_close(sh);
    dt__ucx_req_pool_clear(sh);
    free(sh->peers);
    free(sh);
}

/* Swap worker addresses through the store and create one endpoint per rank. */
static dt_status connect_all(dt_ucx_shared *sh, dt_store *store, double timeout_s)
{
    dt_status st = DT_OK;
    ucp_address_t *addr = NULL;
    size_t alen = 0;
    DT_CHECK(ucx_check(ucp_worker_get_address(sh->worker, &addr, &alen), "ucp_worker_get_address"));
    const int n = sh->world_size;
    uint64_t mylen = alen, maxlen = 0;
    uint64_t *lens = malloc((size_t)n * sizeof(*lens));
    char *mine = NULL, *all = NULL;
    if (lens == NULL) {
        st = DT_ERR(DT_ERR_NO_MEMORY, "ucx: no memory for %d address lengths", n);
        goto out_release_addr;
    }
    DT_CHECK_GOTO(
        dt_store_allgather(store, "dt/ucx/len", sh->world_rank, n, &mylen, sizeof(mylen), lens), st,
        out_free);
    for (int i = 0; i < n; i++)
        maxlen = lens[i] > maxlen ? lens[i] : maxlen;
    mine = calloc(1, maxlen);
    all = malloc((size_t)n * maxlen);
    if (mine == NULL || all == NULL) {
        st = DT_ERR(DT_ERR_NO_MEMORY, "ucx: no memory for %d addresses of %llu bytes", n,
                    (unsigned long long)maxlen);
        goto out_free;
    }
    memcpy(mine, addr, alen);
    DT_CHECK_GOTO(dt_store_allgather(store, "dt/ucx/addr", sh->world_rank, n, mine, maxlen, all),
                  st, out_free);
    dt_ucx_info me_info, *infos = calloc((size_t)n, sizeof(*infos));
    if (infos == NULL) {
        st = DT_ERR(DT_ERR_NO_MEMORY, "ucx: no memory for %d peer records", n);
        goto out_free;
    }
    dt__ucx_info_self(&me_info);
    DT_CHECK_GOTO(dt_store_allgather(store, "dt/ucx/info", sh->world_rank, n, &me_info,
                                     sizeof(me_info), infos),
                  st, out_free_infos);
    for (int i = 0; i < n; i++) {
        dt_ucx_peer *p = &sh->peers[i];
        p->shared = sh;
        p->world_rank = i;
        p->pid = infos[i].pid;
        p->start_time = infos[i].start_time;
        p->local = dt__ucx_same_host(&infos[i], &me_info);
        /* same host: shared memory, whose transports cannot do peer error handling */
        ucp_ep_params_t ep = {
            .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                          UCP_EP_PARAM_FIELD_ERR_HANDLER,
            .address = (const ucp_address_t *)(all + (size_t)i * maxlen),
            .err_mode = p->local ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER,
            .err_handler = {.cb = ep_error, .arg = p},
        };
        char what[64];
        snprintf(what, sizeof(what), "ucp_ep_create to world rank %d", i);
        DT_CHECK_GOTO(ucx_check(ucp_ep_create(sh->worker, &ep, &p->ep), what), st, out_free_infos);
    }
    dt__ucx_host_ids(sh->peers, infos, n);
    dt__ucx_cma_probe(sh, infos);
    st = dt__ucx_shm_setup(sh, store, infos);
    if (st == DT_OK)
        st = dt__ucx_tcp_setup(sh, store, timeout_s);
out_free_infos:
    free(infos);
out_free:
    free(all);
    free(mine);
    free(lens);
out_release_addr:
    ucp_worker_release_address(sh->worker, addr);
    return st;
}

/*
 * How long a wait busy-polls before sleeping: DT_SPIN_US (plain polling,
 * fixed), or the automatic policy of dt__ucx_update_spin (ucx_impl.h).
 */
static void pick_spin(dt_ucx_shared *sh)
{
    int local = 0;
    for (int i = 0; i < sh->world_size; i++)
        local += sh->peers[i].local ? 1 : 0;
    cpu_set_t set;
    int cores = (sched_getaffinity(0, sizeof(set), &set) == 0) ? CPU_COUNT(&set)
                                                               : (int)sysconf(_SC_NPROCESSORS_ONLN);
    sh->cores = cores;
    sh->oversubscribed = local > cores;
    int64_t us = dt__config_int("DT_SPIN_US");
    if (us >= 0) {
        sh->spin_max_s = sh->spin_min_s = sh->spin_s = (double)us * 1e-6;
        return;
    }
    sh->spin_auto = true;
    sh->spin_max_s = sh->oversubscribed ? 0.0 : DT_UCX_SPIN_MAX_US * 1e-6;
    sh->spin_min_s = sh->oversubscribed ? 0.0 : DT_UCX_SPIN_MIN_US * 1e-6;
    sh->spin_s = sh->spin_max_s;
    dt__ucx_update_spin(sh, dt__clock_now());
    DT_LOG_DEBUG("comm",
                 "ucx: %d local ranks on %d cores: poll up to %.0f us, then %.0f us "
                 "yielding, before sleeping",
                 local, cores, sh->spin_max_s * 1e6, sh->yield_s * 1e6);
}

static dt_status comm_wrap(dt_ucx_shared *sh, int n, int *members, int rank, uint32_t id,
                           dt_comm **out)
{
    dt_comm *c = calloc(1, sizeof(*c));
    dt_ucx_comm *uc = calloc(1, sizeof(*uc));
    if (c == NULL || uc == NULL) {
        free(c);
        free(uc);
        return DT_ERR(DT_ERR_NO_MEMORY, "ucx: no memory for a comm");
    }
    uc->shared = sh;
    uc->id = id;
    uc->members = members;
    uc->all_local = true;
    for (int i = 0; i < n; i++)
        uc->all_local = uc->all_local && sh->peers[members[i]].local;
    c->ops = &dt__ucx_ops;
    c->impl = uc;
    c->rank = rank;
    c->size = n;
    c->timeout_s = 300;
    sh->refs++;
    if (id >= sh->next_id)
        sh->next_id = id + 1;
    if (sh->next_id >= DT_UCX_NOTICE_ID)
        DT_LOG_WARN("comm", "ucx: comm ids exhausted (%u); tags of new comms may collide",
                    sh->next_id);
    *out = c;
    return DT_OK;
}

dt_status dt__comm_ucx_create_world(struct dt_store *store, int rank, int size, double timeout_s,
                                    dt_comm **out)
{
    dt_status st = DT_OK;
    if (size > (1 << DT_UCX_RANK_BITS))
        return DT_ERR(DT_ERR_UNSUPPORTED, "ucx: world size %d exceeds %d ranks", size,
                      1 << DT_UCX_RANK_BITS);
    dt_ucx_shared *sh = NULL;
    DT_CHECK(shared_open(rank, size, &sh));
    int *members = malloc((size_t)size * sizeof(*members));
    if (members == NULL) {
        st = DT_ERR(DT_ERR_NO_MEMORY, "ucx: no memory for %d members", size);
        goto err_release;
    }
    for (int i = 0; i < size; i++)
        members[i] = i;
    DT_CHECK_GOTO(connect_all(sh, store, timeout_s), st, err_free_members);
    DT_CHECK_GOTO(dt__ucx_notice_post(sh), st, err_free_members);
    pick_spin(sh);
    dt_comm *c = NULL;
    DT_CHECK_GOTO(comm_wrap(sh, size, members, rank, 0, &c), st, err_free_members);
    c->timeout_s = timeout_s;
    c->family = dt__ucx_family_open(c, 0); /* now: notices may come before any failure here */
    /* every endpoint carries one message before anyone returns: wire-up done */
    st = dt_comm_barrier(c, NULL);
    if (st == DT_OK)
        st = dt__ucx_cma_agree(c);
    if (st == DT_OK)
        st = dt__ucx_shm_agree(c);
    if (st == DT_OK)
        st = dt__ucx_tcp_agree(c);
    if (st != DT_OK) {
        dt_comm_destroy(c);
        return st;
    }
    *out = c;
    return DT_OK;

err_free_members:
    free(members);
err_release:
    sh->refs = 1;
    shared_release(sh);
    return st;
}

static dt_status ucx_subgroup(dt_comm *parent, int n, const int *members, int my_rank,
                              uint32_t comm_id, dt_comm **out)
{
    dt_ucx_comm *pc = parent->impl;
    int *wm = malloc((size_t)n * sizeof(*wm));
    if (wm == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "ucx: no memory for %d members", n);
    for (int i = 0; i < n; i++)
        wm[i] = pc->members[members[i]];
    dt_status st = comm_wrap(pc->shared, n, wm, my_rank, comm_id, out);
    if (st != DT_OK)
        free(wm);
    return st;
}

static uint32_t ucx_comm_id(const dt_comm *c)
{
    return ((const dt_ucx_comm *)c->impl)->id;
}

static uint32_t ucx_next_comm_id(const dt_comm *c)
{
    return ((const dt_ucx_comm *)c->impl)->shared->next_id;
}

static int ucx_world_rank(const dt_comm *c, int rank)
{
    return ((const dt_ucx_comm *)c->impl)->members[rank];
}

static int ucx_host_of(const dt_comm *c, int rank)
{
    const dt_ucx_comm *uc = c->impl;
    return uc->shared->peers[uc->members[rank]].host;
}

static void ucx_destroy(dt_comm *c)
{
    dt_ucx_comm *uc = c->impl;
    shared_release(uc->shared);
    free(uc->members);
    free(uc);
    free(c);
}

const dt_comm_ops dt__ucx_ops = {
    .name = "ucx",
    .isend = dt__ucx_isend,
    .isend2d = dt__ucx_isend2d,
    .irecv = dt__ucx_irecv,
    .irecv_reduce = dt__ucx_irecv_reduce,
    .req_test = dt__ucx_req_test,
    .req_cancel = dt__ucx_req_cancel,
    .defer_free = dt__ucx_defer_free,
    .progress = dt__ucx_progress,
    .subgroup = ucx_subgroup,
    .comm_id = ucx_comm_id,
    .next_comm_id = ucx_next_comm_id,
    .destroy = ucx_destroy,
    .world_rank = ucx_world_rank,
    .host_of = ucx_host_of,
    .stopped_peer = dt__ucx_stopped_peer,
    .family_open = dt__ucx_family_open,
    .notify_abort = dt__ucx_notify_abort,
    .peer_copy = dt__ucx_peer_copy,
    .peer_copy_ok = dt__ucx_peer_copy_ok,
    .p2p_shm = dt__ucx_shm_p2p_ok,
};
