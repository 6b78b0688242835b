/* GPT helpers for the checkpoint tests: parameter lists and comparisons. */
#ifndef DT_TEST_CK_GPT_UTIL_H
#define DT_TEST_CK_GPT_UTIL_H

#include "ck_test_util.h"

#define CK_MAX_PARAMS 256

typedef struct ck_params {
    int n;
    char fqn[CK_MAX_PARAMS][128];
    char name[CK_MAX_PARAMS][32];
    dt_module *owner[CK_MAX_PARAMS];
    dt_tensor *t[CK_MAX_PARAMS]; /* borrowed */
} ck_params;

static inline dt_status ck_params_visit(const char *fqn, dt_module *owner, const char *name,
                                       dt_tensor *param, void *user)
{
    ck_params *p = user;
    if (p->n == CK_MAX_PARAMS)
        return DT_ERR_INVALID_ARG;
    snprintf(p->fqn[p->n], sizeof(p->fqn[0]), "%s", fqn);
    snprintf(p->name[p->n], sizeof(p->name[0]), "%s", name);
    p->owner[p->n] = owner;
    p->t[p->n] = param;
    p->n++;
    return DT_OK;
}

static inline void ck_params_of(dt_module *m, ck_params *p)
{
    p->n = 0;
    CK_OK(dt_module_foreach_param(m, ck_params_visit, p));
}

static inline dt_module *ck_gpt(const char *preset, uint64_t seed)
{
    dt_gpt_config cfg;
    dt_module *m = NULL;
    CK_OK(dt_gpt_config_preset(preset, &cfg));
    CK_OK(dt_gpt_create(&cfg, seed, &m));
    return m;
}

/* Clones of every (local) parameter of @p m, to check it later. */
static inline void ck_snapshot(dt_module *m, dt_tensor **out, int *n)
{
    ck_params p;
    ck_params_of(m, &p);
    for (int i = 0; i < p.n; i++)
        CK_OK(dt_tensor_clone(p.t[i], &out[i]));
    *n = p.n;
}

/* Every parameter of @p m equals @p snap (local parameters). */
static inline void ck_assert_params(dt_module *m, dt_tensor **snap, int n, const char *what)
{
    ck_params p;
    ck_params_of(m, &p);
    assert_int_equal(p.n, n);
    for (int i = 0; i < n; i++)
        if (!dt_tensor_equal(p.t[i], snap[i]))
            fail_msg("%s: parameter %s differs", what, p.fqn[i]);
}

static inline void ck_release_all(dt_tensor **t, int n)
{
    for (int i = 0; i < n; i++)
        dt_tensor_release(t[i]);
}

#endif
