/* train_gpt's mesh, plan and parallelization (see parallel.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "parallel.h"

dt_status train_parallel_init(train_parallel *p)
{
    *p = (train_parallel){.tp = 1};
    CHECK(dt_init(NULL, &p->rt));
    p->rank = dt_runtime_rank(p->rt);
    p->world = dt_runtime_size(p->rt);
    if (p->rank != 0 && freopen("/dev/null", "w", stdout) == NULL)
        return dt_set_error(DT_ERR_SYSTEM, "train_gpt: rank %d cannot silence stdout", p->rank);
    return DT_OK;
}

/* "dp=1,tp=4" -> dims; sizes >= 1, names unique (dt_mesh_create checks them again). */
static dt_status parse_mesh(const char *text, int *ndim, int *shape,
                            char names[DT_MESH_MAX_DIMS][DT_MESH_NAME_MAX])
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", text);
    int n = 0;
    for (char *save = NULL, *item = strtok_r(buf, ",", &save); item != NULL;
         item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '='), *end = NULL;
        if (eq == NULL || eq == item || n == DT_MESH_MAX_DIMS)
            return dt_set_error(
                DT_ERR_INVALID_ARG,
                "train_gpt: --mesh '%s': bad item '%s' (want name=size, at most %d)", text, item,
                DT_MESH_MAX_DIMS);
        *eq = '\0';
        long v = strtol(eq + 1, &end, 10);
        if (end == eq + 1 || *end != '\0' || v < 1 || v > 1 << 20 ||
            strlen(item) >= DT_MESH_NAME_MAX)
            return dt_set_error(DT_ERR_INVALID_ARG, "train_gpt: --mesh '%s': bad size '%s' of '%s'",
                                text, eq + 1, item);
        snprintf(names[n], DT_MESH_NAME_MAX, "%s", item);
        shape[n++] = (int)v;
    }
    if (n == 0)
        return dt_set_error(DT_ERR_INVALID_ARG, "train_gpt: --mesh '%s' names no dim", text);
    *ndim = n;
    return DT_OK;
}

dt_status train_mesh_dims(const train_parallel *p, const char *mesh_text, int *dp, bool *has_dp,
                          int *tp)
{
    int ndim = 0, shape[DT_MESH_MAX_DIMS];
    char names[DT_MESH_MAX_DIMS][DT_MESH_NAME_MAX] = {{0}};
    *dp = 1, *has_dp = false, *tp = mesh_text == NULL ? p->world : 1;
    if (mesh_text == NULL)
        return DT_OK;
    CHECK(parse_mesh(mesh_text, &ndim, shape, names));
    for (int d = 0; d < ndim && d < DT_MESH_MAX_DIMS; d++) {
        if (strcmp(names[d], "dp") == 0)
            *dp = shape[d], *has_dp = true;
        else if (strcmp(names[d], "tp") == 0)
            *tp = shape[d];
    }
    return DT_OK;
}

static dt_status make_mesh(train_parallel *p, const char *text)
{
    int ndim = 0, shape[DT_MESH_MAX_DIMS], tp_index = -1;
    char names[DT_MESH_MAX_DIMS][DT_MESH_NAME_MAX] = {{0}};
    CHECK(parse_mesh(text, &ndim, shape, names));
    for (int d = 0; d < ndim && d < DT_MESH_MAX_DIMS; d++) {
        if (strcmp(names[d], "tp") == 0)
            tp_index = d;
        else if (shape[d] != 1 && strcmp(names[d], "dp") != 0) /* dp: data_parallel.c */
            return dt_set_error(
                DT_ERR_UNSUPPORTED,
                "train_gpt: --mesh '%s': dim '%s' of size %d: only tensor ('tp') and "
                "data ('dp') parallelism are available; other dims must have size 1",
                text, names[d], shape[d]);
    }
    if (tp_index < 0)
        return dt_set_error(DT_ERR_INVALID_ARG, "train_gpt: --mesh '%s' has no 'tp' dim", text);
    const char *np[DT_MESH_MAX_DIMS];
    for (int d = 0; d < ndim; d++)
        np[d] = names[d];
    CHECK(dt_mesh_create(p->rt, ndim, shape, np, &p->mesh));
    p->tp = shape[tp_index];
    return DT_OK;
}

dt_status train_parallel_apply(train_parallel *p, const char *mesh_text, bool sp,
                               const char *plan_path, bool explain, dt_module *model)
{
    char def[32];
    if (mesh_text == NULL) {
        if (p->world == 1 && !sp && plan_path == NULL && !explain)
            return DT_OK; /* one process, nothing asked: the plain model */
        snprintf(def, sizeof(def), "tp=%d", p->world);
        mesh_text = def;
    }
    CHECK(make_mesh(p, mesh_text));
    dt_plan *plan = NULL;
    if (plan_path != NULL)
        CHECK(dt_plan_load(plan_path, &plan));
    else
        CHECK(dt_plan_gpt_default(sp, &plan));
    dt_status s = DT_OK;
    if (explain && p->rank == 0)
        s = dt_plan_explain(model, p->mesh, plan, "tp", stdout);
    if (s == DT_OK)
        s = dt_parallelize_module(model, p->mesh, plan, "tp");
    if (s == DT_OK)
        printf("mesh %s (%d ranks), plan %s%s\n", mesh_text, p->world,
               plan_path != NULL ? plan_path : "default",
               sp && plan_path == NULL ? " + sequence parallel" : "");
    dt_plan_destroy(plan);
    return s;
}

void train_parallel_destroy(train_parallel *p)
{
    if (p->rt != NULL)
        dt_comm_barrier(dt_runtime_world(p->rt), NULL);
    dt_mesh_release(p->mesh);
    dt_runtime_destroy(p->rt);
    *p = (train_parallel){0};
}
