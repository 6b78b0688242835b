/*
 * Parameter initialisation that depends only on (seed, FQN, element index):
 * each parameter gets its own seed derived from the run seed and its FQN, and
 * dt_tensor_fill_normal's counter-based RNG draws element i from (that seed, i).
 */
#include <string.h>

#include "core/error.h"
#include "core/tensor_impl.h"
#include "dtensor/autograd.h"
#include "dtensor/mesh.h"
#include "dtensor/placement.h"
#include "nn/module_impl.h"

static uint64_t fnv1a64(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        h ^= *p;
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t splitmix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t dt_param_seed(uint64_t seed, const char *fqn)
{
    return splitmix64(seed ^ fnv1a64(fqn != NULL ? fqn : ""));
}

dt_status dt_param_init(dt_tensor *param, const char *fqn, uint64_t seed, double std, double value)
{
    DT_ARG_NOT_NULL(param);
    DT_ARG_NOT_NULL(fqn);
    if (std < 0.0)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_param_init: '%s': negative std %g", fqn, std);
    dt_tensor *target = param;
    const int64_t *global_shape = NULL;
    int64_t offset[DT_MAX_DIMS] = {0};
    if (param->dist != NULL) {
        /* a shard: draw the elements of the full tensor at its global offset */
        const dt_spec *spec = dt_tensor_spec(param);
        const dt_placement *pl = dt_spec_placements(spec);
        for (int d = 0; d < dt_mesh_ndim(dt_spec_mesh(spec)); d++)
            if (pl[d].kind == DT_PLACEMENT_PARTIAL)
                return DT_ERR(DT_ERR_INVALID_ARG,
                              "dt_param_init: '%s' is Partial on mesh dim %d (a parameter "
                              "holds its value, not a share of a sum)",
                              fqn, d);
        DT_CHECK(dt_spec_local_shape(spec, NULL, NULL, offset));
        global_shape = dt_spec_shape(spec);
        target = dt_to_local(param);
    }
    /* Writing a leaf's data in place is not an op: keep it off the tape. */
    bool prev = dt_grad_set_enabled(false);
    dt_status status = std > 0.0 ? dt_tensor_fill_normal(target, 0.0, std, dt_param_seed(seed, fqn),
                                                         global_shape, global_shape ? offset : NULL)
                                 : dt_tensor_fill(target, value);
    dt_grad_set_enabled(prev);
    return status;
}
