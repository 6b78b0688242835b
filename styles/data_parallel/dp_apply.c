/*
 * dt_fully_shard / dt_ddp_apply: check the model, compute every parameter's
 * dp shard (dp_shard.c) and register its gradient hook (dp_hooks.c), then
 * (nothing can fail any more) replace the slots and add the forward hooks.
 * Under ZeRO the forward hooks put into the slots, for one forward, the
 * gathered tensors the modules compute on (leaves: their gradients are what
 * is reduce-scattered), and the shards back afterwards; DDP's modules compute
 * on the parameters themselves.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "dtensor/ops.h"
#include "mesh/mesh_impl.h"
#include "nn/nn_internal.h"
#include "styles/data_parallel/dp_impl.h"

static const char *const stage_names[] = {"ddp", "zero1", "zero2", "zero3"};

const char *dt_dp_stage_name(dt_dp_stage stage)
{
    return ((int)stage >= 0 && (int)stage <= DT_DP_ZERO3) ? stage_names[stage] : "invalid";
}

dt_status dt_dp_stage_parse(const char *text, dt_dp_stage *out)
{
    DT_ARG_NOT_NULL(text);
    DT_ARG_NOT_NULL(out);
    for (int i = 0; i <= DT_DP_ZERO3; i++)
        if (strcmp(text, stage_names[i]) == 0) {
            *out = (dt_dp_stage)i;
            return DT_OK;
        }
    return DT_ERR(DT_ERR_INVALID_ARG,
                  "data parallel: unknown style '%s' (ddp, zero1, zero2 or zero3)", text);
}

/* ---------------------------------------------------------------- state */

static void param_free(dp_param *p)
{
    dt_work_release(p->gwork);
    dt_work_release(p->rwork);
    dt_tensor_release(p->recv);
    dt_tensor_release(p->send);
    dt_tensor_release(p->rsrc);
    dt_tensor_release(p->rdst);
    dt_tensor_release(p->acc);
    dt_tensor_release(p->prior);
    dt_tensor_release(p->compute);
    dt_tensor_release(p->gathered);
    dt_tensor_release(p->slot);
    dt_spec_release(p->tp_spec);
    free(p->name), free(p->fqn), free(p->klen), free(p->koff), free(p->counts), free(p->displs);
}

static void state_free(dp_state *s)
{
    if (s == NULL)
        return;
    for (int i = 0; i < s->n_buckets; i++) {
        dt_work_release(s->b[i].work);
        dt_tensor_release(s->b[i].buf);
    }
    dt__dp_hooks_remove(s); /* a parameter the user still holds keeps none of ours */
    for (int i = 0; i < s->n_params; i++)
        param_free(&s->p[i]);
    for (int i = 0; i < s->n_units; i++)
        free(s->u[i].idx);
    free(s->p), free(s->u), free(s->b), free(s->order);
    dt_mesh_release(s->mesh);
    free(s);
}

void dt__dp_state_unref(void *user)
{
    dp_state *s = user;
    if (s != NULL && --s->refs == 0)
        state_free(s);
}

/* Units: 0 is the root's (every parameter outside the unit modules). */
static dt_status make_units(dp_state *s, dt_module *root, const char *pattern)
{
    dt_module **mods = NULL;
    int n = 0;
    if (s->stage != DT_DP_DDP)
        DT_CHECK(dt__dp_find_units(root, pattern, &mods, &n));
    s->u = calloc((size_t)n + 1, sizeof(*s->u));
    s->order = calloc((size_t)n + 1, sizeof(int));
    if (s->u == NULL || s->order == NULL) {
        free(mods);
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_fully_shard: no memory for %d units", n + 1);
    }
    s->n_units = n + 1;
    for (int i = 0; i < n; i++)
        s->u[i + 1].m = mods[i];
    free(mods);
    for (int i = 0; i < s->n_params; i++) {
        dp_param *p = &s->p[i];
        p->unit = 0;
        for (dt_module *m = p->owner; m != NULL && p->unit == 0; m = dt_module_parent(m))
            for (int u = 1; u < s->n_units; u++)
                if (s->u[u].m == m)
                    p->unit = u;
    }
    for (int u = 0; u < s->n_units; u++) {
        s->u[u].idx = calloc((size_t)s->n_params + 1, sizeof(int));
        if (s->u[u].idx == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "dt_fully_shard: no memory for unit %d", u);
        for (int i = 0; i < s->n_params; i++)
            if (s->p[i].unit == u)
                s->u[u].idx[s->u[u].n++] = i;
    }
    return DT_OK;
}

/* DDP buckets: parameters in reverse order (the order backward produces
 * their gradients), a new bucket when the next would pass the capacity. */
static dt_status make_buckets(dp_state *s, size_t cap_bytes)
{
    s->b = calloc((size_t)s->n_params + 1, sizeof(*s->b));
    if (s->b == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_ddp_apply: no memory for buckets");
    int64_t cap = (int64_t)(cap_bytes / sizeof(float));
    for (int i = s->n_params - 1; i >= 0; i--) {
        dp_param *p = &s->p[i];
        int64_t n = dt_tensor_numel(dt__dp_local(p->slot));
        if (s->n_buckets == 0 ||
            (s->b[s->n_buckets - 1].numel + n > cap && s->b[s->n_buckets - 1].n_params > 0))
            s->n_buckets++;
        dp_bucket *b = &s->b[s->n_buckets - 1];
        p->bucket = s->n_buckets - 1;
        p->boff = b->numel;
        b->numel += n;
        b->n_params++;
    }
    return DT_OK;
}

/* ---------------------------------------------------------------- hooks */

/*
 * Put @p t in slot @p name of @p m for one forward. Not dt_module_param_set:
 * the gathered tensor must keep its own memory category and the slot its
 * marks (it is not a new parameter).
 */
static dt_status slot_write(dt_module *m, const char *name, dt_tensor *t)
{
    if (dt__module_slot_swap(m, name, t))
        return DT_OK;
    return DT_ERR(DT_ERR_NOT_FOUND, "data parallel: the model lost its parameter slot '%s'", name);
}

static dt_status unit_enter(dp_state *s, int u)
{
    dp_unit *un = &s->u[u];
    if (s->stage != DT_DP_DDP) /* ZeRO-1/2: posted at the root, overlapping earlier units */
        DT_CHECK(dt__dp_unit_gather_wait(s, u));
    if (s->stage == DT_DP_ZERO3) {
        if (!s->order_known && s->n_order < s->n_units)
            s->order[s->n_order++] = u;
        int pos = -1;
        for (int j = 0; s->order_known && j < s->n_order; j++)
            if (s->order[j] == u)
                pos = j;
        if (s->prefetch && pos >= 0 && pos + 1 < s->n_order)
            DT_CHECK(dt__dp_unit_gather_post(s, s->order[pos + 1]));
    }
    for (int j = 0; j < un->n; j++) {
        dp_param *p = &s->p[un->idx[j]];
        if (p->compute != NULL)
            DT_CHECK(slot_write(p->owner, p->name, p->compute));
    }
    return DT_OK;
}

static dt_status unit_exit(dp_state *s, int u, dt_tensor **out)
{
    dp_unit *un = &s->u[u];
    for (int j = 0; j < un->n; j++) {
        dp_param *p = &s->p[un->idx[j]];
        if (p->compute != NULL)
            DT_CHECK(slot_write(p->owner, p->name, p->slot));
    }
    if (s->stage != DT_DP_ZERO3)
        return DT_OK;
    dt__dp_unit_drop(s, u);
    return dt__dp_unit_output_hook(s, u, *out);
}

static dt_status root_pre(dt_module *m, int n_in, dt_tensor **in, void *user)
{
    (void)m, (void)n_in, (void)in;
    dp_state *s = user;
    dt__dp_backward_abort(s); /* a backward that began and failed */
    if (s->stage != DT_DP_DDP) {
        for (int i = 0; i < s->n_params; i++) /* the shards changed since the last gather */
            if (s->p[i].gwork == NULL)
                s->p[i].resident = false;
        for (int u = 0; s->stage != DT_DP_ZERO3 && u < s->n_units; u++)
            DT_CHECK(dt__dp_unit_gather_post(s, u)); /* all of them; each unit waits for its own */
    }
    if (!s->order_known)
        s->n_order = 0;
    return unit_enter(s, 0);
}

/* output_dtype: the model's output rounded (a new node; the forward's own is released). */
static dt_status cast_output(dp_state *s, dt_tensor **out)
{
    if (s->output_dtype == DT_DTYPE_F32 || *out == NULL || dt_tensor_dtype(*out) != DT_DTYPE_F32)
        return DT_OK;
    dt_tensor *r = NULL;
    DT_CHECK(dt_round_to_dtype(*out, s->output_dtype, &r));
    dt_tensor_release(*out);
    *out = r;
    return DT_OK;
}

static dt_status root_post(dt_module *m, dt_tensor **out, void *user)
{
    (void)m;
    dp_state *s = user;
    DT_CHECK(dt__dp_forward_end(s, *out)); /* its hook runs before unit 0's regather */
    DT_CHECK(unit_exit(s, 0, out));
    s->order_known = true;
    return cast_output(s, out);
}

static dt_status unit_pre(dt_module *m, int n_in, dt_tensor **in, void *user)
{
    (void)n_in, (void)in;
    dp_state *s = user;
    for (int u = 1; u < s->n_units; u++) {
        if (s->u[u].m != m)
            continue;
        /* its gathers would run again inside backward and put the gathered
         * leaves, not the recompute's, into the slots: the nested pass would
         * take their gradients and run their hooks */
        if (dt__module_recomputing() && dt_grad_is_enabled()) {
            char fqn[256];
            if (dt_module_fqn(m, fqn, sizeof(fqn)) != DT_OK)
                snprintf(fqn, sizeof(fqn), "%s", dt_module_name(m));
            return DT_ERR(DT_ERR_UNSUPPORTED,
                          "data parallel: unit '%s' runs inside the recompute of a "
                          "checkpointed module; checkpoint the unit itself or modules inside it",
                          fqn);
        }
        return unit_enter(s, u);
    }
    return DT_OK;
}

static dt_status unit_post(dt_module *m, dt_tensor **out, void *user)
{
    dp_state *s = user;
    for (int u = 1; u < s->n_units; u++)
        if (s->u[u].m == m)
            return unit_exit(s, u, out);
    return DT_OK;
}

static bool already_parallel(dt_module *root)
{
    return dt__module_find_pre_hook(root, root_pre, NULL);
}

dt_status dt_dp_set_gradient_sync(dt_module *root, bool sync)
{
    DT_ARG_NOT_NULL(root);
    void *user = NULL;
    if (!dt__module_find_pre_hook(root, root_pre, &user))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_dp_set_gradient_sync: module '%s' is not the root of a data-parallel "
                      "model (dt_fully_shard / dt_ddp_apply)",
                      dt_module_type_name(root));
    dp_state *s = user;
    if (s->armed)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_dp_set_gradient_sync: a backward pass is pending (a forward recorded "
                      "a graph whose backward has not ended); change it between iterations");
    s->sync = sync;
    return DT_OK;
}

/* ---------------------------------------------------------------- entry points */

/* @p local wrapped with the spec @p spec (NULL: @p local itself). Consumes @p local. */
static dt_status wrap_as(const dt_spec *spec, dt_tensor *local, dt_tensor **out)
{
    if (spec == NULL) {
        *out = local;
        return DT_OK;
    }
    dt_status st = dt_from_local(local, dt_spec_mesh(spec), dt_mesh_ndim(dt_spec_mesh(spec)),
                                 dt_spec_placements(spec), dt_spec_shape(spec), out);
    dt_tensor_release(local);
    return st;
}

/*
 * The leaf whose gradient is param @p p's (its hook waits on it) and, under
 * ZeRO, what the slot holds in a forward: the gathered tensor (made a leaf)
 * or, replicated over dp, the shard's local tensor, with the tp placements
 * (the slot's shard is on the whole mesh). DDP computes on the slot's tensor.
 */
static dt_status make_leaf(dp_state *s, dp_param *p)
{
    p->leaf = dt__dp_has_copy(s, p) ? p->gathered : dt__dp_local(p->slot);
    if (s->stage == DT_DP_DDP)
        return DT_OK;
    DT_CHECK(dt_tensor_set_requires_grad(p->leaf, true));
    return wrap_as(p->tp_spec, dt_tensor_retain(p->leaf), &p->compute);
}

static dt_status state_create(dt_module *root, dt_mesh *mesh, const char *dp_dim,
                              const dt_fsdp_params *prm, dp_state **out)
{
    dp_state *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_fully_shard: no memory");
    dt_status st = dt__mesh_dim_find("dt_fully_shard", mesh, dp_dim, &s->dp_dim);
    if (st != DT_OK)
        goto err_state;
    s->mesh = dt_mesh_retain(mesh);
    s->dp = dt_mesh_dim_comm(mesh, s->dp_dim);
    if (s->dp == NULL) {
        st = DT_ERR(DT_ERR_UNSUPPORTED, "dt_fully_shard: mesh dim '%s' has no comm (virtual mesh)",
                    dp_dim);
        goto err_state;
    }
    s->dp_size = dt_comm_size(s->dp);
    s->dp_rank = dt_comm_rank(s->dp);
    s->stage = DT_PARAM_VALUE(prm, stage, DT_FSDP_PARAM_FIELD_STAGE, DT_DP_ZERO3);
    s->scale = DT_PARAM_VALUE(prm, grad_scale, DT_FSDP_PARAM_FIELD_GRAD_SCALE, 1.0 / s->dp_size);
    s->prefetch = DT_PARAM_VALUE(prm, prefetch, DT_FSDP_PARAM_FIELD_PREFETCH, true);
    s->sync = true;
    s->reduce_dtype =
        DT_PARAM_VALUE(prm, reduce_dtype, DT_FSDP_PARAM_FIELD_REDUCE_DTYPE, DT_DTYPE_F32);
    s->param_dtype =
        DT_PARAM_VALUE(prm, param_dtype, DT_FSDP_PARAM_FIELD_PARAM_DTYPE, DT_DTYPE_F32);
    s->output_dtype =
        DT_PARAM_VALUE(prm, output_dtype, DT_FSDP_PARAM_FIELD_OUTPUT_DTYPE, DT_DTYPE_F32);
    if ((int)s->stage < 0 || s->stage > DT_DP_ZERO3 || !(s->scale > 0.0)) {
        st = DT_ERR(DT_ERR_INVALID_ARG, "dt_fully_shard: bad stage %d or grad_scale %g",
                    (int)s->stage, s->scale);
        goto err_state;
    }
    if (s->reduce_dtype != DT_DTYPE_F32 && s->reduce_dtype != DT_DTYPE_BF16) {
        st = DT_ERR(DT_ERR_INVALID_ARG, "dt_fully_shard: reduce_dtype %s, expected f32 or bf16",
                    dt_dtype_name(s->reduce_dtype));
        goto err_state;
    }
    if (s->param_dtype != DT_DTYPE_F32 && s->param_dtype != DT_DTYPE_BF16) {
        st = DT_ERR(DT_ERR_INVALID_ARG, "dt_fully_shard: param_dtype %s, expected f32 or bf16",
                    dt_dtype_name(s->param_dtype));
        goto err_state;
    }
    if (s->output_dtype != DT_DTYPE_F32 && s->output_dtype != DT_DTYPE_BF16) {
        st = DT_ERR(DT_ERR_INVALID_ARG, "dt_fully_shard: output_dtype %s, expected f32 or bf16",
                    dt_dtype_name(s->output_dtype));
        goto err_state;
    }
    if (already_parallel(root)) {
        st = DT_ERR(DT_ERR_INVALID_ARG, "dt_fully_shard: the model is already data parallel");
        goto err_state;
    }
    DT_CHECK_GOTO(dt__dp_collect_params(s, root), st, err_state);
    s->offload = dt__dp_wants_offload(
        s, DT_PARAM_VALUE(prm, cpu_offload, DT_FSDP_PARAM_FIELD_CPU_OFFLOAD, false));
    for (int i = 0; i < s->n_params; i++)
        DT_CHECK_GOTO(dt__dp_shard_param(s, &s->p[i]), st, err_state);
    for (int i = 0; i < s->n_params; i++)
        DT_CHECK_GOTO(make_leaf(s, &s->p[i]), st, err_state);
    DT_CHECK_GOTO(make_units(s, root, DT_PARAM_VALUE(prm, units, DT_FSDP_PARAM_FIELD_UNITS, NULL)),
                  st, err_state);
    if (s->stage == DT_DP_DDP)
        DT_CHECK_GOTO(
            make_buckets(s, DT_PARAM_VALUE(prm, bucket_bytes, DT_FSDP_PARAM_FIELD_BUCKET_BYTES,
                                           (size_t)4 << 20)),
            st, err_state);
    DT_CHECK_GOTO(dt__dp_hooks_register(s), st, err_state); /* the last step that can fail */
    *out = s;
    return DT_OK;
err_state:
    state_free(s);
    return st;
}

dt_status dt_fully_shard(dt_module *root, dt_mesh *mesh, const char *dp_dim,
                         const dt_fsdp_params *prm)
{
    DT_ARG_NOT_NULL(root);
    DT_ARG_NOT_NULL(mesh);
    DT_ARG_NOT_NULL(dp_dim);
    dp_state *s = NULL;
    DT_CHECK(state_create(root, mesh, dp_dim, prm, &s));
    /* from here on nothing fails for a valid model: slots, then hooks */
    dt_status st = DT_OK;
    for (int i = 0; i < s->n_params && st == DT_OK; i++)
        st = dt_module_param_set(s->p[i].owner, s->p[i].name, s->p[i].slot);
    s->refs = 1; /* ours, dropped below; each hook added holds one */
#define DP_ADD_HOOK(call)                                                                          \
    do {                                                                                           \
        if (st == DT_OK) {                                                                         \
            s->refs++;                                                                             \
            st = (call);                                                                           \
            if (st != DT_OK)                                                                       \
                s->refs--;                                                                         \
        }                                                                                          \
    } while (0)
    DP_ADD_HOOK(dt_module_add_pre_hook(root, root_pre, s, dt__dp_state_unref));
    DP_ADD_HOOK(dt_module_add_post_hook(root, root_post, s, dt__dp_state_unref));
    for (int u = 1; u < s->n_units; u++) {
        DP_ADD_HOOK(dt_module_add_pre_hook(s->u[u].m, unit_pre, s, dt__dp_state_unref));
        DP_ADD_HOOK(dt_module_add_post_hook(s->u[u].m, unit_post, s, dt__dp_state_unref));
    }
#undef DP_ADD_HOOK
    dt__dp_state_unref(s);
    return st;
}

dt_status dt_ddp_apply(dt_module *root, dt_mesh *mesh, const char *dp_dim, const dt_fsdp_params *p)
{
    dt_fsdp_params q = {0};
    if (p != NULL)
        q = *p;
    q.field_mask |= DT_FSDP_PARAM_FIELD_STAGE;
    q.stage = DT_DP_DDP;
    return dt_fully_shard(root, mesh, dp_dim, &q);
}
