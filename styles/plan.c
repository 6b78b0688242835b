/*
 * Plans: FQN patterns -> styles, matching against a module tree, and
 * dt_parallelize_module, which checks everything before it changes anything.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/fqn_match.h"
#include "mesh/mesh_impl.h"
#include "core/log.h"
#include "nn/nn_internal.h"
#include "styles/builtin_styles.h"

dt_status dt_plan_create(dt_plan **out)
{
    DT_ARG_NOT_NULL(out);
    dt_plan *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_plan_create: no memory");
    *out = p;
    return DT_OK;
}

void dt_plan_destroy(dt_plan *p)
{
    if (p == NULL)
        return;
    for (int i = 0; i < p->n; i++) {
        free(p->entries[i].pattern);
        dt_style_release(p->entries[i].style);
    }
    free(p->entries);
    free(p);
}

dt_status dt_plan_add(dt_plan *p, const char *fqn_pattern, dt_style *style)
{
    DT_ARG_NOT_NULL(p);
    DT_ARG_NOT_NULL(fqn_pattern);
    DT_ARG_NOT_NULL(style);
    size_t len = strlen(fqn_pattern);
    if (len > 0 &&
        (fqn_pattern[0] == '.' || fqn_pattern[len - 1] == '.' || strstr(fqn_pattern, "..") != NULL))
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_plan_add: key '%s' has an empty path segment",
                      fqn_pattern);
    for (const char *c = fqn_pattern; *c != '\0'; c++)
        if (*c == ' ' || *c == '\t' || *c == '=' || *c == ';')
            return DT_ERR(DT_ERR_INVALID_ARG, "dt_plan_add: key '%s' holds a '%c'", fqn_pattern,
                          *c);
    if (p->n == p->cap) {
        int cap = p->cap > 0 ? 2 * p->cap : 8;
        dt_plan_entry *e = realloc(p->entries, (size_t)cap * sizeof(*e));
        if (e == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "dt_plan_add: no memory");
        p->entries = e;
        p->cap = cap;
    }
    char *copy = strdup(fqn_pattern);
    if (copy == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_plan_add: no memory");
    p->entries[p->n++] = (dt_plan_entry){.pattern = copy, .style = dt_style_retain(style)};
    return DT_OK;
}

int dt_plan_size(const dt_plan *p)
{
    return p != NULL ? p->n : 0;
}

const char *dt_plan_pattern_at(const dt_plan *p, int i)
{
    return p != NULL && i >= 0 && i < p->n ? p->entries[i].pattern : NULL;
}

dt_style *dt_plan_style_at(const dt_plan *p, int i)
{
    return p != NULL && i >= 0 && i < p->n ? p->entries[i].style : NULL;
}

/* ------------------------------------------------------------ matching */

typedef struct match_list {
    dt__plan_match *items;
    int n, cap;
} match_list;

static dt_status list_push(match_list *l, dt_module *m, int entry, const char *fqn)
{
    if (l->n == l->cap) {
        int cap = l->cap > 0 ? 2 * l->cap : 16;
        dt__plan_match *p = realloc(l->items, (size_t)cap * sizeof(*p));
        if (p == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "parallelize: no memory for matches");
        l->items = p;
        l->cap = cap;
    }
    char *f = strdup(fqn);
    if (f == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "parallelize: no memory for matches");
    l->items[l->n++] = (dt__plan_match){.module = m, .entry = entry, .fqn = f};
    return DT_OK;
}

/* Match the rest of the pattern @p pat at module @p m whose FQN is @p fqn. */
static dt_status match_rec(dt_module *m, const char *fqn, const char *pat, int entry, match_list *l)
{
    if (*pat == '\0')
        return list_push(l, m, entry, fqn);
    const char *dot = strchr(pat, '.');
    size_t seg = dot != NULL ? (size_t)(dot - pat) : strlen(pat);
    const char *rest = dot != NULL ? dot + 1 : pat + seg;
    for (int i = 0; i < dt_module_num_children(m); i++) {
        dt_module *c = dt_module_child_at(m, i);
        if (!dt__fqn_segment_match(pat, seg, dt_module_name(c)))
            continue;
        size_t n = strlen(fqn) + strlen(dt_module_name(c)) + 2;
        char *cf = malloc(n);
        if (cf == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "parallelize: no memory");
        snprintf(cf, n, "%s%s%s", fqn, *fqn != '\0' ? "." : "", dt_module_name(c));
        dt_status s = match_rec(c, cf, rest, entry, l);
        free(cf);
        DT_CHECK(s);
    }
    return DT_OK;
}

void dt__plan_matches_free(dt__plan_match *m, int n)
{
    for (int i = 0; m != NULL && i < n; i++)
        free(m[i].fqn);
    free(m);
}

dt_status dt__plan_match_all(dt_module *root, const dt_plan *plan, dt__plan_match **out, int *n)
{
    match_list l = {0};
    dt_status s = DT_OK;
    for (int e = 0; e < plan->n; e++) {
        int before = l.n;
        DT_CHECK_GOTO(match_rec(root, "", plan->entries[e].pattern, e, &l), s, err_free);
        if (l.n == before) {
            s = DT_ERR(DT_ERR_NOT_FOUND, "parallelize: plan key '%s' matches no module",
                       plan->entries[e].pattern);
            goto err_free;
        }
    }
    for (int i = 0; i < l.n; i++)
        for (int j = 0; j < i; j++)
            if (l.items[i].module == l.items[j].module) {
                s = DT_ERR(DT_ERR_INVALID_ARG,
                           "parallelize: module '%s' is matched by two plan keys, '%s' and '%s'",
                           l.items[i].fqn, plan->entries[l.items[j].entry].pattern,
                           plan->entries[l.items[i].entry].pattern);
                goto err_free;
            }
    *out = l.items;
    *n = l.n;
    return DT_OK;

err_free:
    dt__plan_matches_free(l.items, l.n);
    return s;
}

dt_status dt__plan_tp_dim(const char *fn, dt_mesh *mesh, const char *tp_dim, int *index, int *size)
{
    int d = -1;
    DT_CHECK(dt__mesh_dim_find(fn, mesh, tp_dim, &d));
    *index = d;
    *size = dt_mesh_dim_size(mesh, d);
    return DT_OK;
}

/* ------------------------------------------------------------ parallelize */

/* One match, checked: what its style does, and the shards made for it. */
typedef struct staged {
    dt__style_plan plan;
    dt_tensor **params; /* one per plan.params */
} staged;

/* The first of st[0..i) that also places @p pp, or -1. */
static int earlier_placer(const staged *st, int i, const dt_style_param_plan *pp)
{
    for (int j = 0; j < i; j++)
        for (int b = 0; b < st[j].plan.n_params; b++) {
            const dt_style_param_plan *q = &st[j].plan.params[b];
            if (pp->owner == q->owner && strcmp(pp->name, q->name) == 0)
                return j;
        }
    return -1;
}

/* Two styles placing the same parameter (a block and one of its layers) is an error. */
static dt_status check_overlap(const dt__plan_match *ms, const staged *st, int n)
{
    for (int i = 0; i < n; i++)
        for (int a = 0; a < st[i].plan.n_params; a++) {
            const dt_style_param_plan *pp = &st[i].plan.params[a];
            int j = earlier_placer(st, i, pp);
            if (j >= 0)
                return DT_ERR(DT_ERR_INVALID_ARG,
                              "parallelize: parameter '%s' of '%s' is placed by the styles of "
                              "both '%s' and '%s'",
                              pp->name, dt_module_name(pp->owner), ms[j].fqn, ms[i].fqn);
        }
    return DT_OK;
}

/*
 * Shard dims the matched module can never have. A layer's rank is only known
 * at its forward (a Linear takes any rank, and S(7) is valid on 8 dims), so
 * what is left is the Embedding: its ids have one dim fewer than its output,
 * at most DT_MAX_DIMS - 1. dt_style_create has refused dims >= DT_MAX_DIMS.
 */
static dt_status check_input_dims(const dt_style *s, dt_module *m, const char *fqn)
{
    const dt_style_params *o = dt_style_options(s);
    if (!dt__module_is(m, &dt__embedding_ops) || o->n_inputs < 1)
        return DT_OK;
    const dt_layout *ls[2] = {&o->input_layouts[0], &o->desired_input_layouts[0]};
    static const char *const what[2] = {"input", "desired input"};
    for (int k = 0; k < 2; k++) {
        dt_placement p = ls[k]->placement;
        if (ls[k]->present && p.kind == DT_PLACEMENT_SHARD && p.dim >= DT_MAX_DIMS - 1)
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "parallelize: '%s', an Embedding: %s %s S(%d): its ids have at most "
                          "%d dims",
                          fqn, dt_style_get_ops(s)->name, what[k], p.dim, DT_MAX_DIMS - 1);
    }
    return DT_OK;
}

/* This rank's shard of parameter @p full: dt_distribute's, or for a deferred
 * parameter a deferred shard of the local shape (nothing to copy yet). */
static dt_status shard_of(dt_tensor *full, dt_mesh *tp, const dt_placement *pl, dt_tensor **out)
{
    if (!dt_param_is_deferred(full))
        return dt_distribute(full, tp, 1, pl, out);
    dt_spec *spec = NULL;
    dt_tensor *local = NULL;
    int64_t ls[DT_MAX_DIMS];
    const int64_t *shape = dt_tensor_shape(full);
    int nd = dt_tensor_ndim(full);
    DT_CHECK(dt_spec_create(tp, 1, pl, nd, shape, dt_tensor_dtype(full), &spec));
    dt_status s = dt_spec_local_shape(spec, NULL, ls, NULL);
    dt_spec_release(spec);
    if (s == DT_OK)
        s = dt__tensor_deferred(nd, ls, dt_tensor_dtype(full), dt_tensor_device(full), &local);
    if (s == DT_OK)
        s = dt_from_local(local, tp, 1, pl, shape, out);
    dt_tensor_release(local);
    return s;
}

static void staged_free(staged *st, int n)
{
    for (int i = 0; st != NULL && i < n; i++) {
        for (int k = 0; st[i].params != NULL && k < st[i].plan.n_params; k++)
            dt_tensor_release(st[i].params[k]);
        free(st[i].params);
        dt__style_plan_free(&st[i].plan);
    }
    free(st);
}

/* Phase 1 for match @p m: its style's plan, checked; nothing changes. */
static dt_status stage_match(const dt_plan *plan, const dt__plan_match *m, int tp_size, staged *st)
{
    const dt_style *style = plan->entries[m->entry].style;
    DT_CHECK(dt__style_plan_build(style, m->module, m->fqn, &st->plan));
    DT_CHECK(dt__style_plan_check(&st->plan, m->fqn, tp_size));
    DT_CHECK(check_input_dims(style, m->module, m->fqn));
    st->params =
        calloc((size_t)(st->plan.n_params > 0 ? st->plan.n_params : 1), sizeof(dt_tensor *));
    if (st->params == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_parallelize_module: no memory");
    return DT_OK;
}

dt_status dt_parallelize_module(dt_module *root, dt_mesh *mesh, const dt_plan *plan,
                                const char *tp_dim)
{
    DT_ARG_NOT_NULL(root);
    DT_ARG_NOT_NULL(mesh);
    DT_ARG_NOT_NULL(plan);
    DT_ARG_NOT_NULL(tp_dim);
    int d = -1, tp_size = 0, n = 0;
    DT_CHECK(dt__plan_tp_dim("dt_parallelize_module", mesh, tp_dim, &d, &tp_size));
    dt__plan_match *ms = NULL;
    DT_CHECK(dt__plan_match_all(root, plan, &ms, &n));
    dt_mesh *tp = NULL;
    staged *st = calloc((size_t)(n > 0 ? n : 1), sizeof(*st));
    dt_status s = DT_OK;
    if (st == NULL) {
        s = DT_ERR(DT_ERR_NO_MEMORY, "dt_parallelize_module: no memory");
        goto out_free;
    }
    /* 1. check every match; nothing changes yet */
    for (int i = 0; i < n; i++)
        DT_CHECK_GOTO(stage_match(plan, &ms[i], tp_size, &st[i]), s, out_free);
    DT_CHECK_GOTO(check_overlap(ms, st, n), s, out_free);
    /* 2. build every shard (can fail: no memory); the model is still untouched */
    DT_CHECK_GOTO(dt_mesh_slice_dims(mesh, 1, &d, &tp), s, out_free);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < st[i].plan.n_params; k++) {
            const dt_style_param_plan *pp = &st[i].plan.params[k];
            dt_tensor *full = dt_module_param(pp->owner, pp->name);
            DT_CHECK_GOTO(shard_of(full, tp, &pp->placement, &st[i].params[k]), s, out_free);
        }
    /* 3. commit: swap slots, add hooks */
    for (int i = 0; i < n; i++) {
        s = dt__style_plan_apply(&st[i].plan, tp, st[i].params);
        if (s != DT_OK) {
            DT_LOG_ERROR("styles", "parallelize: applying '%s' failed half-way: %s", ms[i].fqn,
                         dt_last_error());
            goto out_free;
        }
        free(st[i].params); /* consumed */
        st[i].params = NULL;
    }
out_free:
    staged_free(st, n);
    dt_mesh_release(tp);
    dt__plan_matches_free(ms, n);
    return s;
}
