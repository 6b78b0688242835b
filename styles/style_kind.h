/*
 * One small vtable per style kind (styles/colwise.c, rowwise.c, sequence.c,
 * prepare_io.c, pairwise.c): which options it takes, its defaults, which
 * parameters it partitions and the hooks it adds. Not installed.
 */
#ifndef DT_STYLES_STYLE_KIND_H
#define DT_STYLES_STYLE_KIND_H

#include "styles/style_impl.h"

typedef struct dt__style_kind_ops {
    const char *name;
    uint64_t allowed_fields;  /* DT_STYLE_PARAM_FIELD_* the kind takes */
    uint64_t required_fields; /* ... and must be given */
    /* Fill the fields not in s->set_fields with the kind's defaults. */
    void (*defaults)(dt_style *s);
    /* The parameters the style places on @p m (see dt__style_param_plan). */
    dt_status (*param_plan)(const dt_style *s, dt_module *m, const char *fqn,
                            dt_style_param_plan *out, int *n);
    /* Add the forward hooks to @p m (and its children for pairwise). */
    dt_status (*add_hooks)(const dt_style *s, dt_module *m, dt_mesh *tp);
} dt__style_kind_ops;

extern const dt__style_kind_ops dt__style_colwise_ops;
extern const dt__style_kind_ops dt__style_rowwise_ops;
extern const dt__style_kind_ops dt__style_sequence_ops;
extern const dt__style_kind_ops dt__style_prepare_input_ops;
extern const dt__style_kind_ops dt__style_prepare_output_ops;
extern const dt__style_kind_ops dt__style_pairwise_ops;
extern const dt__style_kind_ops dt__style_user_ops;

/* dt_style_create for any kind, DT_STYLE_USER too (user_style.c sets it up). */
dt_status dt__style_create_kind(dt_style_kind kind, const dt_style_params *p, dt_style **out);
/* The registered user style named @p name, or NULL (user_style.c). */
const dt_style_ops *dt__user_style_find(const char *name);
/* Whether plan text names a built-in style @p name (plan_parse.c). */
bool dt__style_builtin_name(const char *name);

const dt__style_kind_ops *dt__style_kind_ops_of(dt_style_kind k);

/*
 * A hook context for @p s in role @p as on @p m over @p tp (retains both);
 * the caller fills the layouts, then hands it to dt__hook_add.
 */
dt_status dt__hook_ctx_new(const dt_style *s, dt_style_kind as, dt_mesh *tp, dt__hook_ctx **out);
/* Add the pre (when @p pre) and/or post hook of @p ctx to @p m; the module's
 * hooks own the context from here on (freed with them), even on failure. */
dt_status dt__hook_add(dt_module *m, dt__hook_ctx *ctx, bool pre, bool post);

/* True when @p m is of type @p type (its vtable: nn/nn_internal.h names the built-ins). */
bool dt__module_is(const dt_module *m, const dt_module_ops *type);
/* The tensor-parallel layout @p m's type declares, and its kind (NULL: none). */
const dt_module_tp_param *dt__module_tp(const dt_module *m, dt_module_tp_kind *kind);
/* Colwise (@p colwise) or Rowwise placements of @p m's declared parameters into
 * @p out; DT_ERR_UNSUPPORTED naming @p fqn and the type when it declares none. */
dt_status dt__tp_param_plan(dt_module *m, const char *style, const char *fqn, bool colwise,
                            dt_style_param_plan *out, int *n);

#endif
