/*
 * Same-host copies by cross-memory attach (see ucx_impl.h): one
 * process_vm_writev/readv moves up to IOV_MAX runs on each side. The kernel
 * pins the REMOTE pages run by run, so the remote block should be the
 * contiguous one (dt__peer_copy_run arranges that); many short LOCAL runs
 * are staged through a cache-sized bounce buffer instead of being listed.
 */
#define _GNU_SOURCE
#include "comm/ucx/ucx_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

#define DT_UCX_CMA_MAGIC 0x64742d636d61ULL /* "dt-cma" */
#define DT_UCX_CMA_IOVS  1024              /* the kernel's UIO_MAXIOV */
/* Local runs shorter than this are staged (measured here: 1 KiB runs listed
 * directly cost 1.3x a contiguous copy, 128 B runs 3.4x). */
#define DT_UCX_CMA_MIN_RUN (1024)
#define DT_UCX_CMA_BOUNCE  (256 * 1024) /* fits the L2 cache */

static const volatile uint64_t cma_probe_word = DT_UCX_CMA_MAGIC;

uint64_t dt__ucx_cma_probe_addr(void)
{
    return (uint64_t)(uintptr_t)&cma_probe_word;
}

void dt__ucx_cma_probe(dt_ucx_shared *sh, const dt_ucx_info *infos)
{
    sh->cma = dt__config_int("DT_CMA") != 0;
    for (int i = 0; i < sh->world_size && sh->cma; i++) {
        if (i == sh->world_rank || !sh->peers[i].local)
            continue;
        uint64_t word = 0;
        struct iovec l = {&word, sizeof(word)};
        struct iovec r = {(void *)(uintptr_t)infos[i].cma_probe, sizeof(word)};
        if (process_vm_readv(infos[i].pid, &l, 1, &r, 1, 0) != (ssize_t)sizeof(word) ||
            word != DT_UCX_CMA_MAGIC) {
            DT_LOG_INFO("comm", "ucx: no cross-memory attach to world rank %d (pid %d): %s", i,
                        infos[i].pid, strerror(errno));
            sh->cma = false;
        }
    }
}

dt_status dt__ucx_cma_agree(dt_comm *world)
{
    dt_ucx_comm *uc = world->impl;
    int32_t ok = uc->shared->cma ? 1 : 0;
    DT_CHECK(dt_comm_allreduce(world, &ok, &ok, 1, DT_DTYPE_I32, DT_REDUCE_OP_MIN, NULL));
    uc->shared->cma = ok == 1;
    return DT_OK;
}

bool dt__ucx_peer_copy_ok(const dt_comm *c)
{
    const dt_ucx_comm *uc = c->impl;
    return uc->shared->cma && uc->all_local;
}

/* Append [p, p+n) to @p v, growing the last entry when it ends at p. */
static void iov_push(struct iovec *v, int *nv, char *p, uint64_t n)
{
    if (*nv > 0 && (char *)v[*nv - 1].iov_base + v[*nv - 1].iov_len == p) {
        v[*nv - 1].iov_len += n;
        return;
    }
    v[*nv] = (struct iovec){p, n};
    (*nv)++;
}

static dt_status cma_error(int world_peer, int pid, bool to_peer, uint64_t want, ssize_t got)
{
    const char *op = to_peer ? "process_vm_writev" : "process_vm_readv";
    if (got < 0 && errno == ESRCH)
        return DT_ERR(DT_ERR_PEER_LOST, "ucx: world rank %d (pid %d) has exited", world_peer, pid);
    if (got < 0)
        return DT_ERR(DT_ERR_BACKEND,
                      "ucx: %s of %llu bytes with world rank %d (pid %d) "
                      "failed: %s",
                      op, (unsigned long long)want, world_peer, pid, strerror(errno));
    return DT_ERR(DT_ERR_BACKEND,
                  "ucx: %s with world rank %d (pid %d) moved %zd of %llu "
                  "bytes (a bad address in a block?)",
                  op, world_peer, pid, got, (unsigned long long)want);
}

/* Move @p bytes between the runs under @p l (here) and @p r (the peer). */
static dt_status cma_move(int world_peer, int pid, bool to_peer, dt__run_cursor *l,
                          dt__run_cursor *r, uint64_t bytes)
{
    struct iovec lv[DT_UCX_CMA_IOVS], rv[DT_UCX_CMA_IOVS];
    while (bytes > 0) {
        int nl = 0, nr = 0;
        uint64_t batch = 0;
        while (batch < bytes && nl < DT_UCX_CMA_IOVS && nr < DT_UCX_CMA_IOVS) {
            uint64_t n = dt__run_left(l) < dt__run_left(r) ? dt__run_left(l) : dt__run_left(r);
            if (n > bytes - batch)
                n = bytes - batch;
            if (n > (uint64_t)SSIZE_MAX / 2 - batch)
                break;
            iov_push(lv, &nl, dt__run_ptr(l), n);
            iov_push(rv, &nr, dt__run_ptr(r), n);
            dt__run_skip(l, n);
            dt__run_skip(r, n);
            batch += n;
        }
        ssize_t got = to_peer
                          ? process_vm_writev(pid, lv, (unsigned long)nl, rv, (unsigned long)nr, 0)
                          : process_vm_readv(pid, lv, (unsigned long)nl, rv, (unsigned long)nr, 0);
        if (got != (ssize_t)batch)
            return cma_error(world_peer, pid, to_peer, batch, got);
        bytes -= batch;
    }
    return DT_OK;
}

/* Gather (pack) or scatter (unpack) @p n bytes between runs and @p buf. */
static void stage(dt__run_cursor *c, char *buf, uint64_t n, bool pack)
{
    while (n > 0) {
        uint64_t k = dt__run_left(c) < n ? dt__run_left(c) : n;
        if (pack)
            memcpy(buf, dt__run_ptr(c), k);
        else
            memcpy(dt__run_ptr(c), buf, k);
        dt__run_skip(c, k);
        buf += k;
        n -= k;
    }
}

dt_status dt__ucx_peer_copy(dt_comm *c, int peer, bool to_peer, const dt__block2d *local,
                            const dt__block2d *remote, uint64_t offset, uint64_t bytes)
{
    dt_ucx_comm *uc = c->impl;
    dt_ucx_shared *sh = uc->shared;
    int wp = uc->members[peer];
    const dt_ucx_peer *p = &sh->peers[wp];
    if (p->dead)
        return DT_ERR(DT_ERR_PEER_LOST, "ucx: world rank %d (pid %d) has exited", wp, p->pid);
    dt__run_cursor l = dt__run_cursor_at(local, offset), r = dt__run_cursor_at(remote, offset);
    if (l.rows == 1 || l.run >= DT_UCX_CMA_MIN_RUN)
        return cma_move(wp, p->pid, to_peer, &l, &r, bytes);
    if (sh->cma_bounce == NULL && (sh->cma_bounce = malloc(DT_UCX_CMA_BOUNCE)) == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "ucx: no memory for a %d-byte staging buffer",
                      DT_UCX_CMA_BOUNCE);
    for (uint64_t done = 0; done < bytes;) { /* short local runs: through the cache */
        uint64_t n = bytes - done < DT_UCX_CMA_BOUNCE ? bytes - done : DT_UCX_CMA_BOUNCE;
        dt__run_cursor b = {
            .addr = (uint64_t)(uintptr_t)sh->cma_bounce, .rows = 1, .run = n, .pitch = n};
        if (to_peer)
            stage(&l, sh->cma_bounce, n, true);
        DT_CHECK(cma_move(wp, p->pid, to_peer, &b, &r, n));
        if (!to_peer)
            stage(&l, sh->cma_bounce, n, false);
        done += n;
    }
    return DT_OK;
}
