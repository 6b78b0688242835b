/*
 * dtensor/optim.h - optimizers (SGD, AdamW) over a module's parameters, their
 * state, learning-rate schedules and clipping by the global norm.
 * Included by dtensor/nn.h (and so by dtensor.h); including it alone works too.
 */
#ifndef DTENSOR_OPTIM_H
#define DTENSOR_OPTIM_H

#include "dtensor/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ optimizers */

typedef struct dt_optim dt_optim;

enum {
    DT_SGD_PARAM_FIELD_LR = 1u << 0,
    DT_SGD_PARAM_FIELD_MOMENTUM = 1u << 1,
    DT_SGD_PARAM_FIELD_WEIGHT_DECAY = 1u << 2,
};
/** SGD (PyTorch torch.optim.SGD, dampening 0, no Nesterov). */
typedef struct dt_sgd_params {
    uint64_t field_mask;
    double lr;           /* default 0.01 */
    double momentum;     /* default 0: p -= lr * g */
    double weight_decay; /* default 0 (L2: g += wd * p) */
} dt_sgd_params;

enum {
    DT_ADAMW_PARAM_FIELD_LR = 1u << 0,
    DT_ADAMW_PARAM_FIELD_BETA1 = 1u << 1,
    DT_ADAMW_PARAM_FIELD_BETA2 = 1u << 2,
    DT_ADAMW_PARAM_FIELD_EPS = 1u << 3,
    DT_ADAMW_PARAM_FIELD_WEIGHT_DECAY = 1u << 4,
};
/**
 * AdamW (PyTorch torch.optim.AdamW): p -= lr * wd * p; m = b1 m + (1-b1) g;
 * v = b2 v + (1-b2) g^2; p -= lr / (1-b1^t) * m / (sqrt(v) / sqrt(1-b2^t) + eps).
 */
typedef struct dt_adamw_params {
    uint64_t field_mask;
    double lr;           /* default 1e-3 */
    double beta1;        /* default 0.9 */
    double beta2;        /* default 0.95 (the spec's) */
    double eps;          /* default 1e-8 */
    double weight_decay; /* default 0.1 (the spec's) */
} dt_adamw_params;

/**
 * An optimizer over every parameter of @p root, in the stable order, holding a
 * reference to each tensor and its FQN. Create it after the model is final
 * (after parallelizing): it captures the slots' tensors at this moment. State
 * (momentum, exp_avg, exp_avg_sq) is allocated lazily at the first step, shaped
 * like each parameter's local data, tagged DT_MEM_OPTIMIZER.
 * Errors: DT_ERR_INVALID_ARG naming a bad hyper-parameter, or a parameter
 * with a Partial placement.
 */
DT_API dt_status dt_optim_sgd_create(dt_module *root, const dt_sgd_params *p, dt_optim **out);
DT_API dt_status dt_optim_adamw_create(dt_module *root, const dt_adamw_params *p, dt_optim **out);
/** Free the optimizer and its state. NULL-safe. */
DT_API void dt_optim_destroy(dt_optim *o);

/**
 * One update of every parameter that has a gradient (parameters without one
 * are skipped, as in PyTorch). A distributed parameter's local shard is
 * updated in place with its gradient, which autograd keeps on the shard
 * (dt_tensor_grad, autograd.h): the distributed backward must deliver it in
 * the parameter's placements (reduced, not Partial). Not collective.
 * Errors: DT_ERR_INVALID_ARG naming the FQN for a size mismatch;
 * DT_ERR_UNSUPPORTED for a non-f32 or non-contiguous parameter or gradient,
 * or a device without the fused kernel.
 */
DT_API dt_status dt_optim_step(dt_optim *o);
/** Drop every parameter's gradient (PyTorch zero_grad(set_to_none=True)). */
DT_API void dt_optim_zero_grad(dt_optim *o);
/** The learning rate (0 for NULL); set_lr replaces it for the next steps
 * (schedules), unchecked, and ignores NULL. Not collective. */
DT_API double dt_optim_lr(const dt_optim *o);
DT_API void dt_optim_set_lr(dt_optim *o, double lr);
/** Steps taken so far. */
DT_API int64_t dt_optim_step_count(const dt_optim *o);

/* ------------------------------------------------------------ lr schedules */

typedef enum dt_lr_schedule_kind {
    DT_LR_CONSTANT, /* warm-up, then the base lr */
    DT_LR_LINEAR,   /* warm-up, then linear decay to the floor at total_steps */
    DT_LR_COSINE,   /* warm-up, then half a cosine down to the floor at total_steps */
} dt_lr_schedule_kind;

enum {
    DT_LR_SCHEDULE_PARAM_FIELD_KIND = 1u << 0,
    DT_LR_SCHEDULE_PARAM_FIELD_WARMUP_STEPS = 1u << 1,
    DT_LR_SCHEDULE_PARAM_FIELD_TOTAL_STEPS = 1u << 2,
    DT_LR_SCHEDULE_PARAM_FIELD_MIN_LR_RATIO = 1u << 3,
};
/**
 * A learning-rate schedule, as Hugging Face's get_{constant,linear,cosine}_
 * schedule_with_warmup (with a floor): at step s (from 0) the lr is
 * base * s / warmup_steps while s < warmup_steps, then
 * base * (min + (1 - min) * d(p)) with p = (s - warmup) / (total - warmup)
 * clamped to 1 and d(p) = 1 (constant), 1 - p (linear) or (1 + cos(pi p)) / 2
 * (cosine).
 */
typedef struct dt_lr_schedule_params {
    uint64_t field_mask;
    dt_lr_schedule_kind kind; /* default DT_LR_COSINE */
    int64_t warmup_steps;     /* default 0 */
    int64_t total_steps;      /* where the decay ends; required (> warmup) but for constant */
    double min_lr_ratio;      /* the floor, a fraction of the base lr in [0, 1]; default 0 */
} dt_lr_schedule_params;

/**
 * The lr of schedule @p p (NULL: all defaults, which needs total_steps, so an
 * error) at @p step for @p base_lr. Pure. Errors: DT_ERR_INVALID_ARG naming
 * the bad field (total_steps <= warmup_steps for a decay, a negative step or
 * warm-up, min_lr_ratio outside [0, 1], base_lr not finite >= 0).
 */
DT_API dt_status dt_lr_schedule_value(const dt_lr_schedule_params *p, double base_lr, int64_t step,
                                      double *lr);
/**
 * Set @p o's lr for its next step from schedule @p p at its step count (call
 * it before every dt_optim_step). Not collective. Errors: as
 * dt_lr_schedule_value.
 */
DT_API dt_status dt_optim_schedule(dt_optim *o, const dt_lr_schedule_params *p, double base_lr);
/** "sgd" or "adamw". */
DT_API const char *dt_optim_name(const dt_optim *o);
/**
 * Optimizer state placed like its parameter: state @p name ("exp_avg",
 * "exp_avg_sq", "momentum_buffer") of parameter @p i of @p o as a new
 * reference: for a distributed parameter (a tp shard, a ZeRO dp shard) a
 * distributed tensor with the parameter's spec wrapping the local state (no
 * copy, no communication: dt_full_tensor of it is the full state, as a
 * single-rank run would hold it); for a local parameter the state itself.
 * Errors: DT_ERR_NOT_FOUND when the optimizer has no such state (yet: states
 * exist from the first step) or @p i is out of range.
 */
DT_API dt_status dt_optim_state_placed(const dt_optim *o, int i, const char *name, dt_tensor **out);
/** Parameters the optimizer updates, their FQNs and tensors (borrowed). */
DT_API int dt_optim_num_params(const dt_optim *o);
DT_API const char *dt_optim_param_fqn(const dt_optim *o, int i);
DT_API dt_tensor *dt_optim_param_tensor(const dt_optim *o, int i);
/**
 * State tensor @p name ("momentum_buffer"; "exp_avg", "exp_avg_sq") of
 * parameter @p i, or NULL before the first step / for an unknown name.
 * Borrowed; local (shard-shaped).
 */
DT_API dt_tensor *dt_optim_param_state(const dt_optim *o, int i, const char *name);

/* Optimizer state for checkpoints (src/nn/optim_state.c). */
/** States the optimizer keeps per parameter with its hyper-parameters (SGD
 * without momentum: 0). */
DT_API int dt_optim_num_states(const dt_optim *o);
/** Name of state @p s (0 <= s < dt_optim_num_states), or NULL. Static. */
DT_API const char *dt_optim_state_name(const dt_optim *o, int s);
/**
 * Allocate the zero state of every parameter that has none yet (what its
 * first update would allocate, so no update changes), shaped like the
 * parameter's local data, tagged DT_MEM_OPTIMIZER. Not collective.
 * Errors: DT_ERR_NO_MEMORY (the state allocated so far is kept).
 */
DT_API dt_status dt_optim_state_init(dt_optim *o);
/** Set the steps taken so far (a resumed run). DT_ERR_INVALID_ARG when < 0. */
DT_API dt_status dt_optim_set_step_count(dt_optim *o, int64_t steps);

/**
 * Scale every gradient of @p root's parameters so that their global 2-norm is
 * at most @p max_norm (PyTorch clip_grad_norm_: coefficient
 * min(1, max_norm / (norm + 1e-6)) applied to every gradient). Writes the
 * norm before clipping to @p total_norm (may be NULL).
 * The gradient of a distributed parameter is its shard's, placed like the
 * parameter: each distinct shard counts once, its squares summed over the
 * mesh dims that shard the parameter (not the replicating ones), so every rank
 * gets the norm of the full gradients. Collective over the meshes of the
 * distributed parameters (one small all-reduce per mesh dim that shards some
 * gradient): every rank must call it with the same gradients present.
 * Errors: DT_ERR_INVALID_ARG for max_norm <= 0; DT_ERR_UNSUPPORTED for a
 * Partial parameter, a non-f32/non-contiguous gradient or a virtual mesh (no
 * comms); communication errors.
 */
DT_API dt_status dt_clip_grad_norm(dt_module *root, double max_norm, double *total_norm);

#ifdef __cplusplus
}
#endif
#endif /* DTENSOR_OPTIM_H */
