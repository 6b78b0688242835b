/*
 * Work handles (work.c): a collective in flight, generic (a schedule run
 * round by round on the backend's point-to-point) or native (the backend's
 * own progress).
 */
#ifndef DT_COMM_WORK_IMPL_H
#define DT_COMM_WORK_IMPL_H

#include "comm/comm_impl.h"
#include "comm/sched.h"

/* ------------------------------------------------------------ work */

struct dt_work {
    dt_comm *comm;
    const char *what; /* "dt_comm_allreduce", for messages */
    dt_status status; /* DT_IN_PROGRESS until finished */
    double timeout_s;
    uint32_t tag;
    dt__coll_desc desc; /* the call, for a mismatch message */
    /* generic schedule execution */
    dt__sched sched;
    size_t round;    /* current round */
    size_t posted;   /* rounds whose transfers are posted */
    void **reqs;     /* one per op (NULL = none or done) */
    size_t cap_reqs; /* request slots the block has room for */
    /* native work (NCCL): test returns DT_OK / DT_IN_PROGRESS / error */
    dt_status (*native_test)(dt_work *w);
    void (*native_free)(dt_work *w);
    void *native;
};

/* Take ownership of @p s (on success and failure) and start it as a work. */
dt_status dt__work_start(dt_comm *comm, const char *what, dt__sched *s, dt_work **out);
/* A work whose progress is the backend's own (optional natives). */
dt_status dt__work_native(dt_comm *comm, const char *what, dt_status (*test)(dt_work *),
                          void (*free_fn)(dt_work *), void *native, dt_work **out);
/* Free the comm's spare work block (before destroying the comm). */
void dt__work_drop_spare(dt_comm *comm);
/* Run @p s to completion (or finish the work) : the blocking path. */
dt_status dt__work_finish(dt_work *w, double timeout_s);
/* The timeout of collective @p what on @p c after @p timeout_s, waiting to
 * @p recv (else send) @p n bytes from comm rank @p rank (-1: unknown): names
 * the world rank, and a peer seen stopped as the cause. */
dt_status dt__comm_timeout_error(dt_comm *c, const char *what, int rank, bool recv, size_t n,
                                 double timeout_s);

#endif
