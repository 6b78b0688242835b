/*
 * The plan text form (see dt_plan_parse in styles.h):
 *
 *   plan   := entry { (';' | newline) entry }      '#' starts a comment
 *   entry  := key '=' style | (empty)
 *   style  := name [ '(' option { ',' option } ')' ]
 *   option := word '=' value;  value := layout | '[' layout { ',' layout } ']' | word
 *
 * Every error names the entry (its text) and the token that is wrong.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file_open.h"
#include "styles/style_impl.h"

#define ENTRY_MAX 1024

typedef struct entry_ctx {
    const char *text; /* the entry, for messages */
    int index;        /* 1-based */
} entry_ctx;

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* Split @p s at the first @p sep outside parentheses/brackets; returns the rest or NULL. */
static char *split_top(char *s, char sep)
{
    int depth = 0;
    for (char *c = s; *c != '\0'; c++) {
        if (*c == '(' || *c == '[')
            depth++;
        else if (*c == ')' || *c == ']')
            depth--;
        else if (*c == sep && depth == 0) {
            *c = '\0';
            return c + 1;
        }
    }
    return NULL;
}

static dt_status bad(const entry_ctx *e, const char *what, const char *token)
{
    return DT_ERR(DT_ERR_INVALID_ARG, "dt_plan_parse: entry %d '%s': %s '%s'", e->index, e->text,
                  what, token);
}

/* "S(1)" or "[S(1), None]" into @p out; *n layouts. */
static dt_status parse_layouts(const entry_ctx *e, char *v, dt_layout *out, int *n)
{
    size_t len = strlen(v);
    *n = 0;
    if (len >= 2 && v[0] == '[' && v[len - 1] == ']') {
        v[len - 1] = '\0';
        char *item = v + 1;
        while (item != NULL) {
            char *rest = split_top(item, ',');
            char *t = trim(item);
            if (*n == DT_MODULE_MAX_INPUTS)
                return bad(e, "too many layouts at", t);
            if (dt__layout_parse(t, &out[*n]) != DT_OK)
                return bad(e, "bad layout", t);
            (*n)++;
            item = rest;
        }
        return DT_OK;
    }
    if (dt__layout_parse(v, &out[0]) != DT_OK)
        return bad(e, "bad layout", v);
    *n = 1;
    return DT_OK;
}

static dt_status parse_bool(const entry_ctx *e, const char *v, bool *out)
{
    if (strcmp(v, "true") == 0 || strcmp(v, "True") == 0 || strcmp(v, "1") == 0)
        *out = true;
    else if (strcmp(v, "false") == 0 || strcmp(v, "False") == 0 || strcmp(v, "0") == 0)
        *out = false;
    else
        return bad(e, "expected true or false, got", v);
    return DT_OK;
}

static dt_status parse_option(const entry_ctx *e, char *opt, dt_style_params *p)
{
    char *v = split_top(opt, '=');
    char *k = trim(opt);
    if (v == NULL)
        return bad(e, "option without '=':", k);
    v = trim(v);
    dt_layout l[DT_MODULE_MAX_INPUTS];
    int n = 0;
    if (strcmp(k, "input") == 0 || strcmp(k, "input_layouts") == 0) {
        DT_CHECK(parse_layouts(e, v, p->input_layouts, &n));
        p->field_mask |= DT_STYLE_PARAM_FIELD_INPUT_LAYOUTS;
    } else if (strcmp(k, "desired") == 0 || strcmp(k, "desired_input") == 0 ||
               strcmp(k, "desired_input_layouts") == 0) {
        DT_CHECK(parse_layouts(e, v, p->desired_input_layouts, &n));
        p->field_mask |= DT_STYLE_PARAM_FIELD_DESIRED_INPUT_LAYOUTS;
    } else if (strcmp(k, "output") == 0 || strcmp(k, "output_layouts") == 0) {
        DT_CHECK(parse_layouts(e, v, l, &n));
        if (n != 1)
            return bad(e, "one output layout expected, got", v);
        p->output_layout = l[0];
        p->field_mask |= DT_STYLE_PARAM_FIELD_OUTPUT_LAYOUT;
        return DT_OK;
    } else if (strcmp(k, "desired_output") == 0 || strcmp(k, "desired_output_layouts") == 0) {
        DT_CHECK(parse_layouts(e, v, l, &n));
        if (n != 1)
            return bad(e, "one desired output layout expected, got", v);
        p->desired_output_layout = l[0];
        p->field_mask |= DT_STYLE_PARAM_FIELD_DESIRED_OUTPUT_LAYOUT;
        return DT_OK;
    } else if (strcmp(k, "local") == 0 || strcmp(k, "use_local_output") == 0) {
        p->field_mask |= DT_STYLE_PARAM_FIELD_USE_LOCAL_OUTPUT;
        return parse_bool(e, v, &p->use_local_output);
    } else if (strcmp(k, "seq_dim") == 0 || strcmp(k, "sequence_dim") == 0) {
        char *end = NULL;
        errno = 0;
        long d = strtol(v, &end, 10);
        if (errno != 0 || end == v || *end != '\0' || d < 0 || d >= 8)
            return bad(e, "bad sequence dim", v);
        p->sequence_dim = (int)d;
        p->field_mask |= DT_STYLE_PARAM_FIELD_SEQUENCE_DIM;
        return DT_OK;
    } else {
        return bad(e, "unknown option", k);
    }
    /* input layouts: both lists must agree on their length */
    if (p->n_inputs != 0 && p->n_inputs != n)
        return bad(e, "input and desired layouts differ in length at", v);
    p->n_inputs = n;
    return DT_OK;
}

static dt_status parse_style(const entry_ctx *e, char *text, dt_style **out)
{
    char *open = strchr(text, '(');
    char *opts = NULL;
    if (open != NULL) {
        size_t len = strlen(open);
        if (open[len - 1] != ')')
            return bad(e, "missing ')' after", open);
        open[len - 1] = '\0';
        *open = '\0';
        opts = open + 1;
    }
    char *name = trim(text);
    const dt_style_ops *ops = NULL; /* built-in or registered: one table */
    if (dt_style_find(name, &ops) != DT_OK)
        return bad(e, "unknown style", name);
    dt_style_params p = {0};
    while (opts != NULL) {
        char *rest = split_top(opts, ',');
        char *o = trim(opts);
        if (*o != '\0' || rest != NULL)
            DT_CHECK(parse_option(e, o, &p));
        opts = rest;
    }
    if (dt_style_create_ops(ops, &p, out) != DT_OK)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_plan_parse: entry %d '%s': %s", e->index, e->text,
                      dt_last_error());
    return DT_OK;
}

static dt_status parse_entry(dt_plan *plan, char *raw, int index)
{
    char copy[ENTRY_MAX];
    char *t = trim(raw);
    if (*t == '\0')
        return DT_OK;
    snprintf(copy, sizeof(copy), "%s", t);
    entry_ctx e = {.text = copy, .index = index};
    char *eq = strchr(t, '=');
    if (eq == NULL)
        return bad(&e, "no '=' in", t);
    *eq = '\0';
    char *key = trim(t); /* empty: the root module itself, as dt_plan_add's "" */
    for (char *c = key; *c != '\0'; c++)
        if (isspace((unsigned char)*c) || *c == '(' || *c == ')')
            return bad(&e, "bad key", key);
    dt_style *style = NULL;
    DT_CHECK(parse_style(&e, eq + 1, &style));
    dt_status s = dt_plan_add(plan, key, style);
    dt_style_release(style);
    if (s != DT_OK)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_plan_parse: entry %d '%s': %s", index, copy,
                      dt_last_error());
    return DT_OK;
}

dt_status dt_plan_parse(const char *text, dt_plan **out)
{
    DT_ARG_NOT_NULL(text);
    DT_ARG_NOT_NULL(out);
    char *buf = strdup(text);
    if (buf == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_plan_parse: no memory");
    /* comments go first, so a '#' line may hold anything */
    for (char *c = buf; *c != '\0'; c++)
        if (*c == '#')
            while (*c != '\0' && *c != '\n')
                *c++ = ' ';
    dt_plan *plan = NULL;
    dt_status s;
    DT_CHECK_GOTO(dt_plan_create(&plan), s, out_free);
    int index = 0;
    char *cur = buf;
    while (cur != NULL) {
        char *end = cur + strcspn(cur, ";\n");
        char *next = *end != '\0' ? end + 1 : NULL;
        *end = '\0';
        if (strlen(cur) >= ENTRY_MAX) {
            s = DT_ERR(DT_ERR_INVALID_ARG, "dt_plan_parse: entry %d longer than %d characters",
                       index + 1, ENTRY_MAX - 1);
            goto out_free;
        }
        if (*trim(cur) != '\0')
            DT_CHECK_GOTO(parse_entry(plan, cur, ++index), s, out_free);
        cur = next;
    }
    *out = plan;
    plan = NULL;
    s = DT_OK;
out_free:
    dt_plan_destroy(plan);
    free(buf);
    return s;
}

dt_status dt_plan_load(const char *path, dt_plan **out)
{
    DT_ARG_NOT_NULL(path);
    DT_ARG_NOT_NULL(out);
    FILE *f = NULL;
    DT_CHECK(dt__fopen_regular("dt_plan_load", path, &f, NULL));
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    dt_status s = DT_OK;
    if (mem == NULL) {
        fclose(f);
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_plan_load: no memory");
    }
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0)
        fwrite(chunk, 1, got, mem);
    if (ferror(f))
        s = DT_ERR(DT_ERR_SYSTEM, "dt_plan_load: reading '%s': %s", path, strerror(errno));
    fclose(f);
    fclose(mem);
    if (s == DT_OK && strlen(text) != len)
        s = DT_ERR(DT_ERR_FORMAT, "dt_plan_load: '%s' holds a NUL byte", path);
    if (s == DT_OK)
        s = dt_plan_parse(text, out);
    free(text);
    return s;
}
