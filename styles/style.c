/* dt_style objects: creation with field-masked options, defaults, layouts, printing. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "nn/nn_internal.h"
#include "styles/style_kind.h"

dt_layout dt_layout_of(dt_placement p)
{
    return (dt_layout){.present = true, .placement = p};
}

dt_layout dt_layout_none(void)
{
    return (dt_layout){.present = false};
}

int dt__layout_format(dt_layout l, char *buf, size_t len)
{
    if (!l.present)
        return snprintf(buf, len, "None");
    return dt_placement_format(l.placement, buf, len);
}

dt_status dt__layout_parse(const char *text, dt_layout *out)
{
    if (strcmp(text, "None") == 0 || strcmp(text, "none") == 0 || strcmp(text, "_") == 0) {
        *out = dt_layout_none();
        return DT_OK;
    }
    dt_placement p;
    DT_CHECK(dt_placement_parse(text, &p));
    *out = dt_layout_of(p);
    return DT_OK;
}

const dt__style_kind_ops *dt__style_kind_ops_of(dt_style_kind k)
{
    static const dt__style_kind_ops *const table[DT_STYLE_KIND_COUNT] = {
        [DT_STYLE_COLWISE] = &dt__style_colwise_ops,
        [DT_STYLE_ROWWISE] = &dt__style_rowwise_ops,
        [DT_STYLE_SEQUENCE] = &dt__style_sequence_ops,
        [DT_STYLE_PREPARE_INPUT] = &dt__style_prepare_input_ops,
        [DT_STYLE_PREPARE_OUTPUT] = &dt__style_prepare_output_ops,
        [DT_STYLE_PAIRWISE] = &dt__style_pairwise_ops,
        [DT_STYLE_USER] = &dt__style_user_ops,
    };
    if ((int)k < 0 || k >= DT_STYLE_KIND_COUNT)
        return NULL;
    return table[k];
}

const char *dt_style_kind_name(dt_style_kind k)
{
    const dt__style_kind_ops *ops = dt__style_kind_ops_of(k);
    return ops != NULL ? ops->name : "unknown";
}

static const char *field_name(uint64_t bit)
{
    switch (bit) {
    case DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS:
        return "input_layouts";
    case DT_STYLE_PARAM_FIELD_DESIRED_INPUT_LAYOUTS:
        return "desired_input_layouts";
    case DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT:
        return "output_layout";
    case DT_STYLE_PARAM_FIELD_DESIRED_OUTPUT_LAYOUT:
        return "desired_output_layout";
    case DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT:
        return "use_local_output";
    case DT_STYLE_PARAM_FIELD_SEQUENCE_DIM:
        return "sequence_dim";
    case DT_STYLE_PARAM_FIELD_PREPARE_INPUT:
        return "prepare_input";
    case DT_STYLE_PARAM_FIELD_PREPARE_OUTPUT:
        return "prepare_output";
    default:
        return "unknown field";
    }
}

/* Shard dims must be >= 0 or -1 (the last): the tensor's rank is not known
 * here, only that no tensor has more than DT_MAX_DIMS dims. */
static dt_status check_layout(const char *kind, const char *what, int i, dt_layout l,
                              bool partial_ok)
{
    if (!l.present)
        return DT_OK;
    dt_placement p = l.placement;
    if (p.kind == DT_PLACEMENT_SHARD && p.dim < -1)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s style: %s[%d] S(%d): use a dim >= 0 or -1", kind,
                      what, i, p.dim);
    if (p.kind == DT_PLACEMENT_SHARD && p.dim >= DT_MAX_DIMS)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s style: %s[%d] S(%d): no tensor has that dim (at most %d dims)", kind,
                      what, i, p.dim, DT_MAX_DIMS);
    if (p.kind == DT_PLACEMENT_PARTIAL && !partial_ok)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s style: %s[%d] cannot be Partial", kind, what, i);
    if (p.kind == DT_PLACEMENT_PARTIAL && p.op != DT_REDUCE_OP_SUM && p.op != DT_REDUCE_OP_AVG &&
        p.op != DT_REDUCE_OP_MAX && p.op != DT_REDUCE_OP_MIN)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s style: %s[%d] has an unknown Partial op %d", kind,
                      what, i, (int)p.op);
    return DT_OK;
}

static dt_status check_params(const dt__style_kind_ops *ops, const dt_style_params *p)
{
    uint64_t bad = p->field_mask & ~ops->allowed_fields;
    if (bad != 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s style: takes no option %s", ops->name,
                      field_name(bad & -bad));
    uint64_t missing = ops->required_fields & ~p->field_mask;
    if (missing != 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s style: option %s is required", ops->name,
                      field_name(missing & -missing));
    bool inputs = p->field_mask &
                  (DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS | DT_STYLE_PARAM_FIELD_DESIRED_INPUT_LAYOUTS);
    if (inputs && (p->n_inputs < 1 || p->n_inputs > DT_MODULE_MAX_INPUTS))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s style: n_inputs %d outside 1..%d", ops->name,
                      p->n_inputs, DT_MODULE_MAX_INPUTS);
    bool one_input = ops == &dt__style_colwise_ops || ops == &dt__style_rowwise_ops;
    if (inputs && one_input && p->n_inputs != 1)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s style: takes one input layout, got %d", ops->name,
                      p->n_inputs);
    for (int i = 0; inputs && i < p->n_inputs; i++) {
        DT_CHECK(check_layout(ops->name, "input_layouts", i, p->input_layouts[i], true));
        DT_CHECK(check_layout(ops->name, "desired_input_layouts", i, p->desired_input_layouts[i],
                              false));
    }
    DT_CHECK(check_layout(ops->name, "output_layout", 0, p->output_layout, true));
    DT_CHECK(check_layout(ops->name, "desired_output_layout", 0, p->desired_output_layout, false));
    if (((p->field_mask & DT_STYLE_PARAM_FIELD_PREPARE_INPUT) && p->prepare_input == NULL) ||
        ((p->field_mask & DT_STYLE_PARAM_FIELD_PREPARE_OUTPUT) && p->prepare_output == NULL))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s style: option %s is NULL", ops->name,
                      p->prepare_input == NULL ? "prepare_input" : "prepare_output");
    if ((p->field_mask & DT_STYLE_PARAM_FIELD_SEQUENCE_DIM) &&
        (p->sequence_dim < 0 || p->sequence_dim >= DT_MAX_DIMS))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s style: sequence_dim %d is outside 0..%d", ops->name,
                      p->sequence_dim, DT_MAX_DIMS - 1);
    return DT_OK;
}

dt_status dt_style_create(dt_style_kind kind, const dt_style_params *p, dt_style **out)
{
    if (kind == DT_STYLE_USER)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_style_create: a user style is made from its ops (dt_style_from_ops)");
    return dt__style_create_kind(kind, p, out);
}

dt_status dt__style_create_kind(dt_style_kind kind, const dt_style_params *p, dt_style **out)
{
    DT_ARG_NOT_NULL(out);
    const dt__style_kind_ops *ops = dt__style_kind_ops_of(kind);
    if (ops == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_style_create: unknown style kind %d", (int)kind);
    dt_style_params none = {0};
    if (p == NULL)
        p = &none;
    DT_CHECK(check_params(ops, p));
    dt_style *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_style_create: no memory");
    s->refcount = 1;
    s->kind = kind;
    s->set_fields = p->field_mask;
    if (p->field_mask &
        (DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS | DT_STYLE_PARAM_FIELD_DESIRED_INPUT_LAYOUTS))
        s->n_inputs = p->n_inputs;
    if (p->field_mask & DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS)
        memcpy(s->input_layouts, p->input_layouts, sizeof(s->input_layouts));
    if (p->field_mask & DT_STYLE_PARAM_FIELD_DESIRED_INPUT_LAYOUTS)
        memcpy(s->desired_input_layouts, p->desired_input_layouts,
               sizeof(s->desired_input_layouts));
    if (p->field_mask & DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT)
        s->output_layout = p->output_layout;
    if (p->field_mask & DT_STYLE_PARAM_FIELD_DESIRED_OUTPUT_LAYOUT)
        s->desired_output_layout = p->desired_output_layout;
    if (p->field_mask & DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT)
        s->use_local_output = p->use_local_output;
    if (p->field_mask & DT_STYLE_PARAM_FIELD_SEQUENCE_DIM)
        s->sequence_dim = p->sequence_dim;
    if (p->field_mask & DT_STYLE_PARAM_FIELD_PREPARE_INPUT)
        s->prepare_input = p->prepare_input;
    if (p->field_mask & DT_STYLE_PARAM_FIELD_PREPARE_OUTPUT)
        s->prepare_output = p->prepare_output;
    ops->defaults(s);
    *out = s;
    return DT_OK;
}

dt_status dt_style_colwise(dt_style **out)
{
    return dt_style_create(DT_STYLE_COLWISE, NULL, out);
}
dt_status dt_style_rowwise(dt_style **out)
{
    return dt_style_create(DT_STYLE_ROWWISE, NULL, out);
}
dt_status dt_style_sequence(dt_style **out)
{
    return dt_style_create(DT_STYLE_SEQUENCE, NULL, out);
}
dt_status dt_style_pairwise(dt_style **out)
{
    return dt_style_create(DT_STYLE_PAIRWISE, NULL, out);
}

dt_style *dt_style_retain(dt_style *s)
{
    if (s != NULL)
        s->refcount++;
    return s;
}

void dt_style_release(dt_style *s)
{
    if (s == NULL || --s->refcount > 0)
        return;
    free(s);
}

dt_style_kind dt_style_get_kind(const dt_style *s)
{
    return s != NULL ? s->kind : DT_STYLE_KIND_COUNT;
}

/* Append "name=value" of one option to the text at buf+*pos (snprintf rule). */
static void put(char *buf, size_t len, int *pos, bool *first, const char *fmt, const char *v)
{
    size_t at = (size_t)*pos < len ? (size_t)*pos : len;
    *pos += snprintf(buf + at, len - at, "%s", *first ? "(" : ", ");
    at = (size_t)*pos < len ? (size_t)*pos : len;
    *pos += snprintf(buf + at, len - at, fmt, v);
    *first = false;
}

static void layouts_text(int n, const dt_layout *l, char *buf, size_t len)
{
    int pos = 0;
    if (n > 1)
        pos += snprintf(buf, len, "[");
    for (int i = 0; i < n; i++) {
        size_t at = (size_t)pos < len ? (size_t)pos : len;
        if (i > 0)
            pos += snprintf(buf + at, len - at, ", ");
        at = (size_t)pos < len ? (size_t)pos : len;
        pos += dt__layout_format(l[i], buf + at, len - at);
    }
    size_t at = (size_t)pos < len ? (size_t)pos : len;
    if (n > 1)
        snprintf(buf + at, len - at, "]");
}

int dt_style_format(const dt_style *s, char *buf, size_t len)
{
    if (s == NULL)
        return snprintf(buf, len, "(null)");
    int pos =
        snprintf(buf, len, "%s", s->user != NULL ? s->user->name : dt_style_kind_name(s->kind));
    bool first = true;
    char v[160];
    uint64_t f = s->set_fields;
    if (f & DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS) {
        layouts_text(s->n_inputs, s->input_layouts, v, sizeof(v));
        put(buf, len, &pos, &first, "input=%s", v);
    }
    if (f & DT_STYLE_PARAM_FIELD_DESIRED_INPUT_LAYOUTS) {
        layouts_text(s->n_inputs, s->desired_input_layouts, v, sizeof(v));
        put(buf, len, &pos, &first, "desired=%s", v);
    }
    if (f & DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT) {
        dt__layout_format(s->output_layout, v, sizeof(v));
        put(buf, len, &pos, &first, "output=%s", v);
    }
    if (f & DT_STYLE_PARAM_FIELD_DESIRED_OUTPUT_LAYOUT) {
        dt__layout_format(s->desired_output_layout, v, sizeof(v));
        put(buf, len, &pos, &first, "desired_output=%s", v);
    }
    if (f & DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT)
        put(buf, len, &pos, &first, "local=%s", s->use_local_output ? "true" : "false");
    if (f & DT_STYLE_PARAM_FIELD_SEQUENCE_DIM) {
        snprintf(v, sizeof(v), "%d", s->sequence_dim);
        put(buf, len, &pos, &first, "seq_dim=%s", v);
    }
    if (f & DT_STYLE_PARAM_FIELD_PREPARE_INPUT) /* a function: not plan text */
        put(buf, len, &pos, &first, "prepare_input=%s", "<function>");
    if (f & DT_STYLE_PARAM_FIELD_PREPARE_OUTPUT)
        put(buf, len, &pos, &first, "prepare_output=%s", "<function>");
    if (!first) {
        size_t at = (size_t)pos < len ? (size_t)pos : len;
        pos += snprintf(buf + at, len - at, ")");
    }
    return pos;
}

bool dt__module_is(const dt_module *m, const dt_module_ops *type)
{
    return m != NULL && dt__module_ops_of(m) == type;
}

const dt_module_tp_param *dt__module_tp(const dt_module *m, dt_module_tp_kind *kind)
{
    const dt_module_ops *ops = dt__module_ops_of(m);
    *kind = ops->tp_kind;
    return ops->tp_kind != DT_MODULE_TP_NONE ? ops->tp_params : NULL;
}

dt_status dt__tp_param_plan(dt_module *m, const char *style, const char *fqn, bool colwise,
                            dt_style_param_plan *out, int *n)
{
    dt_module_tp_kind kind;
    const dt_module_tp_param *tp = dt__module_tp(m, &kind);
    if (tp == NULL)
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "parallelize: %s cannot shard '%s', a %s (it takes Linear, Embedding, or "
                      "a type whose dt_module_ops declare tp_kind and tp_params)",
                      style, fqn, dt_module_type_name(m));
    for (; tp->name != NULL; tp++) {
        if (dt_module_param(m, tp->name) == NULL)
            continue; /* an optional parameter (a bias) it does not have */
        int d = colwise ? tp->colwise_dim : tp->rowwise_dim;
        out[(*n)++] = (dt_style_param_plan){m, tp->name, d >= 0 ? dt_shard(d) : dt_replicate()};
    }
    return DT_OK;
}
