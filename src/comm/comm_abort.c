/*
 * Comm families and their abort (as ncclCommAbort + the async error query):
 * the first failure any rank sees on a comm of a family is recorded with the
 * world rank that saw it and its message, sent to the family's other ranks
 * by the backend (an abort notice), and from then on every operation on any
 * comm of the family, on every rank, fails at once with that error. A rank
 * waiting in a collective wakes up on the notice instead of waiting for its
 * timeout, and a failed non-blocking work that nobody waited for still stops
 * the next call.
 */
#include "comm/comm_impl.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"

dt__comm_family *dt__comm_family_new(uint32_t id)
{
    dt__comm_family *f = calloc(1, sizeof(*f));
    if (f != NULL) {
        f->refs = 1;
        f->id = id;
        f->origin = -1;
    }
    return f;
}

void dt__comm_family_release(dt__comm_family *f)
{
    if (f == NULL || --f->refs > 0)
        return;
    free(f->members);
    free(f);
}

/* A family of @p c's transport with id @p id (a private one without a registry). */
static dt__comm_family *open_family(dt_comm *c, uint32_t id)
{
    if (c->ops->family_open != NULL)
        return c->ops->family_open(c, id);
    return dt__comm_family_new(id);
}

dt__comm_family *dt__comm_family_of(dt_comm *c)
{
    if (c->family == NULL)
        c->family = open_family(c, c->ops->comm_id != NULL ? c->ops->comm_id(c) : 0);
    return c->family; /* NULL only without memory: then nothing is recorded */
}

void dt__comm_isolate(dt_comm *c)
{
    dt__comm_family *f = open_family(c, c->ops->comm_id != NULL ? c->ops->comm_id(c) : 0);
    if (f == NULL)
        return;
    dt__comm_family_release(c->family);
    c->family = f;
}

dt_status dt__comm_aborted(const char *fn, const dt_comm *c)
{
    const dt__comm_family *f = c->family;
    int me = dt__comm_world_rank(c, c->rank);
    return DT_ERR(f->status, "%s: the communicator was aborted after world rank %d%s failed: %s",
                  fn, f->origin, f->origin == me ? " (this rank)" : "", f->msg);
}

/* Record the abort in @p f (the first one only), without the "rank N: "
 * prefix of a last error (the messages name the world rank themselves). */
static void record(dt__comm_family *f, dt_status st, int origin, const char *msg, size_t len)
{
    f->status = st;
    f->origin = origin;
    size_t k = 5;
    if (len > 5 && strncmp(msg, "rank ", 5) == 0) {
        while (k < len && msg[k] >= '0' && msg[k] <= '9')
            k++;
        if (k + 1 < len && k > 5 && msg[k] == ':' && msg[k + 1] == ' ')
            msg += k + 2, len -= k + 2;
    }
    if (len >= sizeof(f->msg))
        len = sizeof(f->msg) - 1;
    memcpy(f->msg, msg, len);
    f->msg[len] = '\0';
}

dt_status dt__comm_fail(dt_comm *c, const char *what, dt_status st)
{
    dt__comm_family *f = dt__comm_family_of(c);
    if (f == NULL)
        return st;
    if (f->status != DT_OK) /* a consequence of the first failure, or after it */
        return dt__comm_aborted(what, c);
    if (st == DT_OK || st == DT_IN_PROGRESS) /* never: a failure is an error */
        st = DT_ERR(DT_ERR_INTERNAL, "%s: failed without an error", what);
    const char *msg = dt_last_error();
    record(f, st, dt__comm_world_rank(c, c->rank), msg, strlen(msg));
    DT_LOG_DEBUG("comm", "comm family %u aborted here: %s", f->id, f->msg);
    if (c->ops->notify_abort != NULL) {
        c->ops->notify_abort(c, f);
        DT_ERR(st, "%s", f->msg); /* telling the others may have recorded other errors */
    }
    return st;
}

void dt__comm_family_notice(dt__comm_family *f, const dt__abort_notice *n, size_t len, int from)
{
    if (f->status != DT_OK || len < DT__ABORT_NOTICE_HDR || n->status >= 0)
        return; /* aborted already (the first error stays), or not a notice */
    size_t mlen = len - DT__ABORT_NOTICE_HDR;
    if (mlen > n->len)
        mlen = n->len;
    record(f, (dt_status)n->status, n->origin >= 0 ? n->origin : from, n->msg, mlen);
    DT_LOG_INFO("comm", "comm family %u aborted by world rank %d: %s", f->id, f->origin, f->msg);
}

/* ------------------------------------------------------------ public */

dt_status dt_comm_status(dt_comm *comm)
{
    if (comm == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_comm_status: argument 'comm' is NULL");
    (void)comm->ops->progress(comm, 0); /* take in notices that arrived */
    return dt__comm_alive("dt_comm_status", comm);
}

dt_status dt_comm_abort(dt_comm *comm, dt_status status, const char *reason)
{
    if (comm == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_comm_abort: argument 'comm' is NULL");
    if (status >= 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_comm_abort: status %d is not an error", (int)status);
    DT_CHECK(dt__comm_alive("dt_comm_abort", comm));
    dt_status st = DT_ERR(status, "dt_comm_abort: %s", reason != NULL ? reason : "(no reason)");
    return dt__comm_fail(comm, "dt_comm_abort", st);
}
