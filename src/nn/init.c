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

/* Fill local @p target by @p rule as the box at @p off of a tensor of
 * @p global_shape (both NULL: the whole tensor). */
static dt_status fill_box(dt_tensor *target, const int64_t *global_shape, const int64_t *off,
                          const dt__init_rule *rule)
{
    /* Writing a leaf's data in place is not an op: keep it off the tape. */
    bool prev = dt_grad_set_enabled(false);
    dt_status status;
    if (rule->kind == DT__INIT_NORMAL)
        status = dt_tensor_fill_normal(target, rule->a, rule->b, rule->seed, global_shape, off);
    else if (rule->kind == DT__INIT_UNIFORM)
        status = dt_tensor_fill_uniform(target, rule->a, rule->b, rule->seed, global_shape, off);
    else
        status = dt_tensor_fill(target, rule->a);
    dt_grad_set_enabled(prev);
    return status;
}

dt_status dt__param_fill(dt_tensor *p, const char *fqn, const dt__init_rule *rule)
{
    if (dt__tensor_is_deferred(p))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "'%s' is deferred (no storage yet): dt_module_materialize allocates and "
                      "initialises it",
                      fqn);
    if (p->dist == NULL)
        return fill_box(p, NULL, NULL, rule);
    /* a shard: draw the elements of the full tensor at its global offsets,
     * box by box (a split-factor shard is several) */
    const dt_spec *spec = dt_tensor_spec(p);
    const dt_placement *pl = dt_spec_placements(spec);
    for (int d = 0; d < dt_mesh_ndim(dt_spec_mesh(spec)); d++)
        if (pl[d].kind == DT_PLACEMENT_PARTIAL)
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "'%s' is Partial on mesh dim %d (a parameter holds its value, not "
                          "a share of a sum)",
                          fqn, d);
    dt_box boxes[DT_PLACEMENT_MAX_SPLIT];
    int n = 0;
    DT_CHECK(dt_spec_local_boxes(spec, NULL, boxes, DT_PLACEMENT_MAX_SPLIT, &n));
    for (int b = 0; b < n; b++) {
        dt_tensor *v = dt_tensor_retain(dt_to_local(p)), *next = NULL;
        for (int d = 0; d < dt_tensor_ndim(p) && n > 1; d++) {
            dt_status s =
                dt_tensor_narrow(v, d, boxes[b].local_offset[d], boxes[b].shape[d], &next);
            dt_tensor_release(v);
            DT_CHECK(s);
            v = next;
        }
        dt_status s = fill_box(v, dt_spec_shape(spec), boxes[b].offset, rule);
        dt_tensor_release(v);
        DT_CHECK(s);
    }
    return DT_OK;
}

/* The rule of dt_param_init's arguments. */
static dt__init_rule spec_rule(const char *fqn, uint64_t seed, double std, double value)
{
    if (std > 0.0)
        return (dt__init_rule){
            .kind = DT__INIT_NORMAL, .a = 0.0, .b = std, .seed = dt_param_seed(seed, fqn)};
    return (dt__init_rule){.kind = DT__INIT_CONST, .a = value};
}

dt_status dt_param_init(dt_tensor *param, const char *fqn, uint64_t seed, double std, double value)
{
    DT_ARG_NOT_NULL(param);
    DT_ARG_NOT_NULL(fqn);
    if (std < 0.0)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_param_init: '%s': negative std %g", fqn, std);
    dt__init_rule rule = spec_rule(fqn, seed, std, value);
    dt_status s = dt__param_fill(param, fqn, &rule);
    if (s != DT_OK && dt__tensor_is_deferred(param))
        return DT_ERR(s,
                      "dt_param_init: '%s' is deferred: use dt_module_param_init, which "
                      "records the rule for dt_module_materialize",
                      fqn);
    return s;
}

dt_status dt__param_init_slot(dt_module *m, const char *name, const char *fqn,
                              const dt__init_rule *rule)
{
    dt_module_slot *slot = NULL;
    for (int i = 0; i < m->n_params && slot == NULL; i++)
        if (strcmp(m->params[i].name, name) == 0)
            slot = &m->params[i];
    if (slot == NULL)
        return DT_ERR(DT_ERR_NOT_FOUND, "%s '%s' has no parameter '%s' (for '%s')",
                      m->ops->type_name, m->name, name, fqn);
    slot->init = *rule;
    if (dt__tensor_is_deferred(slot->tensor))
        return DT_OK; /* dt_module_materialize applies it */
    return dt__param_fill(slot->tensor, fqn, rule);
}

dt_status dt_module_param_init(dt_module *owner, const char *name, const char *fqn, uint64_t seed,
                               double std, double value)
{
    DT_ARG_NOT_NULL(owner);
    DT_ARG_NOT_NULL(name);
    DT_ARG_NOT_NULL(fqn);
    if (std < 0.0)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_module_param_init: '%s': negative std %g", fqn, std);
    dt__init_rule rule = spec_rule(fqn, seed, std, value);
    return dt__param_init_slot(owner, name, fqn, &rule);
}
