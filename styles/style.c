/*
 * dt_style objects: a style's ops with its field-masked options (checked,
 * then the style's defaults), layouts, the kind query, printing.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "styles/builtin_styles.h"

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

/* The built-in style of each kind: only dt_style_create and the kind query use it. */
static const dt_style_ops *const kind_ops[DT_STYLE_USER] = {
    [DT_STYLE_COLWISE] = &dt__style_colwise,
    [DT_STYLE_ROWWISE] = &dt__style_rowwise,
    [DT_STYLE_SEQUENCE] = &dt__style_sequence,
    [DT_STYLE_PREPARE_INPUT] = &dt__style_prepare_input,
    [DT_STYLE_PREPARE_OUTPUT] = &dt__style_prepare_output,
    [DT_STYLE_PAIRWISE] = &dt__style_pairwise,
};

const char *dt_style_kind_name(dt_style_kind k)
{
    if (k == DT_STYLE_USER)
        return "user";
    if ((int)k < 0 || k > DT_STYLE_USER)
        return "unknown";
    return kind_ops[k]->name;
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
dt_status dt__layout_check(const char *who, const char *what, int i, dt_layout l, bool partial_ok)
{
    if (!l.present)
        return DT_OK;
    dt_placement p = l.placement;
    if (p.kind == DT_PLACEMENT_SHARD && p.dim < -1)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s style: %s[%d] S(%d): use a dim >= 0 or -1", who, what,
                      i, p.dim);
    if (p.kind == DT_PLACEMENT_SHARD && p.dim >= DT_MAX_DIMS)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s style: %s[%d] S(%d): no tensor has that dim (at most %d dims)", who, what,
                      i, p.dim, DT_MAX_DIMS);
    if (p.kind == DT_PLACEMENT_PARTIAL && !partial_ok)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s style: %s[%d] cannot be Partial", who, what, i);
    if (p.kind == DT_PLACEMENT_PARTIAL && p.op != DT_REDUCE_OP_SUM && p.op != DT_REDUCE_OP_AVG &&
        p.op != DT_REDUCE_OP_MAX && p.op != DT_REDUCE_OP_MIN)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s style: %s[%d] has an unknown Partial op %d", who,
                      what, i, (int)p.op);
    return DT_OK;
}

enum {
    ALL_PARAM_FIELDS = (DT_STYLE_PARAM_FIELD_PREPARE_OUTPUT << 1) - 1,
    ALL_OPS_FIELDS =
        DT_STYLE_OPS_FIELD_OPTIONS | DT_STYLE_OPS_FIELD_PLAN_IO | DT_STYLE_OPS_FIELD_CHILDREN,
};

/* The members past the first form, each set only with its field bit. */
static dt_status check_ops_fields(const char *fn, const dt_style_ops *ops)
{
    uint64_t f = ops->field_mask;
    if (f & ~(uint64_t)ALL_OPS_FIELDS)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: style '%s': unknown field_mask bits 0x%llx", fn,
                      ops->name, (unsigned long long)(f & ~(uint64_t)ALL_OPS_FIELDS));
    const struct {
        bool set;
        uint64_t bit;
        const char *member, *field;
    } m[] = {
        {ops->options != 0 || ops->required_options != 0 || ops->defaults != NULL,
         DT_STYLE_OPS_FIELD_OPTIONS, "options", "DT_STYLE_OPS_FIELD_OPTIONS"},
        {ops->plan_io != NULL, DT_STYLE_OPS_FIELD_PLAN_IO, "plan_io", "DT_STYLE_OPS_FIELD_PLAN_IO"},
        {ops->children != NULL, DT_STYLE_OPS_FIELD_CHILDREN, "children",
         "DT_STYLE_OPS_FIELD_CHILDREN"},
    };
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
        if (m[i].set && !(f & m[i].bit))
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "%s: style '%s': dt_style_ops.%s is set but field_mask lacks %s", fn,
                          ops->name, m[i].member, m[i].field);
    return DT_OK;
}

/* The lowest bit of @p bits named. */
static const char *first_field(uint64_t bits)
{
    return field_name(bits & -bits);
}

dt_status dt__style_ops_check(const char *fn, const dt_style_ops *ops)
{
    if (ops == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'ops' is NULL", fn);
    if (ops->name == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: dt_style_ops.name is NULL", fn);
    DT_CHECK(check_ops_fields(fn, ops));
    uint64_t unknown = ops->options & ~(uint64_t)ALL_PARAM_FIELDS;
    if (unknown != 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: style '%s': unknown options bits 0x%llx", fn,
                      ops->name, (unsigned long long)unknown);
    uint64_t extra = ops->required_options & ~ops->options;
    if (extra != 0)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: style '%s': required option %s is not among its options", fn, ops->name,
                      first_field(extra));
    return DT_OK;
}

/* The options @p p gives, against what style @p ops takes. */
static dt_status check_params(const dt_style_ops *ops, const dt_style_params *p)
{
    const char *who = ops->name;
    uint64_t bad = p->field_mask & ~ops->options;
    if (bad != 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s style: takes no option %s", who, first_field(bad));
    uint64_t missing = ops->required_options & ~p->field_mask;
    if (missing != 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s style: option %s is required", who,
                      first_field(missing));
    bool inputs = p->field_mask &
                  (DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS | DT_STYLE_PARAM_FIELD_DESIRED_INPUT_LAYOUTS);
    if (inputs && (p->n_inputs < 1 || p->n_inputs > DT_MODULE_MAX_INPUTS))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s style: n_inputs %d outside 1..%d", who, p->n_inputs,
                      DT_MODULE_MAX_INPUTS);
    for (int i = 0; inputs && i < p->n_inputs; i++) {
        DT_CHECK(dt__layout_check(who, "input_layouts", i, p->input_layouts[i], true));
        DT_CHECK(
            dt__layout_check(who, "desired_input_layouts", i, p->desired_input_layouts[i], false));
    }
    DT_CHECK(dt__layout_check(who, "output_layout", 0, p->output_layout, true));
    DT_CHECK(dt__layout_check(who, "desired_output_layout", 0, p->desired_output_layout, false));
    if (((p->field_mask & DT_STYLE_PARAM_FIELD_PREPARE_INPUT) && p->prepare_input == NULL) ||
        ((p->field_mask & DT_STYLE_PARAM_FIELD_PREPARE_OUTPUT) && p->prepare_output == NULL))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s style: option %s is NULL", who,
                      p->prepare_input == NULL ? "prepare_input" : "prepare_output");
    if ((p->field_mask & DT_STYLE_PARAM_FIELD_SEQUENCE_DIM) &&
        (p->sequence_dim < 0 || p->sequence_dim >= DT_MAX_DIMS))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s style: sequence_dim %d is outside 0..%d", who,
                      p->sequence_dim, DT_MAX_DIMS - 1);
    return DT_OK;
}

/* The options given in @p p, each field only when its bit is set. */
static dt_style_params given_options(const dt_style_params *p)
{
    dt_style_params o = {.field_mask = p->field_mask};
    uint64_t f = p->field_mask;
    if (f & (DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS | DT_STYLE_PARAM_FIELD_DESIRED_INPUT_LAYOUTS))
        o.n_inputs = p->n_inputs;
    if (f & DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS)
        memcpy(o.input_layouts, p->input_layouts, sizeof(o.input_layouts));
    if (f & DT_STYLE_PARAM_FIELD_DESIRED_INPUT_LAYOUTS)
        memcpy(o.desired_input_layouts, p->desired_input_layouts, sizeof(o.desired_input_layouts));
    if (f & DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT)
        o.output_layout = p->output_layout;
    if (f & DT_STYLE_PARAM_FIELD_DESIRED_OUTPUT_LAYOUT)
        o.desired_output_layout = p->desired_output_layout;
    if (f & DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT)
        o.use_local_output = p->use_local_output;
    if (f & DT_STYLE_PARAM_FIELD_SEQUENCE_DIM)
        o.sequence_dim = p->sequence_dim;
    if (f & DT_STYLE_PARAM_FIELD_PREPARE_INPUT)
        o.prepare_input = p->prepare_input;
    if (f & DT_STYLE_PARAM_FIELD_PREPARE_OUTPUT)
        o.prepare_output = p->prepare_output;
    return o;
}

dt_status dt_style_create_ops(const dt_style_ops *ops, const dt_style_params *p, dt_style **out)
{
    DT_CHECK(dt__style_ops_check(__func__, ops));
    DT_ARG_NOT_NULL(out);
    dt_style_params none = {0};
    if (p == NULL)
        p = &none;
    DT_CHECK(check_params(ops, p));
    dt_style_params opt = given_options(p);
    if ((ops->field_mask & DT_STYLE_OPS_FIELD_OPTIONS) && ops->defaults != NULL) {
        dt_status st = ops->defaults(&opt);
        if (st != DT_OK)
            return DT_ERR(st, "%s style: %s", ops->name, dt__error_text(dt_last_error()));
        opt.field_mask = p->field_mask; /* what was given, whatever defaults did */
    }
    dt_style *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_style_create: no memory");
    s->refcount = 1;
    s->ops = ops;
    s->opt = opt;
    *out = s;
    return DT_OK;
}

dt_status dt_style_from_ops(const dt_style_ops *ops, dt_style **out)
{
    return dt_style_create_ops(ops, NULL, out);
}

dt_status dt_style_create(dt_style_kind kind, const dt_style_params *p, dt_style **out)
{
    if (kind == DT_STYLE_USER)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_style_create: a user style is made from its ops (dt_style_create_ops)");
    if ((int)kind < 0 || kind > DT_STYLE_USER)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_style_create: unknown style kind %d", (int)kind);
    return dt_style_create_ops(kind_ops[kind], p, out);
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
    if (s == NULL)
        return DT_STYLE_KIND_COUNT;
    for (int k = 0; k < DT_STYLE_USER; k++)
        if (kind_ops[k] == s->ops)
            return (dt_style_kind)k;
    return DT_STYLE_USER;
}

const dt_style_ops *dt_style_get_ops(const dt_style *s)
{
    return s != NULL ? s->ops : NULL;
}

const dt_style_params *dt_style_options(const dt_style *s)
{
    return s != NULL ? &s->opt : NULL;
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
    int pos = snprintf(buf, len, "%s", s->ops->name);
    bool first = true;
    char v[160];
    uint64_t f = s->opt.field_mask;
    const dt_style_params *o = &s->opt;
    if (f & DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS) {
        layouts_text(o->n_inputs, o->input_layouts, v, sizeof(v));
        put(buf, len, &pos, &first, "input=%s", v);
    }
    if (f & DT_STYLE_PARAM_FIELD_DESIRED_INPUT_LAYOUTS) {
        layouts_text(o->n_inputs, o->desired_input_layouts, v, sizeof(v));
        put(buf, len, &pos, &first, "desired=%s", v);
    }
    if (f & DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT) {
        dt__layout_format(o->output_layout, v, sizeof(v));
        put(buf, len, &pos, &first, "output=%s", v);
    }
    if (f & DT_STYLE_PARAM_FIELD_DESIRED_OUTPUT_LAYOUT) {
        dt__layout_format(o->desired_output_layout, v, sizeof(v));
        put(buf, len, &pos, &first, "desired_output=%s", v);
    }
    if (f & DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT)
        put(buf, len, &pos, &first, "local=%s", o->use_local_output ? "true" : "false");
    if (f & DT_STYLE_PARAM_FIELD_SEQUENCE_DIM) {
        snprintf(v, sizeof(v), "%d", o->sequence_dim);
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
