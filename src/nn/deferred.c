/*
 * Deferred initialisation (PyTorch's meta device + to_empty + reset_parameters,
 * ColossalAI's shard-at-init): inside dt_nn_deferred_begin/end the built-in
 * layers make parameters that have a shape and no storage, each slot keeping
 * the rule that initialises it (init.c). Styles and data parallelism shard
 * such a model by shapes alone, and dt_module_materialize then allocates and
 * fills only each rank's local shards, by global index: the values are those
 * of a full initialisation followed by sharding.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/tensor_impl.h"
#include "dtensor/memory.h"
#include "nn/module_impl.h"

static _Thread_local int depth; /* nesting of dt_nn_deferred_begin on this thread */
static atomic_bool seen;        /* a deferred tensor was ever made: checks are worth it */

void dt_nn_deferred_begin(void)
{
    depth++;
}

void dt_nn_deferred_end(void)
{
    if (depth > 0)
        depth--;
}

bool dt_nn_deferred_active(void)
{
    return depth > 0;
}

bool dt__deferred_seen(void)
{
    return atomic_load_explicit(&seen, memory_order_relaxed);
}

dt_status dt__tensor_deferred(int ndim, const int64_t *shape, dt_dtype dtype, dt_device device,
                              dt_tensor **out)
{
    DT_CHECK(dt__tensor_alloc_handle(ndim, shape, dtype, device, out));
    atomic_store_explicit(&seen, true, memory_order_relaxed);
    return DT_OK;
}

bool dt__tensor_is_deferred(const dt_tensor *t)
{
    const dt_tensor *l = (t != NULL && t->dist != NULL) ? t->local : t;
    return l != NULL && l->dist == NULL && l->storage == NULL;
}

bool dt_param_is_deferred(const dt_tensor *param)
{
    return dt__tensor_is_deferred(param);
}

/* The first deferred slot under @p m (pre-order), or NULL. */
static const dt_module_slot *first_deferred(const dt_module *m, const dt_module **owner)
{
    for (int i = 0; i < m->n_params; i++)
        if (dt__tensor_is_deferred(m->params[i].tensor)) {
            *owner = m;
            return &m->params[i];
        }
    for (int i = 0; i < m->n_children; i++) {
        const dt_module_slot *s = first_deferred(m->children[i], owner);
        if (s != NULL)
            return s;
    }
    return NULL;
}

dt_status dt__module_check_materialized(const char *fn, dt_module *m)
{
    const dt_module *owner = NULL;
    const dt_module_slot *s = dt__deferred_seen() ? first_deferred(m, &owner) : NULL;
    if (s == NULL)
        return DT_OK;
    char fqn[256];
    if (dt_module_fqn(owner, fqn, sizeof(fqn)) != DT_OK)
        snprintf(fqn, sizeof(fqn), "%s", owner->name);
    return DT_ERR(DT_ERR_INVALID_ARG,
                  "%s: parameter '%s%s%s' is deferred (no storage yet): call "
                  "dt_module_materialize after parallelizing the model",
                  fn, fqn, fqn[0] != '\0' ? "." : "", s->name);
}

static int count_deferred(const dt_module *m)
{
    int n = 0;
    for (int i = 0; i < m->n_params; i++)
        n += dt__tensor_is_deferred(m->params[i].tensor);
    for (int i = 0; i < m->n_children; i++)
        n += count_deferred(m->children[i]);
    return n;
}

int dt_module_num_deferred(const dt_module *root)
{
    return root != NULL ? count_deferred(root) : 0;
}

/* Allocate the storage of deferred @p t's local tensor (contiguous, offset 0). */
static dt_status allocate(const char *fqn, dt_tensor *t)
{
    dt_tensor *l = t->dist != NULL ? t->local : t;
    size_t nbytes = (size_t)dt_tensor_numel(l) * dt_dtype_size(l->dtype);
    dt_mem_category prev = dt_memory_set_default_category(DT_MEM_PARAMETER);
    dt_status s = dt__storage_create(nbytes, l->device, &l->storage);
    dt_memory_set_default_category(prev);
    if (s != DT_OK) {
        char why[256];
        snprintf(why, sizeof(why), "%s", dt_last_error());
        return DT_ERR(s, "dt_module_materialize: '%s' (%zu bytes on this rank): %s", fqn, nbytes,
                      why);
    }
    return DT_OK;
}

static dt_status materialize_one(const char *fqn, dt_module *owner, const char *name, dt_tensor *t,
                                 void *user)
{
    (void)user;
    if (!dt__tensor_is_deferred(t))
        return DT_OK;
    const dt_module_slot *slot = NULL;
    for (int i = 0; i < owner->n_params && slot == NULL; i++)
        if (owner->params[i].tensor == t && strcmp(owner->params[i].name, name) == 0)
            slot = &owner->params[i];
    if (slot == NULL)
        return DT_ERR(DT_ERR_INTERNAL, "dt_module_materialize: lost the slot of '%s'", fqn);
    DT_CHECK(allocate(fqn, t));
    return dt__param_fill(t, fqn, &slot->init);
}

dt_status dt_module_materialize(dt_module *root)
{
    DT_ARG_NOT_NULL(root);
    return dt_module_foreach_param(root, materialize_one, NULL);
}
