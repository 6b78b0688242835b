/* The layout behind dt_optim, shared by optim.c (common), sgd.c and adamw.c. Not installed. */
#ifndef DT_NN_OPTIM_IMPL_H
#define DT_NN_OPTIM_IMPL_H

#include "core/tensor_impl.h"
#include "dtensor/nn.h"

#define DT_OPTIM_MAX_STATES 2

typedef struct dt_optim_param {
    char *fqn;
    dt_tensor *param;                      /* one reference */
    dt_tensor *state[DT_OPTIM_MAX_STATES]; /* local-shaped, NULL until the first step */
} dt_optim_param;

typedef struct dt_optim_hparams {
    double lr, momentum, weight_decay, beta1, beta2, eps;
} dt_optim_hparams;

/* One optimizer kind: its name, state names and the update of one parameter. */
typedef struct dt_optim_kind {
    const char *name;
    int n_states;
    const char *state_names[DT_OPTIM_MAX_STATES];
    /*
     * Update the local data @p p (contiguous f32) from gradient @p g with states
     * @p state (allocated, zero at the first step); @p step is 1-based.
     */
    dt_status (*update)(const dt_optim_hparams *h, int64_t step, dt_tensor *p, const dt_tensor *g,
                        dt_tensor *const *state);
    /* (optional) Whether the kind needs a state at all with these hparams. */
    bool (*needs_state)(const dt_optim_hparams *h);
} dt_optim_kind;

struct dt_optim {
    const dt_optim_kind *kind;
    dt_optim_hparams h;
    int64_t steps;
    int n_params;
    dt_optim_param *params;
};

/* Common constructor: collect @p root's parameters in the stable order. */
dt_status dt__optim_create(dt_module *root, const dt_optim_kind *kind, const dt_optim_hparams *h,
                           dt_optim **out);

extern const dt_optim_kind dt__optim_sgd;
extern const dt_optim_kind dt__optim_adamw;

#endif
