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

/* The device the tests' models live on: DT_DEVICE's when it names one (ctest
 * runs the multi-rank checkpoint tests on cpu and on sim), else the CPU. */
static inline dt_device ck_device(void)
{
    dt_device d = dt_device_cpu();
    const char *name = getenv("DT_DEVICE");
    if (name != NULL && strcmp(name, "auto") != 0)
        CK_OK(dt_device_parse(name, &d));
    return d;
}

/* A GPT of @p preset initialised from @p seed, on ck_device(). */
static inline dt_module *ck_gpt(const char *preset, uint64_t seed)
{
    dt_gpt_config cfg;
    dt_module *m = NULL;
    CK_OK(dt_gpt_config_preset(preset, &cfg));
    CK_OK(dt_gpt_create(&cfg, seed, &m));
    CK_OK(dt_module_to(m, ck_device()));
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

/* Placements of parameter @p i on a mesh of @p nd dims, into @p pl. */
typedef void (*ck_place_fn)(int i, int nd, dt_placement *pl, void *user);

/* Replace every parameter of @p m by dt_distribute of it on @p mesh. */
static inline void ck_shard_model(dt_module *m, dt_mesh *mesh, ck_place_fn place, void *user)
{
    ck_params p;
    ck_params_of(m, &p);
    int nd = dt_mesh_ndim(mesh);
    for (int i = 0; i < p.n; i++) {
        dt_placement pl[DT_MESH_MAX_DIMS];
        place(i, nd, pl, user);
        dt_tensor *d = NULL;
        CK_OK(dt_distribute(p.t[i], mesh, nd, pl, &d));
        CK_OK(dt_module_param_set(p.owner[i], p.name[i], d));
        dt_tensor_release(d);
    }
}

/* Every parameter of @p m (local or distributed) equals the local one of @p ref. */
static inline void ck_assert_same_weights(dt_module *m, dt_module *ref, const char *what)
{
    ck_params pm, pr;
    ck_params_of(m, &pm);
    ck_params_of(ref, &pr);
    assert_int_equal(pm.n, pr.n);
    for (int i = 0; i < pm.n; i++) {
        dt_tensor *g = NULL;
        if (dt_tensor_is_distributed(pm.t[i]))
            CK_OK(dt_full_tensor(pm.t[i], &g));
        else
            g = dt_tensor_retain(pm.t[i]);
        if (!dt_tensor_equal(g, pr.t[i]))
            fail_msg("%s: %s differs", what, pm.fqn[i]);
        dt_tensor_release(g);
    }
}

#endif
