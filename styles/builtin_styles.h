/*
 * The built-in styles, each a dt_style_ops in its own file (colwise.c,
 * rowwise.c, sequence.c, prepare_io.c, pairwise.c), registered by name in
 * registry.c like a program's style, and the module-type helpers they share
 * (module_tp.c). Not installed.
 */
#ifndef DT_STYLES_BUILTIN_STYLES_H
#define DT_STYLES_BUILTIN_STYLES_H

#include "styles/style_impl.h"

extern const dt_style_ops dt__style_colwise;
extern const dt_style_ops dt__style_rowwise;
extern const dt_style_ops dt__style_sequence;
extern const dt_style_ops dt__style_prepare_input;
extern const dt_style_ops dt__style_prepare_output;
extern const dt_style_ops dt__style_pairwise;

/* True when @p m is of type @p type (its vtable: nn/nn_internal.h names the built-ins). */
bool dt__module_is(const dt_module *m, const dt_module_ops *type);
/* The tensor-parallel layout @p m's type declares, and its kind (NULL: none). */
const dt_module_tp_param *dt__module_tp(const dt_module *m, dt_module_tp_kind *kind);
/* Colwise (@p colwise) or Rowwise placements of @p m's declared parameters
 * into @p out (a plan_params of at most DT_STYLE_MAX_PARAMS); the reason as
 * an error (DT_ERR_UNSUPPORTED) when its type declares none. */
dt_status dt__tp_param_plan(dt_module *m, bool colwise, dt_style_param_placement *out, int *n);

#endif
