/*
 * What the public collective files (comm.c, comm_alltoallw.c) share:
 * argument checks that name the bad value, the DT_ALGO lookup, and running
 * a schedule blocking or as a work.
 */
#ifndef DT_COMM_DISPATCH_H
#define DT_COMM_DISPATCH_H

#include "comm/comm_impl.h"
#include "comm/sched.h"

dt_status dt__comm_check_comm(const char *fn, const dt_comm *comm);
dt_status dt__comm_check_dtype(const char *fn, dt_dtype dtype);
/* The algorithm forced for @p coll ("allreduce") on @p comm, or NULL. */
const char *dt__comm_forced_algo(dt_comm *comm, const char *coll, char *buf, size_t cap);
dt_status dt__comm_unknown_algo(const char *coll, const char *algo);
void dt__comm_sched_for(dt__sched *s, const dt_comm *comm, dt_dtype dtype, dt_reduce_op op);
/* Start @p s (taking it) and, with @p work NULL, wait for it. */
dt_status dt__comm_run(dt_comm *comm, const char *what, dt__sched *s, dt_work **work);

/* Whether same-host copies (ops->peer_copy) reach every member of @p comm:
 * the same answer on every member. */
static inline bool dt__comm_can_peer_copy(const dt_comm *comm)
{
    return comm->size > 1 && comm->ops->peer_copy != NULL && comm->ops->peer_copy_ok(comm);
}

/* Whether point-to-point reaches every member of @p comm through shared memory. */
static inline bool dt__comm_p2p_shm(const dt_comm *comm)
{
    return comm->ops->p2p_shm != NULL && comm->ops->p2p_shm(comm);
}

#endif
