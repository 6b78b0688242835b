/*
 * The replay behind dt_gpt_memory_estimate (memory_estimate.c: parameters,
 * init; memory_estimate_step.c: one training step). Not installed.
 */
#ifndef DT_STYLES_DP_MEMORY_ESTIMATE_H
#define DT_STYLES_DP_MEMORY_ESTIMATE_H

#include "dtensor/data_parallel.h"

#define EST_MAX_LAYERS 1024
#define EST_MAX_PARAMS (4 + 20 * EST_MAX_LAYERS)

typedef struct est_param {
    int unit;      /* ZeRO-3 unit: 1 tok, 2 pos, 3.. layers, then norm, output */
    int k;         /* dp dim (-1: replicated over dp) */
    int64_t local; /* tp-local elements */
    int64_t shard; /* elements this rank keeps (ZeRO: its dp piece) */
    bool gathers;  /* ZeRO and k >= 0: computes on a gathered copy */
} est_param;

typedef struct est_sim {
    dt_memory_estimate_config c;
    bool tp_plan, zero;
    int n_states;
    int64_t full_params;
    int n_params, n_units;
    est_param p[EST_MAX_PARAMS];
    /* the ledger: live and peak bytes by category */
    int64_t cur[DT_MEM_CATEGORY_COUNT], peak[DT_MEM_CATEGORY_COUNT];
    int64_t total, total_peak;
    const char *phase, *peak_at;
    /* step state */
    bool resident[EST_MAX_PARAMS]; /* gathered copy holds storage */
    bool posted[EST_MAX_PARAMS];   /* its packed receive buffer is live */
    int bucket[EST_MAX_PARAMS];    /* DDP: each parameter's bucket (dp_apply.c) */
    int64_t bucket_numel[EST_MAX_PARAMS];
    bool bucket_live[EST_MAX_PARAMS];
    /* reduction buffers to free (negative: gradient bytes to take) when the
     * reductions complete: those of this unit's backward, and the unit's before */
    int64_t reap[2][DT_MEM_CATEGORY_COUNT];
} est_sim;

int64_t est__chunk(int64_t n, int parts);
void est__take(est_sim *s, int cat, int64_t bytes);
void est__give(est_sim *s, int cat, int64_t bytes);
/* Replay training step @p step (0: the optimizer state is created at its end). */
void est__replay_step(est_sim *s, int step);

#endif
