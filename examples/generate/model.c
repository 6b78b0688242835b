/* generate's model (see model.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define CHECK(call)                                                                                \
    do {                                                                                           \
        dt_status check_s_ = (call);                                                               \
        if (check_s_ != DT_OK)                                                                     \
            return check_s_;                                                                       \
    } while (0)

/* The integer after "key": in the flat JSON object @p json. */
static dt_status json_int(const char *json, const char *path, const char *key, int64_t *out)
{
    char quoted[64];
    snprintf(quoted, sizeof(quoted), "\"%s\"", key);
    const char *p = strstr(json, quoted);
    if (p != NULL) {
        p += strlen(quoted);
        p += strspn(p, " \t\r\n");
        if (*p++ == ':') {
            char *end = NULL;
            long long v = strtoll(p, &end, 10);
            if (end != p && v > 0) {
                *out = v;
                return DT_OK;
            }
        }
    }
    return dt_set_error(DT_ERR_FORMAT, "generate: %s has no positive integer \"%s\"", path, key);
}

/* The sizes in <dir>/config.json (train_gpt writes it with the checkpoint). */
static dt_status read_config(const char *dir, dt_gpt_config *c)
{
    char path[4096], json[4096];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return dt_set_error(DT_ERR_SYSTEM,
                            "generate: --checkpoint '%s': cannot read %s: %s (train_gpt "
                            "--save-checkpoint DIR writes it)",
                            dir, path, strerror(errno));
    size_t n = fread(json, 1, sizeof(json) - 1, f);
    fclose(f);
    json[n] = '\0';
    if (strstr(json, "\"tokenizer\"") != NULL && strstr(json, "\"bytes\"") == NULL)
        return dt_set_error(DT_ERR_FORMAT, "generate: %s: the tokenizer is not \"bytes\"", path);
    CHECK(json_int(json, path, "vocab_size", &c->vocab_size));
    CHECK(json_int(json, path, "max_seq_len", &c->max_seq_len));
    CHECK(json_int(json, path, "dim", &c->dim));
    CHECK(json_int(json, path, "n_layers", &c->n_layers));
    CHECK(json_int(json, path, "n_heads", &c->n_heads));
    return json_int(json, path, "ffn_dim", &c->ffn_dim);
}

/* "tp=N": N must be the world size and divide the heads (whole heads per rank). */
static dt_status parse_mesh(const gen_model *g, const char *text, int *tp)
{
    char *end = NULL;
    long v = strncmp(text, "tp=", 3) == 0 ? strtol(text + 3, &end, 10) : 0;
    if (end == NULL || end == text + 3 || *end != '\0' || v < 1)
        return dt_set_error(DT_ERR_INVALID_ARG, "generate: --mesh '%s' (expected tp=N, N >= 1)",
                            text);
    if (v != g->world)
        return dt_set_error(DT_ERR_INVALID_ARG,
                            "generate: --mesh '%s' needs %ld processes, this run has %d (launch "
                            "with dtrun -n %ld)",
                            text, v, g->world, v);
    if (g->cfg.n_heads % v != 0)
        return dt_set_error(DT_ERR_INVALID_ARG,
                            "generate: --mesh '%s': the model's %" PRId64
                            " heads do not split evenly over %ld ranks (colwise wq/wk/wv give "
                            "each rank whole heads)",
                            text, g->cfg.n_heads, v);
    *tp = (int)v;
    return DT_OK;
}

/* The GPT without storage, sharded by the spec's plan, then each rank's shards. */
static dt_status build(gen_model *g)
{
    dt_nn_deferred_begin();
    dt_status s = dt_gpt_create(&g->cfg, 0, &g->gpt);
    dt_nn_deferred_end();
    CHECK(s);
    CHECK(dt_module_to(g->gpt, g->device));
    const char *names[1] = {"tp"};
    CHECK(dt_mesh_create(g->rt, 1, &g->tp, names, &g->mesh));
    dt_plan *plan = NULL;
    CHECK(dt_plan_gpt_default(false, &plan));
    s = dt_parallelize_module(g->gpt, g->mesh, plan, "tp");
    dt_plan_destroy(plan);
    CHECK(s);
    return dt_module_materialize(g->gpt);
}

dt_status gen_model_open(gen_model *g, const char *dir, const char *mesh_text)
{
    *g = (gen_model){.tp = 1};
    CHECK(dt_init(NULL, &g->rt));
    g->rank = dt_runtime_rank(g->rt);
    g->world = dt_runtime_size(g->rt);
    g->device = dt_runtime_device(g->rt);
    if (g->rank != 0 && freopen("/dev/null", "w", stdout) == NULL)
        return dt_set_error(DT_ERR_SYSTEM, "generate: rank %d cannot silence stdout", g->rank);
    CHECK(read_config(dir, &g->cfg));
    char def[32];
    snprintf(def, sizeof(def), "tp=%d", g->world);
    CHECK(parse_mesh(g, mesh_text != NULL ? mesh_text : def, &g->tp));
    CHECK(build(g));
    return dt_checkpoint_load(g->gpt, NULL, dir); /* each rank reads its shards' boxes */
}

void gen_model_close(gen_model *g)
{
    if (g->rt != NULL && g->world > 1)
        dt_comm_barrier(dt_runtime_world(g->rt), NULL);
    dt_module_destroy(g->gpt);
    dt_mesh_release(g->mesh);
    dt_runtime_destroy(g->rt);
    *g = (gen_model){0};
}
