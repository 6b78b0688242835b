/* What every optimizer shares: parameter capture, lazy state, step loop, zero_grad, queries. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "dtensor/autograd.h"
#include "dtensor/mesh.h"
#include "dtensor/placement.h"
#include "nn/module_impl.h"
#include "nn/optim_impl.h"

typedef struct collect_ctx {
    dt_optim *o;
    int cap;
} collect_ctx;

static dt_status collect_param(const char *fqn, dt_module *owner, const char *name,
                               dt_tensor *param, void *user)
{
    collect_ctx *c = user;
    dt_optim *o = c->o;
    if (dt__param_is_partial(param))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_optim_%s_create: parameter '%s' has a Partial placement (a parameter "
                      "holds its value, not a share of a sum)",
                      o->kind->name, fqn);
    if (dt__tensor_is_deferred(param))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_optim_%s_create: parameter '%s' is deferred (no storage yet): call "
                      "dt_module_materialize first",
                      o->kind->name, fqn);
    if (o->n_params == c->cap) {
        int cap = c->cap > 0 ? c->cap * 2 : 16;
        dt_optim_param *p = realloc(o->params, (size_t)cap * sizeof(*p));
        if (p == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "optimizer: no memory for %d parameters", cap);
        o->params = p;
        c->cap = cap;
    }
    dt_optim_param *p = &o->params[o->n_params];
    memset(p, 0, sizeof(*p));
    p->fqn = strdup(fqn);
    if (p->fqn == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "optimizer: no memory for FQN '%s'", fqn);
    p->param = dt_tensor_retain(param);
    o->n_params++;
    return DT_OK;
}

dt_status dt__optim_create(dt_module *root, const dt_optim_kind *kind, const dt_optim_hparams *h,
                           dt_optim **out)
{
    DT_ARG_NOT_NULL(root);
    DT_ARG_NOT_NULL(out);
    dt_optim *o = calloc(1, sizeof(*o));
    if (o == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_optim_%s_create: no memory", kind->name);
    o->kind = kind;
    o->h = *h;
    collect_ctx c = {.o = o, .cap = 0};
    dt_status status = dt_module_foreach_param(root, collect_param, &c);
    if (status != DT_OK) {
        dt_optim_destroy(o);
        return status;
    }
    *out = o;
    return DT_OK;
}

void dt_optim_destroy(dt_optim *o)
{
    if (o == NULL)
        return;
    for (int i = 0; i < o->n_params; i++) {
        free(o->params[i].fqn);
        dt_tensor_release(o->params[i].param);
        for (int s = 0; s < DT_OPTIM_MAX_STATES; s++)
            dt_tensor_release(o->params[i].state[s]);
    }
    free(o->params);
    free(o);
}

/* Zero state tensors shaped like @p local, tagged DT_MEM_OPTIMIZER. */
static dt_status alloc_state(const dt_optim *o, dt_optim_param *p, dt_tensor *local)
{
    dt_mem_category prev = dt_memory_set_default_category(DT_MEM_OPTIMIZER);
    dt_status status = DT_OK;
    for (int s = 0; s < o->kind->n_states && status == DT_OK; s++)
        status =
            dt_tensor_zeros(local->ndim, local->shape, local->dtype, local->device, &p->state[s]);
    dt_memory_set_default_category(prev);
    return status;
}

/* Check that the local data and gradient can go to a fused update. */
static dt_status check_pair(const dt_optim *o, const dt_optim_param *p, const dt_tensor *local,
                            const dt_tensor *g)
{
    if (local->dtype != DT_DTYPE_F32 || g->dtype != DT_DTYPE_F32)
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "dt_optim_step (%s): '%s' is %s with a %s gradient (f32 only)", o->kind->name,
                      p->fqn, dt_dtype_name(local->dtype), dt_dtype_name(g->dtype));
    if (!dt_tensor_is_contiguous(local) || !dt_tensor_is_contiguous(g))
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "dt_optim_step (%s): '%s' or its gradient is not contiguous", o->kind->name,
                      p->fqn);
    if (dt_tensor_numel(local) != dt_tensor_numel(g))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_optim_step (%s): '%s' has %" PRId64
                      " local elements, its gradient %" PRId64,
                      o->kind->name, p->fqn, dt_tensor_numel(local), dt_tensor_numel(g));
    return DT_OK;
}

dt_status dt_optim_step(dt_optim *o)
{
    DT_ARG_NOT_NULL(o);
    int64_t step = o->steps + 1;
    bool need_state = o->kind->needs_state == NULL || o->kind->needs_state(&o->h);
    for (int i = 0; i < o->n_params; i++) {
        dt_optim_param *p = &o->params[i];
        /* a distributed parameter's gradient is its local shard's (autograd.h) */
        dt_tensor *grad = dt_tensor_grad(p->param);
        if (grad == NULL)
            continue;
        dt_tensor *local = dt__local_of(p->param), *g = dt__local_of(grad);
        DT_CHECK(check_pair(o, p, local, g));
        if (need_state && p->state[0] == NULL)
            DT_CHECK(alloc_state(o, p, local));
        DT_CHECK(o->kind->update(&o->h, step, local, g, p->state));
    }
    o->steps = step;
    dt__memory_step_end(); /* the allocators give back what this step did not reuse */
    return DT_OK;
}

void dt_optim_zero_grad(dt_optim *o)
{
    if (o == NULL)
        return;
    for (int i = 0; i < o->n_params; i++)
        (void)dt_tensor_set_grad(o->params[i].param, NULL);
}

double dt_optim_lr(const dt_optim *o)
{
    return o != NULL ? o->h.lr : 0.0;
}

void dt_optim_set_lr(dt_optim *o, double lr)
{
    if (o != NULL)
        o->h.lr = lr;
}

int64_t dt_optim_step_count(const dt_optim *o)
{
    return o != NULL ? o->steps : 0;
}
const char *dt_optim_name(const dt_optim *o)
{
    return o != NULL ? o->kind->name : "(null)";
}
int dt_optim_num_params(const dt_optim *o)
{
    return o != NULL ? o->n_params : 0;
}

const char *dt_optim_param_fqn(const dt_optim *o, int i)
{
    return (o != NULL && i >= 0 && i < o->n_params) ? o->params[i].fqn : NULL;
}

dt_tensor *dt_optim_param_tensor(const dt_optim *o, int i)
{
    return (o != NULL && i >= 0 && i < o->n_params) ? o->params[i].param : NULL;
}

dt_tensor *dt_optim_param_state(const dt_optim *o, int i, const char *name)
{
    if (o == NULL || name == NULL || i < 0 || i >= o->n_params)
        return NULL;
    for (int s = 0; s < o->kind->n_states; s++)
        if (strcmp(o->kind->state_names[s], name) == 0)
            return o->params[i].state[s];
    return NULL;
}
