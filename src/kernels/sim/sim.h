/*
 * The strict simulated device ("sim"): a test instrument that makes the
 * mistakes real GPUs punish visible on a CPU, in the spirit of PyTorch's meta
 * and PrivateUse1 test backends.
 *
 *   memory   sim_memory.c: real host blocks handed out as tagged addresses
 *            (bits 48-55 set: non-canonical on x86-64, beyond the address
 *            space on arm64), so any host read or write of device memory
 *            outside the kernel table and the copy entry points faults, under
 *            ASan too. Frees are stream-ordered: a block returns to the system
 *            only after every kernel queued before the free has run.
 *   stream   sim_stream.c: one in-order queue per process run by a worker
 *            thread; kernels and copies return as soon as they are queued.
 *            DT_SIM_DELAY_US delays every job, so a read that forgot to
 *            synchronise sees stale or poisoned data instead of passing by
 *            luck. A job that fails makes the stream's error sticky: it is
 *            returned by every later submission and synchronisation.
 *   kernels  sim_kernels.c: the CPU table, each entry run on the stream over
 *            snapshots of its tensors with the tags removed, so results are
 *            bit-identical to the CPU's.
 *   copies   sim_copy.c: host <-> sim <-> sim, blocking, and an asynchronous
 *            device-to-host copy that poisons its destination until it runs.
 */
#ifndef DT_KERNELS_SIM_SIM_H
#define DT_KERNELS_SIM_SIM_H

#include <stdint.h>

#include "core/tensor_impl.h"

/* The tag of every sim address: bits 48-55. */
#define DT_SIM_TAG ((uintptr_t)0xa5 << 48)

/* Whether @p p carries the sim tag. */
static inline int dt__sim_is_tagged(const void *p)
{
    return ((uintptr_t)p & ((uintptr_t)0xff << 48)) == DT_SIM_TAG;
}

/* The host address behind a sim address (only the stream's jobs use it). */
static inline void *dt__sim_untag(const void *p)
{
    return (void *)((uintptr_t)p & ~((uintptr_t)0xff << 48));
}

/* Most tensors a job snapshots (the largest entry, adamw_step, takes 4). */
#define DT_SIM_JOB_TENSORS 8

/*
 * One unit of work on the stream. The submitter fills it (dt__sim_job_new,
 * then dt__sim_job_tensor for each tensor argument and the scalar fields) and
 * hands it to dt__sim_submit, which owns it from then on.
 */
typedef struct dt_sim_job dt_sim_job;
typedef dt_status (*dt_sim_run_fn)(dt_sim_job *j);

struct dt_sim_job {
    const char *name;  /* the entry, for the sticky error */
    bool after_errors; /* queued even when the stream has failed (frees) */
    dt_sim_run_fn run;
    void (*done)(dt_sim_job *j);      /* (optional) after run, on the worker */
    dt_tensor *a[DT_SIM_JOB_TENSORS]; /* the entry's tensor arguments, in order (NULL stays NULL) */
    dt_tensor t[DT_SIM_JOB_TENSORS];  /* their snapshots */
    dt_storage s[DT_SIM_JOB_TENSORS];
    int nt;
    /* scalar arguments, as the entry defines them */
    int i[4];
    int64_t l[2];
    float f[6];
    double d;
    void *p[2];
    dt_sim_job *next;
};

/* A zeroed job for entry @p name; DT_ERR_NO_MEMORY when none. */
dt_status dt__sim_job_new(const char *name, dt_sim_run_fn run, dt_sim_job **out);

/*
 * Snapshot @p t (a sim tensor, or NULL) as the job's next tensor argument:
 * the geometry is copied and the storage address untagged, so the job no
 * longer depends on the handle. Returns the snapshot (NULL for NULL) through
 * *slot. DT_ERR_INVALID_ARG naming the entry when t lives on another device.
 */
dt_status dt__sim_job_tensor(dt_sim_job *j, const char *what, const dt_tensor *t, dt_tensor **slot);

/* Snapshot of a host tensor (copies read or write its memory later). */
dt_status dt__sim_job_host_tensor(dt_sim_job *j, const dt_tensor *t, dt_tensor **slot);

/*
 * Queue @p j on the stream (takes ownership, also on failure). Returns the
 * stream's sticky error if one is set (the job is then dropped), else DT_OK.
 */
dt_status dt__sim_submit(dt_sim_job *j);

/*
 * A job for entry @p name with tensor arguments @p args[0..n) snapshotted
 * into j->a (each a sim tensor or NULL). On failure nothing is left to free.
 */
dt_status dt__sim_job_with(const char *name, dt_sim_run_fn run, const dt_tensor *const *args, int n,
                           dt_sim_job **out);

/* Wait for every queued job; returns the sticky error, if any, and clears it
 * (an asynchronous error is reported once, to the one who waited). */
dt_status dt__sim_synchronize(void);

/* Jobs queued since the process started (tests check work went to the stream). */
uint64_t dt__sim_jobs_submitted(void);

/* The allocator (core/alloc.h) and the kernel table (kernels/kernel_ops.h). */
struct dt_allocator_ops;
extern const struct dt_allocator_ops dt__sim_allocator;

/* The fill entry (kernel_ops.fill, and the allocator's for core's dt_tensor_fill). */
dt_status dt__sim_fill(dt_tensor *out, double value);
/* The copy entry (kernel_ops.copy): any pair of cpu/sim tensors of one shape. */
dt_status dt__sim_copy(dt_tensor *dst, const dt_tensor *src);
/* Asynchronous copy entry (kernel_ops.copy_async): returns once queued. */
dt_status dt__sim_copy_async(dt_tensor *dst, const dt_tensor *src);

/* kernel_ops.copy_bytes: either side may be sim memory (blocking when one is host). */
dt_status dt__sim_copy_bytes(void *dst, const void *src, size_t n);
/* kernel_ops.owns: whether @p p carries the sim tag. */
bool dt__sim_owns(const void *p, int *index);

#endif
