/*
 * generate's model: the runtime, the GPT of a train_gpt checkpoint (sizes
 * from its config.json), sharded over the "tp" mesh dim by the spec's plan,
 * its weights loaded from the checkpoint whatever mesh saved it.
 */
#ifndef GENERATE_MODEL_H
#define GENERATE_MODEL_H

#include <dtensor.h>

typedef struct gen_model {
    dt_runtime *rt;
    dt_mesh *mesh;
    dt_module *gpt;
    dt_gpt_config cfg;
    dt_device device;
    int rank, world, tp;
} gen_model;

/*
 * dt_init, then <dir>/config.json, the mesh of @p mesh_text ("tp=N"; NULL:
 * tp = the world size), the model built without storage, parallelized,
 * materialised and loaded from @p dir. Ranks other than 0 send stdout to
 * /dev/null. Errors name the bad value: a missing directory or config.json,
 * a mesh the world or the heads do not fit. Collective.
 */
dt_status gen_model_open(gen_model *g, const char *dir, const char *mesh_text);

/* Barrier, then free the model, the mesh and the runtime. */
void gen_model_close(gen_model *g);

#endif
