/*
 * Styles a program defines (dt_style_ops): a registry by name for plan text,
 * and the kind that runs them through the same validate-then-apply path and
 * the same hooks as the built-in styles.
 */
#include <ctype.h>
#include <pthread.h>
#include <string.h>

#include "core/error.h"
#include "styles/style_kind.h"

enum { USER_STYLES_MAX = 64 };
static const dt_style_ops *registry[USER_STYLES_MAX];
static int n_registered;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static dt_status check_ops(const char *fn, const dt_style_ops *ops)
{
    DT_ARG_NOT_NULL(ops);
    if (ops->name == NULL || ops->plan_params == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: dt_style_ops.%s is NULL", fn,
                      ops->name == NULL ? "name" : "plan_params");
    return DT_OK;
}

const dt_style_ops *dt__user_style_find(const char *name)
{
    const dt_style_ops *found = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_registered && found == NULL; i++)
        if (strcmp(registry[i]->name, name) == 0)
            found = registry[i];
    pthread_mutex_unlock(&lock);
    return found;
}

/* A name plan text can hold: letters, digits, '_' (not starting with a digit). */
static bool plain_name(const char *s)
{
    if (*s == '\0' || isdigit((unsigned char)*s))
        return false;
    for (; *s != '\0'; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return false;
    return true;
}

dt_status dt_style_register(const dt_style_ops *ops)
{
    DT_CHECK(check_ops(__func__, ops));
    if (!plain_name(ops->name))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_style_register: name '%s' is not letters, digits and '_'", ops->name);
    if (dt__style_builtin_name(ops->name) || dt__user_style_find(ops->name) != NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_style_register: a style named '%s' exists already",
                      ops->name);
    pthread_mutex_lock(&lock);
    dt_status st = DT_OK;
    if (n_registered == USER_STYLES_MAX)
        st = DT_ERR(DT_ERR_NO_MEMORY, "dt_style_register: %d styles registered already",
                    USER_STYLES_MAX);
    else
        registry[n_registered++] = ops;
    pthread_mutex_unlock(&lock);
    return st;
}

dt_status dt_style_from_ops(const dt_style_ops *ops, dt_style **out)
{
    DT_CHECK(check_ops(__func__, ops));
    DT_ARG_NOT_NULL(out);
    dt_style_params p = {0};
    DT_CHECK(dt__style_create_kind(DT_STYLE_USER, &p, out));
    (*out)->user = ops;
    (*out)->prepare_input = ops->prepare_input;
    (*out)->prepare_output = ops->prepare_output;
    return DT_OK;
}

static void user_defaults(dt_style *s)
{
    (void)s;
}

static dt_status user_plan(const dt_style *s, dt_module *m, const char *fqn,
                           dt_style_param_plan *out, int *n)
{
    dt_style_param_placement pp[DT_STYLE_MAX_PARAMS];
    int k = 0;
    dt_status st = s->user->plan_params(m, fqn, pp, &k);
    if (st != DT_OK)
        return DT_ERR(st, "parallelize: style '%s' refused '%s': %s", s->user->name, fqn,
                      dt__error_text(dt_last_error()));
    if (k < 0 || k > DT_STYLE_MAX_PARAMS)
        return DT_ERR(DT_ERR_INVALID_ARG, "parallelize: style '%s' placed %d parameters of '%s'",
                      s->user->name, k, fqn);
    for (int i = 0; i < k; i++) {
        if (pp[i].name == NULL || dt_module_param(m, pp[i].name) == NULL)
            return DT_ERR(DT_ERR_NOT_FOUND,
                          "parallelize: style '%s' placed parameter '%s' of '%s', which has none",
                          s->user->name, pp[i].name != NULL ? pp[i].name : "(null)", fqn);
        out[(*n)++] = (dt_style_param_plan){m, pp[i].name, pp[i].placement};
    }
    return DT_OK;
}

static dt_status user_hooks(const dt_style *s, dt_module *m, dt_mesh *tp)
{
    if (s->prepare_input == NULL && s->prepare_output == NULL)
        return DT_OK;
    dt__hook_ctx *c = NULL;
    DT_CHECK(dt__hook_ctx_new(s, DT_STYLE_USER, tp, &c));
    c->n_in = 1;
    return dt__hook_add(m, c, s->prepare_input != NULL, s->prepare_output != NULL);
}

const dt__style_kind_ops dt__style_user_ops = {
    .name = "user",
    .allowed_fields = 0,
    .defaults = user_defaults,
    .param_plan = user_plan,
    .add_hooks = user_hooks,
};
