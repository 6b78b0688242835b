/*
 * dt_plan_explain: per module, the style and what it does (or did) to each
 * parameter: placements, global and local shape, bytes on this rank.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/tensor_impl.h"
#include "styles/style_impl.h"

typedef struct explain_ctx {
    dt__plan_match *ms;
    int n_ms;
    const dt_plan *plan;
    dt__style_plan *plans; /* what each match's style would do */
    int tp_size, tp_coord;
    FILE *f;
    int64_t bytes, full_bytes;
} explain_ctx;

/* The placement the plan gives (owner, name), if any. */
static const dt_style_param_plan *planned(const explain_ctx *c, dt_module *owner, const char *name)
{
    for (int i = 0; c->plans != NULL && i < c->n_ms; i++)
        for (int k = 0; k < c->plans[i].n_params; k++) {
            const dt_style_param_plan *pp = &c->plans[i].params[k];
            if (pp->owner == owner && strcmp(pp->name, name) == 0)
                return pp;
        }
    return NULL;
}

static dt_status explain_param(explain_ctx *c, dt_module *m, int i)
{
    dt_tensor *t = dt_module_param_at(m, i);
    const char *name = dt_module_param_name_at(m, i);
    int nd = dt_tensor_ndim(t);
    int64_t local[DT_MAX_DIMS];
    char pl[64], gs[64], ls[64];
    const int64_t *g = dt_tensor_shape(t);
    const dt_style_param_plan *pp = planned(c, m, name);
    if (dt_tensor_is_distributed(t)) {
        const dt_spec *s = dt_tensor_spec(t);
        DT_CHECK(dt_spec_local_shape(s, NULL, local, NULL));
        dt_placements_format(dt_mesh_ndim(dt_spec_mesh(s)), dt_spec_placements(s), ",", pl,
                             sizeof(pl));
    } else if (pp != NULL) { /* what parallelize will make of it */
        dt_placement p;
        DT_CHECK(dt_placement_normalize(pp->placement, nd, &p));
        DT_CHECK(dt_shard_local_shape(nd, g, 1, &c->tp_size, &p, &c->tp_coord, local, NULL));
        dt_placement_format(p, pl, sizeof(pl));
    } else {
        memcpy(local, g, sizeof(int64_t) * (size_t)nd);
        snprintf(pl, sizeof(pl), "local");
    }
    int64_t numel = 1, full = 1;
    for (int d = 0; d < nd; d++) {
        numel *= local[d];
        full *= g[d];
    }
    size_t es = dt_dtype_size(dt_tensor_dtype(t));
    dt__shape_str(nd, g, gs, sizeof(gs));
    dt__shape_str(nd, local, ls, sizeof(ls));
    fprintf(c->f, "    %-8s %-8s global %-14s local %-14s %10" PRId64 " bytes\n", name, pl, gs, ls,
            numel * (int64_t)es);
    c->bytes += numel * (int64_t)es;
    c->full_bytes += full * (int64_t)es;
    return DT_OK;
}

static dt_status explain_module(const char *fqn, dt_module *m, void *user)
{
    explain_ctx *c = user;
    const dt__plan_match *hit = NULL;
    for (int i = 0; i < c->n_ms; i++)
        if (c->ms[i].module == m)
            hit = &c->ms[i];
    if (hit == NULL && dt_module_num_params(m) == 0)
        return DT_OK;
    char style[256] = "-";
    if (hit != NULL)
        dt_style_format(c->plan->entries[hit->entry].style, style, sizeof(style));
    fprintf(c->f, "%-32s %-12s %s\n", *fqn != '\0' ? fqn : "(root)", dt_module_type_name(m), style);
    for (int i = 0; i < dt_module_num_params(m); i++)
        DT_CHECK(explain_param(c, m, i));
    return DT_OK;
}

dt_status dt_plan_explain(dt_module *root, dt_mesh *mesh, const dt_plan *plan, const char *tp_dim,
                          FILE *f)
{
    DT_ARG_NOT_NULL(root);
    DT_ARG_NOT_NULL(f);
    explain_ctx c = {.plan = plan, .tp_size = 1, .f = f};
    dt_status s = DT_OK;
    if (plan != NULL) {
        DT_ARG_NOT_NULL(mesh);
        DT_ARG_NOT_NULL(tp_dim);
        int d = -1, coord[DT_MESH_MAX_DIMS];
        DT_CHECK(dt__plan_tp_dim("dt_plan_explain", mesh, tp_dim, &d, &c.tp_size));
        dt_mesh_coordinate(mesh, coord);
        c.tp_coord = coord[d];
        DT_CHECK(dt__plan_match_all(root, plan, &c.ms, &c.n_ms));
        c.plans = calloc((size_t)(c.n_ms > 0 ? c.n_ms : 1), sizeof(*c.plans));
        if (c.plans == NULL) {
            s = DT_ERR(DT_ERR_NO_MEMORY, "dt_plan_explain: no memory");
            goto out_free;
        }
        for (int i = 0; i < c.n_ms; i++)
            DT_CHECK_GOTO(dt__style_plan_build(plan->entries[c.ms[i].entry].style, c.ms[i].module,
                                               c.ms[i].fqn, &c.plans[i]),
                          s, out_free);
        fprintf(f, "plan on mesh dim '%s' (size %d), this rank at coordinate %d:\n", tp_dim,
                c.tp_size, c.tp_coord);
    }
    DT_CHECK_GOTO(dt_module_foreach(root, explain_module, &c), s, out_free);
    fprintf(f, "parameters on this rank: %" PRId64 " bytes of %" PRId64 " (%.1f%%)\n", c.bytes,
            c.full_bytes, c.full_bytes > 0 ? 100.0 * (double)c.bytes / (double)c.full_bytes : 0.0);
out_free:
    for (int i = 0; c.plans != NULL && i < c.n_ms; i++)
        dt__style_plan_free(&c.plans[i]);
    free(c.plans);
    dt__plan_matches_free(c.ms, c.n_ms);
    return s;
}

static dt_status add_bytes(const char *fqn, dt_module *owner, const char *name, dt_tensor *p,
                           void *user)
{
    (void)fqn, (void)owner, (void)name;
    dt_tensor *l = dt_tensor_is_distributed(p) ? dt_to_local(p) : p;
    *(int64_t *)user += (int64_t)dt_tensor_nbytes(l);
    return DT_OK;
}

int64_t dt_module_param_bytes_local(dt_module *root)
{
    int64_t total = 0;
    if (root != NULL && dt_module_foreach_param(root, add_bytes, &total) != DT_OK)
        return -1;
    return total;
}
