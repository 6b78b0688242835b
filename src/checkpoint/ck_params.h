/*
 * What the full and sharded checkpoints share: the module's parameters with
 * their FQNs, the one mesh their distributed ones live on, and agreeing on a
 * status across that mesh.
 */
#ifndef DT_CHECKPOINT_CK_PARAMS_H
#define DT_CHECKPOINT_CK_PARAMS_H

#include "dtensor/checkpoint.h"
#include "dtensor/placement.h"

typedef struct dt_ck_param {
    char *fqn;
    dt_tensor *t; /* borrowed from the module, or owned (optimizer state) */
    bool owned;
} dt_ck_param;

typedef struct dt_ck_params {
    int n, cap;
    dt_ck_param *p;
    dt_mesh *mesh; /* shared by the distributed parameters; NULL when all are local */
} dt_ck_params;

/* Collect @p root's parameters; DT_ERR_INVALID_ARG (naming @p fn) when there
 * are none or the distributed ones are on different meshes. */
dt_status dt__ck_params_collect(const char *fn, dt_module *root, dt_ck_params *l);
void dt__ck_params_free(dt_ck_params *l);

/* Append @p o's state (allocated zero first where missing) as
 * "optim.<fqn>.<state>" tensors placed like their parameters. Each of @p o's
 * parameters must be the one @p l holds under its FQN: DT_ERR_INVALID_ARG
 * (naming @p fn) otherwise. */
dt_status dt__ck_params_add_optim(const char *fn, dt_ck_params *l, dt_optim *o);

/* The boxes of distributed @p t's shard at @p coord (NULL: this rank's) into
 * @p boxes (DT_PLACEMENT_MAX_SPLIT entries): one, or k for a split-factor
 * shard (dt_spec_local_boxes). */
dt_status dt__ck_boxes(const dt_tensor *t, const int *coord, dt_box *boxes, int *n);
/* The view of @p local that box @p b of its shard covers. */
dt_status dt__ck_box_view(dt_tensor *local, const dt_box *b, dt_tensor **out);
/* The key box @p j of parameter @p fqn is stored under: the FQN itself for
 * box 0 (every shard that is one box), "<fqn>#<j>" after it. */
void dt__ck_box_key(const char *fqn, int j, char *buf, size_t len);

/* Collective over @p mesh: every rank gets the largest @p v. */
dt_status dt__ck_agree_max(dt_mesh *mesh, int64_t *v);
/*
 * One step every rank of @p mesh agrees on (collective; NULL mesh: returns
 * @p mine): a failure anywhere fails everyone. A rank whose own part (@p mine)
 * went well fails with the status and message of the lowest world rank that
 * failed ("<fn>: <what> failed on world rank R: <its message>"); a failing
 * rank keeps its own. One 4-byte all-reduce per mesh dim when all went well.
 */
dt_status dt__ck_agree_step(const char *fn, dt_mesh *mesh, dt_status mine, const char *what);
/* DT_ERR_UNSUPPORTED naming the FQN when @p t has a Partial placement. */
dt_status dt__ck_check_not_partial(const char *fn, const dt_ck_param *p);

/* True when the shard at mesh coordinate @p coord of a tensor with spec @p s
 * is the copy a sharded checkpoint stores: coordinate 0 on every mesh dim
 * that does not shard it (each distinct shard is stored exactly once). */
bool dt__ck_shard_stored(const dt_spec *s, const int *coord);

#endif
