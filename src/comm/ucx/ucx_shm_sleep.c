/*
 * Sleeping on the shared-memory rings (ucx_shm.c): a waiting rank announces
 * that it sleeps, looks at its rings once more and only then sleeps in poll()
 * on UCX's event fd and its wake socket; a rank that stored into a peer's
 * ring, window or tail reads the peer's flag afterwards and, when it is set,
 * sends one byte to the socket.
 *
 * This is Dekker's pattern: both sides store, then load what the other
 * stored, and one of them must see the other's store or the sleeper misses
 * the message. Each side needs a store-load barrier between the two. The
 * sender's runs after every message, and a full fence there waits until the
 * slot's line, which the polling receiver holds, is written back: ~15% of an
 * 8 B all-reduce (perf). So the barrier is asymmetric where the kernel can
 * do it: the sleeper issues membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED),
 * which runs a full barrier on every CPU running a registered process (all
 * ranks register at set-up) before it returns, and the sender only keeps
 * the compiler from swapping its store and its load. A sender is then either
 * wholly before that barrier (its store is visible to the sleeper's second
 * look) or its load comes after it (and sees the flag). The membarrier costs
 * the sleeper ~3-5 us (and IPIs to the CPUs running ranks), against a sleep
 * that follows >= 5 us of spinning. Off by default (DT_SHM_MEMBARRIER=1 turns
 * it on; any rank without the syscall turns it off everywhere): on 2 KVM
 * vCPUs, 20 interleaved runs at load 4-5, 2-rank 8 B all-reduce best 0.30 us
 * with fences, 0.31 with membarrier, median 0.34 against 0.46 (the sleeps'
 * membarriers under load), so the fence's cost did not show there.
 */
#define _GNU_SOURCE
#include "comm/ucx/ucx_shm_impl.h"

#include <linux/membarrier.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/config.h"

static int membarrier(int cmd)
{
    return (int)syscall(__NR_membarrier, cmd, 0u, 0);
}

bool dt__shm_membarrier_register(void)
{
    if (dt__config_int("DT_SHM_MEMBARRIER") == 0)
        return false;
    int cmds = membarrier(MEMBARRIER_CMD_QUERY);
    return cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
           membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
}

void dt__shm_wake_if_asleep(const dt_ucx_shm *shm, const shm_peer *p)
{
    /* my store (made by the caller) before the load of the flag: the
     * sleeper's membarrier orders it on the CPU, else the fence does */
    if (shm->asym)
        atomic_signal_fence(memory_order_seq_cst);
    else
        atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&p->ctl->sleeping, memory_order_relaxed) != 0)
        (void)sendto(shm->wake_fd, "", 1, MSG_DONTWAIT, (const struct sockaddr *)&p->wake,
                     p->wake_len);
}

bool dt__ucx_shm_sleep_begin(dt_ucx_shared *sh)
{
    dt_ucx_shm *shm = sh->shm;
    if (shm == NULL || !shm->on)
        return true;
    atomic_store_explicit(&shm->ctl->sleeping, 1, memory_order_relaxed);
    /* the flag before the second look at the rings (see above); a failed
     * membarrier orders nothing on the senders: do not sleep, poll again */
    if (!shm->asym) {
        atomic_thread_fence(memory_order_seq_cst);
    } else if (membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0) {
        atomic_store_explicit(&shm->ctl->sleeping, 0, memory_order_relaxed);
        return false;
    }
    if (dt__ucx_shm_progress(sh) == 0)
        return true;
    atomic_store_explicit(&shm->ctl->sleeping, 0, memory_order_relaxed);
    return false;
}

void dt__ucx_shm_sleep_end(dt_ucx_shared *sh, bool woken)
{
    dt_ucx_shm *shm = sh->shm;
    if (shm == NULL || !shm->on)
        return;
    atomic_store_explicit(&shm->ctl->sleeping, 0, memory_order_relaxed);
    char buf[64];
    while (woken && recv(shm->wake_fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
        ;
}
