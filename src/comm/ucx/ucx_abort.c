/*
 * Abort notices over UCX and the rings (see ucx_impl.h): the families of
 * this worker by id, telling a family's other ranks that it was aborted, and
 * taking in what they tell us.
 *
 * Sending: one message of the notice to every other live member, through
 * the same path as any message to it (ring or UCX), with comm id
 * DT_UCX_NOTICE_ID and the family id as tag. The sender waits up to
 * DT_UCX_NOTICE_FLUSH_S for them to leave, so a rank that fails and then
 * exits still tells the others; a member that died is not waited for.
 */
#include "comm/ucx/ucx_impl.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"

#define DT_UCX_NOTICE_FLUSH_S 0.5

static dt_ucx_fam *find(dt_ucx_shared *sh, uint32_t id)
{
    for (int i = 0; i < sh->nfams; i++)
        if (sh->fams[i].f->id == id)
            return &sh->fams[i];
    return NULL;
}

/* The registry's entry for @p id, made if new (NULL: no memory). */
static dt_ucx_fam *entry(dt_ucx_shared *sh, uint32_t id)
{
    dt_ucx_fam *e = find(sh, id);
    if (e != NULL)
        return e;
    if (sh->nfams == sh->cap_fams) {
        int cap = sh->cap_fams ? 2 * sh->cap_fams : 4;
        dt_ucx_fam *l = realloc(sh->fams, (size_t)cap * sizeof(*l));
        if (l == NULL)
            return NULL;
        sh->fams = l;
        sh->cap_fams = cap;
    }
    dt__comm_family *f = dt__comm_family_new(id);
    if (f == NULL)
        return NULL;
    sh->fams[sh->nfams] = (dt_ucx_fam){f, NULL};
    return &sh->fams[sh->nfams++];
}

dt__comm_family *dt__ucx_family_open(dt_comm *c, uint32_t id)
{
    dt_ucx_comm *uc = c->impl;
    dt_ucx_fam *e = entry(uc->shared, id);
    if (e == NULL)
        return NULL;
    dt__comm_family *f = e->f;
    if (c->size < uc->shared->world_size && f->members == NULL) {
        f->members = malloc((size_t)c->size * sizeof(int));
        if (f->members != NULL) { /* else the whole world hears of it */
            memcpy(f->members, uc->members, (size_t)c->size * sizeof(int));
            f->nmembers = c->size;
        }
    }
    f->refs++;
    return f;
}

void dt__ucx_notice_arrived(dt_ucx_shared *sh, int from, const void *buf, size_t len)
{
    dt__abort_notice n;
    if (len < DT__ABORT_NOTICE_HDR || len > sizeof(n))
        return;
    memcpy(&n, buf, len);
    dt_ucx_fam *e = entry(sh, n.family);
    if (e != NULL)
        dt__comm_family_notice(e->f, &n, len, from);
}

/* ------------------------------------------------------------ sending */

/* Send @p len bytes of @p n to world rank @p wp as a notice; the request or NULL. */
static void *send_one(dt_ucx_shared *sh, const dt__abort_notice *n, size_t len, int wp)
{
    dt_ucx_comm uc = {.shared = sh, .id = DT_UCX_NOTICE_ID, .members = &wp};
    dt_comm fake = {.ops = &dt__ucx_ops, .impl = &uc, .rank = 0, .size = 1};
    void *req = NULL;
    if (dt__ucx_isend(&fake, n, len, 0, n->family, &req) != DT_OK)
        return NULL; /* a dead peer: nothing to tell */
    return req;
}

void dt__ucx_notify_abort(dt_comm *c, const dt__comm_family *f)
{
    dt_ucx_shared *sh = ((dt_ucx_comm *)c->impl)->shared;
    dt_ucx_fam *e = find(sh, f->id);
    if (e == NULL || e->sent != NULL || (e->sent = calloc(1, sizeof(*e->sent))) == NULL)
        return;
    dt__abort_notice *n = e->sent;
    size_t mlen = strlen(f->msg);
    *n = (dt__abort_notice){.family = f->id, .status = f->status, .origin = f->origin};
    n->len = (uint32_t)mlen;
    memcpy(n->msg, f->msg, mlen);
    size_t len = DT__ABORT_NOTICE_HDR + mlen;
    int count = f->nmembers > 0 ? f->nmembers : sh->world_size;
    void **reqs = calloc((size_t)count, sizeof(void *));
    if (reqs == NULL)
        return;
    for (int i = 0; i < count; i++) {
        int wp = f->nmembers > 0 ? f->members[i] : i;
        if (wp != sh->world_rank && !sh->peers[wp].dead)
            reqs[i] = send_one(sh, n, len, wp);
    }
    /* let them leave: the caller may exit right after its error */
    dt_ucx_comm uc = {.shared = sh, .id = DT_UCX_NOTICE_ID};
    dt_comm fake = {.ops = &dt__ucx_ops, .impl = &uc, .rank = 0, .size = 1};
    double deadline = dt__clock_now() + DT_UCX_NOTICE_FLUSH_S;
    for (int left = count; left > 0;) {
        left = 0;
        for (int i = 0; i < count; i++) {
            if (reqs[i] == NULL)
                continue;
            if (dt__ucx_req_test(&fake, reqs[i]) != DT_IN_PROGRESS)
                reqs[i] = NULL;
            else if (dt__clock_now() > deadline)
                dt__ucx_req_cancel(&fake, reqs[i]), reqs[i] = NULL;
            else
                left++;
        }
        if (left > 0)
            (void)dt__ucx_progress(&fake, 0);
    }
    free(reqs);
}

/* ------------------------------------------------------------ receiving (UCX) */

static void notice_cb(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                      void *user_data)
{
    dt_ucx_shared *sh = user_data;
    ucp_request_free(request);
    sh->notice_req = NULL;
    if (status == UCS_ERR_CANCELED)
        return; /* teardown */
    /* anything else (a truncated message) is dropped, and the receive posted again */
    sh->notice_len = status == UCS_OK ? info->length : 0;
    sh->notice_from =
        status == UCS_OK ? (int)(info->sender_tag & ((1u << DT_UCX_RANK_BITS) - 1u)) : -1;
    sh->notice_arrived = true;
}

dt_status dt__ucx_notice_post(dt_ucx_shared *sh)
{
    if (sh->notice == NULL && (sh->notice = malloc(sizeof(*sh->notice))) == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "ucx: no memory for abort notices");
    ucp_request_param_t prm = {
        .op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
        .cb.recv = notice_cb,
        .user_data = sh,
    };
    const uint64_t id_mask = (uint64_t)0xffff << 48;
    ucs_status_ptr_t sp = ucp_tag_recv_nbx(sh->worker, sh->notice, sizeof(*sh->notice),
                                           (uint64_t)DT_UCX_NOTICE_ID << 48, id_mask, &prm);
    if (UCS_PTR_IS_ERR(sp))
        return DT_ERR(DT_ERR_BACKEND, "ucx: posting the abort notice receive failed: %s",
                      ucs_status_string(UCS_PTR_STATUS(sp)));
    sh->notice_req = sp;
    return DT_OK;
}

void dt__ucx_notice_take(dt_ucx_shared *sh)
{
    sh->notice_arrived = false;
    dt__ucx_notice_arrived(sh, sh->notice_from, sh->notice, sh->notice_len);
    if (dt__ucx_notice_post(sh) != DT_OK) /* later notices then go unheard */
        DT_LOG_WARN("comm", "%s", dt_last_error());
}

void dt__ucx_notice_close(dt_ucx_shared *sh)
{
    if (sh->notice_req != NULL) {
        ucp_request_cancel(sh->worker, sh->notice_req);
        for (int i = 0; i < 1000 && sh->notice_req != NULL; i++)
            ucp_worker_progress(sh->worker); /* the callback frees it */
    }
    for (int i = 0; i < sh->nfams; i++) {
        dt__comm_family_release(sh->fams[i].f);
        free(sh->fams[i].sent);
    }
    free(sh->fams);
    free(sh->notice);
    sh->fams = NULL;
    sh->nfams = 0;
}
