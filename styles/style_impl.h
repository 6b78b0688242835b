/*
 * The layout behind dt_style and dt_plan, shared by the files of styles/.
 * Not installed.
 */
#ifndef DT_STYLES_STYLE_IMPL_H
#define DT_STYLES_STYLE_IMPL_H

#include "dtensor/styles.h"

struct dt_style {
    int refcount;
    dt_style_kind kind;
    int n_inputs;
    dt_layout input_layouts[DT_MODULE_MAX_INPUTS];
    dt_layout desired_input_layouts[DT_MODULE_MAX_INPUTS];
    dt_layout output_layout;
    dt_layout desired_output_layout;
    bool use_local_output;
    int sequence_dim;
    dt_prepare_fn prepare_input, prepare_output; /* NULL: the layouts do it */
    const dt_style_ops *user;                    /* DT_STYLE_USER: the program's style */
    uint64_t set_fields;                         /* the options given explicitly (for printing) */
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

/*
 * The parameters @p s partitions on @p m (the module itself, or its children
 * for pairwise) with their placements; *n entries. DT_ERR_UNSUPPORTED naming
 * the module type when the style cannot shard it.
 */
dt_status dt__style_param_plan(const dt_style *s, dt_module *m, const char *fqn,
                               dt_style_param_plan *out, int *n);

/*
 * Apply @p s to @p m on the 1-d @p tp mesh after dt_style_check passed:
 * @p params hold the distributed tensors for the plan of dt__style_param_plan
 * (one new reference each, consumed), then the hooks are added.
 */
dt_status dt__style_apply(const dt_style *s, dt_module *m, dt_mesh *tp, int n_params,
                          const dt_style_param_plan *plan, dt_tensor **params);

/* Hooks (styles/hooks.c): the user data is a dt__hook_ctx (freed by dt__hook_ctx_free). */
typedef struct dt__hook_ctx {
    dt_style *style;  /* one reference */
    dt_mesh *mesh;    /* one reference, the 1-d tp mesh */
    dt_style_kind as; /* the role (pairwise children act as colwise / rowwise) */
    dt_layout in[DT_MODULE_MAX_INPUTS], desired[DT_MODULE_MAX_INPUTS];
    int n_in;
    dt_layout out, desired_out; /* the output: current layout, wanted layout */
    bool local_out;             /* dt_to_local the output */
    bool local_in;              /* dt_to_local the prepared inputs (prepare_input) */
    int64_t in_last_dim;        /* global size of a S(-1) input's last dim, or -1 */
} dt__hook_ctx;

void dt__hook_ctx_free(void *ctx);
dt_status dt__hook_pre(dt_module *m, int n_in, dt_tensor **inputs, void *user);
dt_status dt__hook_post(dt_module *m, dt_tensor **output, void *user);

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
