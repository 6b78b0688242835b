/*
 * The host around this rank: its load (for the automatic spin) and the
 * liveness of peers on it (see ucx_impl.h). A peer is dead when its
 * process is gone, a zombie, or its pid now belongs to a process started at
 * another time. Read from /proc/<pid>/stat; a few microseconds per peer, done
 * at most every DT_UCX_LIVENESS_S while a rank is waiting.
 */
#include "comm/ucx/ucx_impl.h"

#include <stdatomic.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"
#include "core/proc_stat.h"

void dt__ucx_info_self(dt_ucx_info *out)
{
    memset(out, 0, sizeof(*out));
    out->cma_probe = dt__ucx_cma_probe_addr();
    static _Atomic uint32_t worlds;
    out->instance = atomic_fetch_add(&worlds, 1);
    out->pid = (int)getpid();
    char state = 0;
    dt__proc_stat(out->pid, &state, &out->start_time);
    if (gethostname(out->host, sizeof(out->host) - 1) != 0)
        snprintf(out->host, sizeof(out->host), "unknown");
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f == NULL || fgets(out->boot_id, sizeof(out->boot_id), f) == NULL)
        out->boot_id[0] = '\0'; /* no /proc: the hostname and namespaces decide */
    if (f != NULL)
        fclose(f);
    out->boot_id[strcspn(out->boot_id, "\n")] = '\0';
    struct stat st;
    out->pid_ns = stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
    out->ipc_ns = stat("/proc/self/ns/ipc", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

bool dt__ucx_same_host(const dt_ucx_info *a, const dt_ucx_info *b)
{
    return strncmp(a->host, b->host, sizeof(a->host)) == 0 &&
           strncmp(a->boot_id, b->boot_id, sizeof(a->boot_id)) == 0 && a->pid_ns == b->pid_ns &&
           a->ipc_ns == b->ipc_ns;
}

void dt__ucx_host_ids(dt_ucx_peer *peers, const dt_ucx_info *infos, int n)
{
    int64_t fake = dt__config_int("DT_TEST_RANKS_PER_HOST");
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < i && !dt__ucx_same_host(&infos[i], &infos[j]))
            j++;
        peers[i].host = fake > 0 ? (int)(i / fake) : j;
    }
}

void dt__ucx_check_liveness(dt_ucx_shared *sh, bool force, double now)
{
    if (!force && now - sh->last_liveness < DT_UCX_LIVENESS_S)
        return;
    sh->last_liveness = now;
    for (int i = 0; i < sh->world_size; i++) {
        dt_ucx_peer *p = &sh->peers[i];
        if (!p->local || p->dead || i == sh->world_rank)
            continue;
        char state = 0;
        unsigned long long start = 0;
        bool alive = dt__proc_stat(p->pid, &state, &start) && state != 'Z' && state != 'X' &&
                     start == p->start_time;
        if (!alive) {
            DT_LOG_INFO("comm", "ucx: world rank %d (pid %d) has exited", i, p->pid);
            p->dead = true;
            p->why = UCS_ERR_CONNECTION_RESET;
        }
    }
}

/* Whether world rank @p i is a peer on this host whose process is stopped. */
static bool peer_stopped(const dt_ucx_shared *sh, int i)
{
    const dt_ucx_peer *p = &sh->peers[i];
    char state = 0;
    unsigned long long start = 0;
    if (i == sh->world_rank || !p->local || p->dead)
        return false;
    return dt__proc_stat(p->pid, &state, &start) && start == p->start_time &&
           (state == 'T' || state == 't');
}

int dt__ucx_stopped_peer(const dt_comm *c, int first, int *pid)
{
    const dt_ucx_shared *sh = ((const dt_ucx_comm *)c->impl)->shared;
    int found = first >= 0 && first < sh->world_size && peer_stopped(sh, first) ? first : -1;
    for (int i = 0; found < 0 && i < sh->world_size; i++)
        if (peer_stopped(sh, i))
            found = i;
    if (found >= 0)
        *pid = sh->peers[found].pid;
    return found;
}

/* Contention is re-read at most every 0.5 s. */
void dt__ucx_update_spin(dt_ucx_shared *sh, double now)
{
    if (!sh->spin_auto)
        return;
    if (sh->last_load > 0 && now - sh->last_load < 0.5)
        return;
    sh->last_load = now;
    bool busy = sh->oversubscribed;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f != NULL) {
        double l1, l5, l15;
        int running = 0, total = 0;
        if (fscanf(f, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &running, &total) == 5)
            busy = busy || running > sh->cores; /* counts us and our polling peers too */
        fclose(f);
    }
    sh->yield_s = busy ? DT_UCX_SPIN_YIELD_US * 1e-6 : 0.0;
}
