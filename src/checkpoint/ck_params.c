/*
 * Parameter lists and status agreement shared by the full and sharded
 * checkpoints (see ck_params.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/ck_index.h"
#include "checkpoint/ck_params.h"
#include "core/error.h"
#include "dtensor/data_parallel.h"

static dt_status ck_collect_one(const char *fqn, dt_module *owner, const char *name,
                                dt_tensor *param, void *user)
{
    dt_ck_params *l = user;
    if (l->n == l->cap) {
        int cap = l->cap == 0 ? 64 : 2 * l->cap;
        dt_ck_param *p = realloc(l->p, sizeof(*p) * (size_t)cap);
        if (p == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "checkpoint: %d parameters", cap);
        l->p = p;
        l->cap = cap;
    }
    l->p[l->n].fqn = strdup(fqn);
    l->p[l->n].t = param;
    l->p[l->n].owned = false;
    if (l->p[l->n].fqn == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "checkpoint: FQN %s", fqn);
    l->n++;
    return DT_OK;
}

dt_status dt__ck_params_collect(const char *fn, dt_module *root, dt_ck_params *l)
{
    DT_CHECK(dt_module_foreach_param(root, ck_collect_one, l));
    if (l->n == 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: the module has no parameters", fn);
    const char *first = NULL;
    for (int i = 0; i < l->n; i++) {
        dt_mesh *pm = dt_tensor_mesh(l->p[i].t);
        if (pm == NULL)
            continue;
        if (l->mesh == NULL) {
            l->mesh = pm;
            first = l->p[i].fqn;
        } else if (!dt_mesh_equal(l->mesh, pm)) {
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "%s: parameters '%s' and '%s' are on different meshes", fn, first,
                          l->p[i].fqn);
        }
    }
    if (l->mesh != NULL && dt_mesh_dim_comm(l->mesh, 0) == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: parameter '%s' is on a virtual mesh (no comms)", fn,
                      first);
    return DT_OK;
}

void dt__ck_params_free(dt_ck_params *l)
{
    for (int i = 0; i < l->n; i++) {
        free(l->p[i].fqn);
        if (l->p[i].owned)
            dt_tensor_release(l->p[i].t);
    }
    free(l->p);
    l->p = NULL;
    l->n = l->cap = 0;
}

/* Collective over @p mesh: every rank gets the reduction of @p v. */
static dt_status ck_allreduce(dt_mesh *mesh, void *v, size_t n, dt_dtype dt, dt_reduce_op op)
{
    for (int d = 0; d < dt_mesh_ndim(mesh); d++)
        DT_CHECK(dt_comm_allreduce(dt_mesh_dim_comm(mesh, d), v, v, n, dt, op, NULL));
    return DT_OK;
}

dt_status dt__ck_agree_max(dt_mesh *mesh, int64_t *v)
{
    return ck_allreduce(mesh, v, 1, DT_DTYPE_I64, DT_REDUCE_OP_MAX);
}

/* What the failing rank tells the others: its status and message. */
#define CK_REPORT_WORDS 130
typedef union ck_report {
    int32_t w[CK_REPORT_WORDS];
    struct {
        int32_t status, pad;
        char msg[(CK_REPORT_WORDS - 2) * 4];
    } r;
} ck_report;

/*
 * Collective over @p mesh: the lowest world rank that failed (-1: none) and,
 * when one did, its status and message in @p rep. Costs one 4-byte
 * all-reduce per mesh dim when all went well.
 */
static dt_status ck_first_failure(dt_mesh *mesh, dt_status mine, int32_t *who, ck_report *rep)
{
    int32_t me = dt_mesh_world_rank(mesh, dt_mesh_rank(mesh));
    *who = mine != DT_OK ? me : INT32_MAX;
    DT_CHECK(ck_allreduce(mesh, who, 1, DT_DTYPE_I32, DT_REDUCE_OP_MIN));
    if (*who == INT32_MAX) {
        *who = -1;
        return DT_OK;
    }
    memset(rep, 0, sizeof(*rep));
    if (*who == me) { /* only it contributes: the sum is its report */
        rep->r.status = (int32_t)mine;
        snprintf(rep->r.msg, sizeof(rep->r.msg), "%s", dt__error_text(dt_last_error()));
    }
    return ck_allreduce(mesh, rep->w, CK_REPORT_WORDS, DT_DTYPE_I32, DT_REDUCE_OP_SUM);
}

dt_status dt__ck_agree_step(const char *fn, dt_mesh *mesh, dt_status mine, const char *what)
{
    if (mesh == NULL)
        return mine;
    char saved[1024] = "";
    snprintf(saved, sizeof(saved), "%s", dt_last_error());
    int32_t who = -1;
    ck_report rep;
    dt_status st = ck_first_failure(mesh, mine, &who, &rep);
    if (st != DT_OK && mine == DT_OK)
        return st;
    if (mine != DT_OK) { /* its own error stands, as it was before the agreement */
        if (strcmp(saved, dt_last_error()) != 0)
            DT_ERR(mine, "%s", dt__error_text(saved));
        return mine;
    }
    if (who < 0)
        return DT_OK;
    rep.r.msg[sizeof(rep.r.msg) - 1] = '\0';
    return DT_ERR((dt_status)rep.r.status, "%s: %s failed on world rank %d: %s", fn, what, who,
                  rep.r.msg);
}

dt_status dt__ck_check_not_partial(const char *fn, const dt_ck_param *p)
{
    const dt_spec *s = dt_tensor_spec(p->t);
    if (s == NULL)
        return DT_OK;
    const dt_placement *pl = dt_spec_placements(s);
    for (int k = 0; k < dt_mesh_ndim(dt_spec_mesh(s)); k++)
        if (pl[k].kind == DT_PLACEMENT_PARTIAL)
            return DT_ERR(DT_ERR_UNSUPPORTED,
                          "%s: parameter '%s' is Partial on mesh dim %d; "
                          "checkpoints hold Shard or Replicate parameters",
                          fn, p->fqn, k);
    return DT_OK;
}

bool dt__ck_shard_stored(const dt_spec *s, const int *coord)
{
    const dt_placement *pl = dt_spec_placements(s);
    for (int k = 0; k < dt_mesh_ndim(dt_spec_mesh(s)); k++)
        if (pl[k].kind != DT_PLACEMENT_SHARD && coord[k] != 0)
            return false;
    return true;
}

/* The module parameter called @p fqn among the first @p n of @p l, or NULL. */
static dt_tensor *ck_param_named(const dt_ck_params *l, int n, const char *fqn)
{
    for (int i = 0; i < n; i++)
        if (strcmp(l->p[i].fqn, fqn) == 0)
            return l->p[i].t;
    return NULL;
}

dt_status dt__ck_params_add_optim(const char *fn, dt_ck_params *l, dt_optim *o)
{
    int n_model = l->n;
    for (int i = 0; i < dt_optim_num_params(o); i++) {
        const char *fqn = dt_optim_param_fqn(o, i);
        if (ck_param_named(l, n_model, fqn) != dt_optim_param_tensor(o, i))
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "%s: the %s optimizer's parameter '%s' is not the "
                          "module's (create the optimizer over this module, after parallelizing)",
                          fn, dt_optim_name(o), fqn);
    }
    DT_CHECK(dt_optim_state_init(o));
    for (int i = 0; i < dt_optim_num_params(o); i++) {
        for (int s = 0; s < dt_optim_num_states(o); s++) {
            const char *sn = dt_optim_state_name(o, s), *fqn = dt_optim_param_fqn(o, i);
            dt_tensor *placed = NULL;
            DT_CHECK(dt_optim_state_placed(o, i, sn, &placed));
            size_t len = strlen(DT_CK_OPTIM_PREFIX) + strlen(fqn) + strlen(sn) + 2;
            char *name = malloc(len);
            dt_status st =
                name != NULL ? DT_OK : DT_ERR(DT_ERR_NO_MEMORY, "%s: state of %s", fn, fqn);
            if (st == DT_OK) {
                snprintf(name, len, "%s%s.%s", DT_CK_OPTIM_PREFIX, fqn, sn);
                st = ck_collect_one(name, NULL, NULL, placed, l);
            }
            free(name);
            if (st != DT_OK) {
                dt_tensor_release(placed);
                return st;
            }
            l->p[l->n - 1].owned = true;
        }
    }
    return DT_OK;
}

dt_status dt__ck_boxes(const dt_tensor *t, const int *coord, dt_box *boxes, int *n)
{
    return dt_spec_local_boxes(dt_tensor_spec(t), coord, boxes, DT_PLACEMENT_MAX_SPLIT, n);
}

dt_status dt__ck_box_view(dt_tensor *local, const dt_box *b, dt_tensor **out)
{
    dt_tensor *cur = dt_tensor_retain(local), *next = NULL;
    for (int d = 0; d < dt_tensor_ndim(local); d++) {
        if (b->local_offset[d] == 0 && b->shape[d] == dt_tensor_dim(local, d))
            continue;
        dt_status st = dt_tensor_narrow(cur, d, b->local_offset[d], b->shape[d], &next);
        dt_tensor_release(cur);
        DT_CHECK(st);
        cur = next;
    }
    *out = cur;
    return DT_OK;
}

void dt__ck_box_key(const char *fqn, int j, char *buf, size_t len)
{
    if (j == 0)
        snprintf(buf, len, "%s", fqn);
    else
        snprintf(buf, len, "%s#%d", fqn, j);
}
