/*
 * train_gpt's memory estimate (dt_gpt_memory_estimate): computed from the
 * options before anything is allocated (--estimate-memory prints it then,
 * --estimate-only prints it and stops), and compared with every rank's
 * measured peak at the end of the run (--estimate-memory, --memory-report).
 */
#ifndef TRAIN_GPT_ESTIMATE_H
#define TRAIN_GPT_ESTIMATE_H

#include "args.h"
#include "parallel.h"

/* The estimate for the run of @p a with model @p cfg and sequence @p seq. */
dt_status train_estimate(const train_parallel *p, const train_args *a, const dt_gpt_config *cfg,
                         int64_t seq, dt_memory_estimate *out);

/* Rank 0 prints @p e to @p f with what is live now (nothing, before the
 * model: the proof that it came first). */
void train_estimate_print(const train_parallel *p, const dt_memory_estimate *e, FILE *f);

/* Collective: every rank's measured host peaks; rank 0 prints the largest
 * rank's next to @p e with the ratios, then each rank's total and ratio. */
dt_status train_estimate_compare(const train_parallel *p, const dt_memory_estimate *e, FILE *f);

#endif
