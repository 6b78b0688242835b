/* dt_optim_state_placed: an optimizer state with its parameter's placements. */
#include "core/error.h"
#include "dtensor/nn.h"
#include "dtensor/placement.h"

dt_status dt_optim_state_placed(const dt_optim *o, int i, const char *name, dt_tensor **out)
{
    DT_ARG_NOT_NULL(o);
    DT_ARG_NOT_NULL(name);
    DT_ARG_NOT_NULL(out);
    dt_tensor *p = dt_optim_param_tensor(o, i), *st = dt_optim_param_state(o, i, name);
    if (p == NULL || st == NULL)
        return DT_ERR(DT_ERR_NOT_FOUND,
                      "dt_optim_state_placed: %s has no state '%s' for parameter %d (of %d; "
                      "states exist from the first step)",
                      dt_optim_name(o), name, i, dt_optim_num_params(o));
    const dt_spec *sp = dt_tensor_spec(p);
    if (sp == NULL) {
        *out = dt_tensor_retain(st);
        return DT_OK;
    }
    dt_mesh *m = dt_spec_mesh(sp);
    return dt_from_local(st, m, dt_mesh_ndim(m), dt_spec_placements(sp), dt_spec_shape(sp), out);
}
