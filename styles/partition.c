/*
 * What a style does to a module, in two phases so that parallelize can check
 * everything before changing anything: dt__style_plan_build asks the style's
 * dt_style_ops (its parameter placements, its io, the styles it applies to
 * children, recursively) and checks their answers, changing nothing;
 * dt__style_plan_apply swaps parameter slots and adds hooks. Built-in and
 * program styles go through exactly these calls.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "nn/nn_internal.h"
#include "styles/builtin_styles.h"

/* Room for one more element in a growing array of @p size-byte items. */
static dt_status grow(void **items, int n, int *cap, size_t size)
{
    if (n < *cap)
        return DT_OK;
    int c = *cap > 0 ? 2 * *cap : 8;
    void *p = realloc(*items, (size_t)c * size);
    if (p == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "parallelize: no memory for a style's plan");
    *items = p;
    *cap = c;
    return DT_OK;
}

void dt__style_plan_free(dt__style_plan *p)
{
    if (p == NULL)
        return;
    free(p->params);
    free(p->ios);
    *p = (dt__style_plan){0};
}

/* A style's refusal of @p fqn, the style's reason quoted. */
static dt_status refused(dt_status st, const dt_style *s, const char *fqn)
{
    return DT_ERR(st, "parallelize: style '%s' refused '%s': %s", s->ops->name, fqn,
                  dt__error_text(dt_last_error()));
}

/* The module's own string for slot @p name: it outlives the plan, the style's may not. */
static const char *slot_name(const dt_module *m, const char *name)
{
    for (int i = 0; i < dt_module_num_params(m); i++)
        if (strcmp(dt_module_param_name_at(m, i), name) == 0)
            return dt_module_param_name_at(m, i);
    return name;
}

/* @p m's own parameters, as the style's plan_params places them. */
static dt_status plan_own_params(const dt_style *s, dt_module *m, const char *fqn,
                                 dt__style_plan *out)
{
    if (s->ops->plan_params == NULL)
        return DT_OK;
    dt_style_param_placement pp[DT_STYLE_MAX_PARAMS];
    int k = 0;
    dt_status st = s->ops->plan_params(m, fqn, pp, &k);
    if (st != DT_OK)
        return refused(st, s, fqn);
    if (k < 0 || k > DT_STYLE_MAX_PARAMS)
        return DT_ERR(DT_ERR_INVALID_ARG, "parallelize: style '%s' placed %d parameters of '%s'",
                      s->ops->name, k, fqn);
    for (int i = 0; i < k; i++) {
        if (pp[i].name == NULL || dt_module_param(m, pp[i].name) == NULL)
            return DT_ERR(DT_ERR_NOT_FOUND,
                          "parallelize: style '%s' placed parameter '%s' of '%s', which has none",
                          s->ops->name, pp[i].name != NULL ? pp[i].name : "(null)", fqn);
        DT_CHECK(
            grow((void **)&out->params, out->n_params, &out->cap_params, sizeof(*out->params)));
        out->params[out->n_params++] =
            (dt_style_param_plan){m, slot_name(m, pp[i].name), pp[i].placement};
    }
    return DT_OK;
}

/* Input/output layouts a style gives are checked as options are. */
static dt_status check_io(const dt_style *s, const char *fqn, const dt_style_io *io)
{
    if (io->n_inputs < 0 || io->n_inputs > DT_MODULE_MAX_INPUTS)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "parallelize: style '%s' on '%s': n_inputs %d outside 0..%d", s->ops->name,
                      fqn, io->n_inputs, DT_MODULE_MAX_INPUTS);
    dt_status st = DT_OK;
    for (int i = 0; i < io->n_inputs && st == DT_OK; i++) {
        st = dt__layout_check(s->ops->name, "io input", i, io->input[i], true);
        if (st == DT_OK)
            st = dt__layout_check(s->ops->name, "io desired_input", i, io->desired_input[i], false);
    }
    if (st == DT_OK)
        st = dt__layout_check(s->ops->name, "io output", 0, io->output, true);
    if (st == DT_OK)
        st = dt__layout_check(s->ops->name, "io desired_output", 0, io->desired_output, false);
    return st != DT_OK ? refused(st, s, fqn) : DT_OK;
}

/* How @p s prepares @p m's inputs and output: the first form's functions,
 * the style's plan_io, then the options' prepare functions. */
static dt_status plan_own_io(const dt_style *s, dt_module *m, const char *fqn, dt__style_plan *out)
{
    const dt_style_ops *ops = s->ops;
    dt_style_io io = {.n_inputs = ops->prepare_input != NULL ? 1 : 0,
                      .input_fn = {ops->prepare_input},
                      .output_fn = ops->prepare_output};
    for (int i = 0; i < DT_MODULE_MAX_INPUTS; i++)
        io.input_last_dim[i] = -1;
    if ((ops->field_mask & DT_STYLE_OPS_FIELD_PLAN_IO) && ops->plan_io != NULL) {
        dt_status st = ops->plan_io(s, m, &io);
        if (st != DT_OK)
            return refused(st, s, fqn);
    }
    if (s->opt.field_mask & DT_STYLE_PARAM_FIELD_PREPARE_INPUT) {
        io.input_fn[0] = s->opt.prepare_input;
        io.n_inputs = io.n_inputs > 0 ? io.n_inputs : 1;
    }
    if (s->opt.field_mask & DT_STYLE_PARAM_FIELD_PREPARE_OUTPUT)
        io.output_fn = s->opt.prepare_output;
    DT_CHECK(check_io(s, fqn, &io));
    DT_CHECK(grow((void **)&out->ios, out->n_ios, &out->cap_ios, sizeof(*out->ios)));
    out->ios[out->n_ios++] = (dt__style_io_plan){m, io};
    return DT_OK;
}

/* "fqn.a.b" for @p c, a module below @p m (NULL when it is not below). */
static char *child_fqn(dt_module *m, const char *fqn, dt_module *c)
{
    size_t rel = 0; /* "a.b": the names from below m down to c, dots between */
    dt_module *up = c;
    for (; up != NULL && up != m; up = dt_module_parent(up))
        rel += strlen(dt_module_name(up)) + (rel > 0 ? 1 : 0);
    if (up == NULL || c == m)
        return NULL;
    size_t head = *fqn != '\0' ? strlen(fqn) + 1 : 0, len = head + rel;
    char *path = malloc(len + 1);
    if (path == NULL)
        return NULL;
    if (head > 0) {
        memcpy(path, fqn, head - 1);
        path[head - 1] = '.';
    }
    path[len] = '\0';
    size_t end = len;
    for (up = c; up != m; up = dt_module_parent(up)) {
        size_t n = strlen(dt_module_name(up));
        end -= n;
        memcpy(path + end, dt_module_name(up), n);
        if (end > head)
            path[--end] = '.';
    }
    return path;
}

static dt_status plan_children(const dt_style *s, dt_module *m, const char *fqn,
                               dt__style_plan *out)
{
    if (!(s->ops->field_mask & DT_STYLE_OPS_FIELD_CHILDREN) || s->ops->children == NULL)
        return DT_OK;
    dt_style_child ch[DT_STYLE_MAX_CHILDREN];
    int n = 0;
    dt_status st = s->ops->children(s, m, fqn, ch, &n);
    if (st != DT_OK)
        st = refused(st, s, fqn);
    else if (n < 0 || n > DT_STYLE_MAX_CHILDREN)
        st = DT_ERR(DT_ERR_INVALID_ARG, "parallelize: style '%s' gave %d children of '%s'",
                    s->ops->name, n, fqn);
    n = n < 0 ? 0 : n > DT_STYLE_MAX_CHILDREN ? DT_STYLE_MAX_CHILDREN : n;
    for (int i = 0; i < n && st == DT_OK; i++) {
        char *cf = ch[i].module != NULL ? child_fqn(m, fqn, ch[i].module) : NULL;
        if (cf == NULL || ch[i].style == NULL)
            st = DT_ERR(DT_ERR_INVALID_ARG, "parallelize: style '%s' on '%s': child %d is %s",
                        s->ops->name, fqn, i,
                        ch[i].style == NULL ? "without a style" : "not a module below it");
        else
            st = dt__style_plan_build(ch[i].style, ch[i].module, cf, out);
        free(cf);
    }
    for (int i = 0; i < n; i++)
        dt_style_release(ch[i].style);
    return st;
}

dt_status dt__style_plan_build(const dt_style *s, dt_module *m, const char *fqn,
                               dt__style_plan *out)
{
    DT_CHECK(plan_own_params(s, m, fqn, out));
    DT_CHECK(plan_own_io(s, m, fqn, out));
    return plan_children(s, m, fqn, out);
}

/* Heads must not be split: a sharded projection of an Attention (or the
 * in_proj of a MultiheadAttention) needs tp | n_heads. */
static dt_status check_heads(const dt_style_param_plan *pp, const char *fqn, int tp_size)
{
    dt_module *parent = dt_module_parent(pp->owner);
    int64_t heads = 0;
    if (pp->placement.kind != DT_PLACEMENT_SHARD)
        return DT_OK;
    if (dt__module_is(pp->owner, &dt__mha_ops))
        DT_CHECK(dt_multihead_attention_config(pp->owner, &heads, NULL, NULL));
    else if (parent != NULL && dt__module_is(parent, &dt__attention_ops))
        DT_CHECK(dt_attention_config(parent, &heads, NULL));
    else
        return DT_OK;
    if (heads % tp_size != 0)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "parallelize: '%s': n_heads %" PRId64 " is not divisible by the tp size %d "
                      "(attention shards must hold whole heads)",
                      fqn, heads, tp_size);
    return DT_OK;
}

dt_status dt__style_plan_check(const dt__style_plan *p, const char *fqn, int tp_size)
{
    for (int i = 0; i < p->n_params; i++) {
        const dt_style_param_plan *pp = &p->params[i];
        dt_tensor *t = dt_module_param(pp->owner, pp->name);
        if (dt_tensor_is_distributed(t)) {
            char spec[160];
            dt_spec_format(dt_tensor_spec(t), spec, sizeof(spec));
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "parallelize: '%s': parameter '%s' of %s '%s' is already distributed "
                          "(%s): apply tensor parallelism once, and before data parallelism "
                          "(dt_parallelize_module, then dt_fully_shard / dt_ddp_apply)",
                          fqn, pp->name, dt_module_type_name(pp->owner), dt_module_name(pp->owner),
                          spec);
        }
        DT_CHECK(check_heads(pp, fqn, tp_size));
        for (int j = 0; j < i; j++) /* a style and a child's style, or a child twice */
            if (p->params[j].owner == pp->owner && strcmp(p->params[j].name, pp->name) == 0)
                return DT_ERR(DT_ERR_INVALID_ARG,
                              "parallelize: '%s': parameter '%s' of '%s' is placed twice by its "
                              "style",
                              fqn, pp->name, dt_module_name(pp->owner));
    }
    return DT_OK;
}

dt_status dt_style_check(const dt_style *s, dt_module *m, const char *fqn, int tp_size)
{
    DT_ARG_NOT_NULL(s);
    DT_ARG_NOT_NULL(m);
    if (fqn == NULL)
        fqn = dt_module_name(m);
    if (tp_size < 1)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_style_check: tp size %d < 1", tp_size);
    dt__style_plan p = {0};
    dt_status st = dt__style_plan_build(s, m, fqn, &p);
    if (st == DT_OK)
        st = dt__style_plan_check(&p, fqn, tp_size);
    dt__style_plan_free(&p);
    return st;
}

dt_status dt__style_plan_apply(const dt__style_plan *p, dt_mesh *tp, dt_tensor **params)
{
    dt_status status = DT_OK;
    int i = 0;
    for (; i < p->n_params; i++) {
        status = dt_module_param_set(p->params[i].owner, p->params[i].name, params[i]);
        dt_tensor_release(params[i]);
        params[i] = NULL;
        if (status != DT_OK)
            break;
    }
    for (i++; i < p->n_params; i++) { /* consume the rest on failure */
        dt_tensor_release(params[i]);
        params[i] = NULL;
    }
    DT_CHECK(status);
    for (int k = 0; k < p->n_ios; k++)
        DT_CHECK(dt__style_hooks_add(p->ios[k].module, &p->ios[k].io, tp));
    return DT_OK;
}
