/*
 * The layout behind dt_style and dt_plan, shared by the files of styles/.
 * Not installed.
 */
#ifndef DT_STYLES_STYLE_IMPL_H
#define DT_STYLES_STYLE_IMPL_H

#include "dtensor/styles.h"

struct dt_style {
    int refcount;
    const dt_style_ops *ops; /* what the style does: built-in or a program's */
    dt_style_params opt;     /* field_mask: the options given; the rest the style's defaults */
};

typedef struct dt_plan_entry {
    char *pattern;
    dt_style *style; /* one reference */
} dt_plan_entry;

struct dt_plan {
    dt_plan_entry *entries;
    int n, cap;
};

/*
 * One parameter a style would create: slot @p name of @p owner placed with
 * @p placement on the tp mesh dim.
 */
typedef struct dt_style_param_plan {
    dt_module *owner;
    const char *name; /* borrowed from the module */
    dt_placement placement;
} dt_style_param_plan;

/* One module whose inputs and output a style prepares, and how. */
typedef struct dt__style_io_plan {
    dt_module *module;
    dt_style_io io;
} dt__style_io_plan;

/*
 * Everything a style does to one matched module, the styles it applies to
 * children included, worked out before anything changes (styles/partition.c):
 * the parameters to place, then the hooks to add, in that order.
 */
typedef struct dt__style_plan {
    dt_style_param_plan *params;
    int n_params, cap_params;
    dt__style_io_plan *ios;
    int n_ios, cap_ios;
} dt__style_plan;

/*
 * The plan of @p s on @p m (FQN @p fqn, for messages) into @p out (zeroed by
 * the caller; free it with dt__style_plan_free, also on failure). Errors: a
 * refusal of the style or of one it applies to a child, naming the style and
 * the module; a bad placement or io from the style's callbacks.
 */
dt_status dt__style_plan_build(const dt_style *s, dt_module *m, const char *fqn,
                               dt__style_plan *out);
/* What dt_style_check checks, on a built plan: no parameter already
 * distributed, attention shards holding whole heads of @p tp_size. */
dt_status dt__style_plan_check(const dt__style_plan *p, const char *fqn, int tp_size);
void dt__style_plan_free(dt__style_plan *p);

/*
 * Apply plan @p p on the 1-d @p tp mesh after it was checked: @p params hold
 * the distributed tensors for p->params (one new reference each, consumed),
 * then the hooks are added.
 */
dt_status dt__style_plan_apply(const dt__style_plan *p, dt_mesh *tp, dt_tensor **params);

/* Add the hooks that do @p io to @p m on @p tp (styles/hooks.c): a pre hook
 * when io->n_inputs > 0, a post hook when the output is prepared at all. */
dt_status dt__style_hooks_add(dt_module *m, const dt_style_io *io, dt_mesh *tp);

/* @p ops is a style @p fn can use: a name, field masks that match the
 * members set, options it knows (DT_ERR_INVALID_ARG naming @p fn). */
dt_status dt__style_ops_check(const char *fn, const dt_style_ops *ops);

/* Layout checks shared by options and io: a Shard dim in -1..DT_MAX_DIMS-1, a
 * known Partial op, no Partial unless @p partial_ok. @p who names the style. */
dt_status dt__layout_check(const char *who, const char *what, int i, dt_layout l, bool partial_ok);

/* Layout helpers (styles/style.c). */
int dt__layout_format(dt_layout l, char *buf, size_t len);
dt_status dt__layout_parse(const char *text, dt_layout *out);

/* One module a plan entry matched (styles/plan.c). */
typedef struct dt__plan_match {
    dt_module *module;
    int entry; /* index into the plan */
    char *fqn; /* owned */
} dt__plan_match;

/*
 * Every (module, entry) of @p plan on @p root, entries in plan order and
 * modules in tree order. DT_ERR_NOT_FOUND naming a key that matches nothing;
 * DT_ERR_INVALID_ARG naming a module two keys match. Free with
 * dt__plan_matches_free.
 */
dt_status dt__plan_match_all(dt_module *root, const dt_plan *plan, dt__plan_match **out, int *n);
void dt__plan_matches_free(dt__plan_match *m, int n);

/* The index and size of mesh dim @p tp_dim (DT_ERR_NOT_FOUND naming it). */
dt_status dt__plan_tp_dim(const char *fn, dt_mesh *mesh, const char *tp_dim, int *index, int *size);

#endif
