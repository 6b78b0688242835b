/*
 * Optimizer state as a checkpoint sees it: the state names an optimizer keeps
 * with its hyper-parameters, allocating the (zero) state before the first
 * step, and restoring the step count. Zero state is exactly what the first
 * step would allocate, so initialising it early changes no update.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "nn/module_impl.h"
#include "nn/optim_impl.h"

static bool os_needs_state(const dt_optim *o)
{
    return o->kind->needs_state == NULL || o->kind->needs_state(&o->h);
}

int dt_optim_num_states(const dt_optim *o)
{
    return (o != NULL && os_needs_state(o)) ? o->kind->n_states : 0;
}

const char *dt_optim_state_name(const dt_optim *o, int s)
{
    return (o != NULL && s >= 0 && s < dt_optim_num_states(o)) ? o->kind->state_names[s] : NULL;
}

dt_status dt_optim_state_init(dt_optim *o)
{
    DT_ARG_NOT_NULL(o);
    if (!os_needs_state(o))
        return DT_OK;
    dt_mem_category prev = dt_memory_set_default_category(DT_MEM_OPTIMIZER);
    dt_status st = DT_OK;
    for (int i = 0; i < o->n_params && st == DT_OK; i++) {
        dt_optim_param *p = &o->params[i];
        if (p->state[0] != NULL)
            continue;
        const dt_tensor *local = dt__local_of(p->param);
        dt_tensor *fresh[DT_OPTIM_MAX_STATES] = {NULL};
        for (int s = 0; s < o->kind->n_states && st == DT_OK; s++)
            st = dt_tensor_zeros(local->ndim, local->shape, local->dtype, local->device, &fresh[s]);
        for (int s = 0; s < o->kind->n_states; s++) {
            if (st == DT_OK)
                p->state[s] = fresh[s];
            else
                dt_tensor_release(fresh[s]);
        }
    }
    dt_memory_set_default_category(prev);
    return st;
}

dt_status dt_optim_set_step_count(dt_optim *o, int64_t steps)
{
    DT_ARG_NOT_NULL(o);
    if (steps < 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_optim_set_step_count: %lld steps (must be >= 0)",
                      (long long)steps);
    o->steps = steps;
    return DT_OK;
}
