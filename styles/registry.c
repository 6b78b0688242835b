/*
 * The one table of styles by name: the built-in ones (and PyTorch's class
 * names for them) are in it from the start, dt_style_register adds a
 * program's. Plan text and dt_style_find look names up here, so a built-in
 * and a program's style are found, created and run the same way.
 */
#include <ctype.h>
#include <pthread.h>
#include <string.h>

#include "core/error.h"
#include "styles/builtin_styles.h"

typedef struct named_style {
    const char *name;
    const dt_style_ops *ops;
} named_style;

enum { BUILTIN_NAMES = 12, USER_STYLES_MAX = 64 };

static named_style table[BUILTIN_NAMES + USER_STYLES_MAX] = {
    {"colwise", &dt__style_colwise},
    {"ColwiseParallel", &dt__style_colwise},
    {"rowwise", &dt__style_rowwise},
    {"RowwiseParallel", &dt__style_rowwise},
    {"sequence", &dt__style_sequence},
    {"SequenceParallel", &dt__style_sequence},
    {"prepare_input", &dt__style_prepare_input},
    {"PrepareModuleInput", &dt__style_prepare_input},
    {"prepare_output", &dt__style_prepare_output},
    {"PrepareModuleOutput", &dt__style_prepare_output},
    {"pairwise", &dt__style_pairwise},
    {"PairwiseParallel", &dt__style_pairwise},
};
static int n_names = BUILTIN_NAMES;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The entry named @p name, or NULL; the caller holds the lock. */
static const named_style *lookup(const char *name)
{
    for (int i = 0; i < n_names; i++)
        if (strcmp(table[i].name, name) == 0)
            return &table[i];
    return NULL;
}

dt_status dt_style_find(const char *name, const dt_style_ops **out)
{
    DT_ARG_NOT_NULL(name);
    DT_ARG_NOT_NULL(out);
    pthread_mutex_lock(&lock);
    const named_style *e = lookup(name);
    const dt_style_ops *ops = e != NULL ? e->ops : NULL;
    pthread_mutex_unlock(&lock);
    if (ops == NULL)
        return DT_ERR(DT_ERR_NOT_FOUND, "dt_style_find: no style named '%s'", name);
    *out = ops;
    return DT_OK;
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
    DT_CHECK(dt__style_ops_check(__func__, ops));
    if (!plain_name(ops->name))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_style_register: name '%s' is not letters, digits and '_'", ops->name);
    pthread_mutex_lock(&lock);
    const named_style *e = lookup(ops->name);
    dt_status st = DT_OK;
    if (e != NULL)
        st = DT_ERR(DT_ERR_INVALID_ARG, "dt_style_register: a style named '%s' exists already (%s)",
                    ops->name, e - table < BUILTIN_NAMES ? "built-in" : "registered");
    else if (n_names == BUILTIN_NAMES + USER_STYLES_MAX)
        st = DT_ERR(DT_ERR_NO_MEMORY, "dt_style_register: %d styles registered already",
                    USER_STYLES_MAX);
    else
        table[n_names++] = (named_style){ops->name, ops};
    pthread_mutex_unlock(&lock);
    return st;
}
