/*
 * train_gpt's sharded checkpoints: --save-checkpoint DIR [--every N] and
 * --resume DIR (model, optimizer state and step count; include/dtensor/
 * checkpoint.h). A resumed run continues at the saved step, so step s takes
 * the same batch window as in an uninterrupted run.
 */
#ifndef TRAIN_GPT_CHECKPOINTING_H
#define TRAIN_GPT_CHECKPOINTING_H

#include "parallel.h"

/* Load @p dir into @p model and @p opt (any mesh); *first_step = the steps it had taken. */
dt_status train_ck_resume(const train_parallel *p, const char *dir, dt_module *model, dt_optim *opt,
                          int64_t *first_step);

/*
 * After step @p s (0-based) of @p steps: save to @p dir when @p every > 0 and
 * s + 1 is a multiple of it, or when s is the last step. Collective (every
 * rank calls it). Rank 0 also writes <dir>/config.json, the model's sizes
 * and tokenizer (byte-level), for examples/generate. @p dir NULL: nothing.
 */
dt_status train_ck_after_step(const train_parallel *p, const char *dir, int64_t every, int64_t s,
                              int64_t steps, dt_module *model, dt_optim *opt);

#endif
