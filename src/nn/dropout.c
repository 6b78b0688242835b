/*
 * Dropout (torch.nn.functional.dropout / nn.Dropout): each element kept with
 * probability 1 - p and scaled by 1 / (1 - p). The mask is drawn from the
 * forward random stream (rng.c) by global index, so a shard's mask is the
 * slice of the full tensor's and activation checkpointing, which replays the
 * stream, recomputes the same mask.
 */
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "dtensor/autograd.h"
#include "dtensor/memory.h"
#include "dtensor/ops.h"
#include "dtensor/placement.h"
#include "nn/module_impl.h"

/* The local mask of @p x (0 or 1 / (1 - p), f32, on the host): drawn as the
 * slice at @p off of a uniform tensor of @p gshape (NULL: x's own). */
static dt_status host_mask(const dt_tensor *x, double p, uint64_t seed, const int64_t *gshape,
                           const int64_t *off, dt_tensor **out)
{
    DT_CHECK(
        dt_tensor_empty(dt_tensor_ndim(x), dt_tensor_shape(x), DT_DTYPE_F32, dt_device_cpu(), out));
    dt_status s = dt_tensor_fill_uniform(*out, 0.0, 1.0, seed, gshape, off);
    if (s != DT_OK) {
        dt_tensor_release(*out);
        *out = NULL;
        return s;
    }
    float *m = dt_tensor_data(*out), keep = (float)(1.0 / (1.0 - p));
    for (int64_t i = 0; i < dt_tensor_numel(*out); i++)
        m[i] = (double)m[i] >= p ? keep : 0.0f;
    return DT_OK;
}

/* The mask as @p x is laid out: its device, and its spec when distributed. */
static dt_status mask_like(dt_tensor *x, double p, uint64_t seed, dt_tensor **out)
{
    const dt_spec *spec = dt_tensor_spec(x);
    dt_tensor *loc = spec != NULL ? dt_to_local(x) : x, *h = NULL, *d = NULL;
    int64_t off[DT_MAX_DIMS] = {0};
    if (spec != NULL) {
        const dt_placement *pl = dt_spec_placements(spec);
        for (int i = 0; i < dt_mesh_ndim(dt_spec_mesh(spec)); i++)
            if (pl[i].kind == DT_PLACEMENT_PARTIAL)
                return DT_ERR(DT_ERR_INVALID_ARG,
                              "dt_nn_dropout: x is Partial on mesh dim %d (a share of a sum: "
                              "reduce it first)",
                              i);
        DT_CHECK(dt_spec_local_shape(spec, NULL, NULL, off));
    }
    DT_CHECK(host_mask(loc, p, seed, spec != NULL ? dt_spec_shape(spec) : NULL,
                       spec != NULL ? off : NULL, &h));
    dt_status s = dt_tensor_to_device(h, dt_tensor_device(loc), &d);
    dt_tensor_release(h);
    DT_CHECK(s);
    if (spec == NULL) {
        *out = d;
        return DT_OK;
    }
    dt_mesh *mesh = dt_spec_mesh(spec);
    s = dt_from_local(d, mesh, dt_mesh_ndim(mesh), dt_spec_placements(spec), dt_spec_shape(spec),
                      out);
    dt_tensor_release(d);
    return s;
}

dt_status dt_nn_dropout(dt_tensor *x, double p, dt_tensor **out)
{
    DT_ARG_NOT_NULL(x);
    DT_ARG_NOT_NULL(out);
    if (!(p >= 0.0 && p < 1.0))
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_nn_dropout: p = %g is outside [0, 1)", p);
    if (dt_tensor_dtype(x) != DT_DTYPE_F32)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_nn_dropout: x is %s, not f32",
                      dt_dtype_name(dt_tensor_dtype(x)));
    if (p == 0.0) { /* the identity, as torch returns the input */
        *out = dt_tensor_retain(x);
        return DT_OK;
    }
    uint64_t seed = dt_rng_next_seed(); /* one draw per call, even when it fails below */
    dt_tensor *mask = NULL;
    dt_mem_category prev = dt_memory_set_default_category(DT_MEM_ACTIVATION);
    dt_status s = mask_like(x, p, seed, &mask);
    dt_memory_set_default_category(prev);
    DT_CHECK(s);
    s = dt_mul(x, mask, out);
    dt_tensor_release(mask);
    return s;
}

/* ---------------------------------------------------------------- the module */

static dt_status dropout_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    DT_CHECK(dt__module_check_inputs(m, n_in, in, 1));
    return dt_nn_dropout(in[0], *(const double *)m->impl, out);
}

static const dt_module_ops dropout_ops = {
    .type_name = "Dropout", .forward = dropout_forward, .destroy_impl = free};

dt_status dt_dropout_create(double p, dt_module **out)
{
    DT_ARG_NOT_NULL(out);
    if (!(p >= 0.0 && p < 1.0))
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_dropout_create: p = %g is outside [0, 1)", p);
    double *impl = malloc(sizeof(*impl));
    if (impl == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_dropout_create: no memory");
    *impl = p;
    return dt_module_create(&dropout_ops, impl, out); /* frees impl on failure */
}
