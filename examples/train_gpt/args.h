/*
 * Command line of train_gpt, kept apart from the training loop so later
 * options (--mesh, --sequence-parallel, --data-parallel, --plan) are added
 * here only: one row in the table of args.c and one field below.
 */
#ifndef TRAIN_GPT_ARGS_H
#define TRAIN_GPT_ARGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct train_args {
    const char *config;                      /* --config tiny|small */
    int64_t dim, n_heads, n_layers, ffn_dim; /* --dim ... (0: the preset's) */
    int64_t steps;                           /* --steps */
    int64_t batch;                           /* --batch: global batch B */
    int64_t seq;                             /* --seq: T (0 = the config's max_seq_len) */
    double lr;                               /* --lr (< 0 = the optimizer's default here) */
    const char *optim;                       /* --optim sgd|adamw */
    double momentum;                         /* --momentum (sgd) */
    double weight_decay;                     /* --weight-decay (< 0 = 0.1 for adamw, 0 for sgd) */
    double clip_grad;                        /* --clip-grad NORM (0 = off) */
    uint64_t seed;                           /* --seed */
    const char *data;                        /* --data tokens.bin */
    const char *init;                        /* --init weights.safetensors (NULL: seeded init) */
    const char *save;                        /* --save out.safetensors (NULL: not saved) */
    bool print_model;                        /* --print-model */
    const char *mesh;                        /* --mesh tp=2 (NULL: tp=<world> on several ranks) */
    bool sequence_parallel;                  /* --sequence-parallel */
    const char *plan;                        /* --plan FILE (NULL: the spec's default plan) */
    bool explain_plan;                       /* --explain-plan */
    const char *data_parallel; /* --data-parallel ddp|zero1|zero2|zero3 (NULL: zero2 on a dp dim) */
    bool memory_report;        /* --memory-report */
    const char *save_checkpoint; /* --save-checkpoint DIR (sharded; NULL: none) */
    int64_t every;               /* --every N: checkpoint every N steps (0: at the end only) */
    const char *resume;          /* --resume DIR (sharded checkpoint to continue from) */
    const char *device;          /* --device cpu|sim|cuda (NULL: the rank's, DT_DEVICE) */
    bool cpu_offload;            /* --cpu-offload: ZeRO master weights and optimizer on the host */
    bool eager_init;      /* --eager-init: build the full model on every rank, then shard it */
    bool estimate_memory; /* --estimate-memory: the estimate first, compared at the end */
    bool estimate_only;   /* --estimate-only: print the estimate and stop */
    bool activation_checkpointing; /* --activation-checkpointing: recompute layers.* */
    const char *precision;    /* --precision f32|bf16 (bf16: dt_autocast_set for the matmuls) */
    const char *reduce_dtype; /* --reduce-dtype f32|bf16: dt_fsdp_params.reduce_dtype */
    const char *param_dtype;  /* --param-dtype f32|bf16: dt_fsdp_params.param_dtype */
    int64_t micro_batches;    /* --micro-batches N (1): passes per step, one gradient sync */
    const char *lr_schedule;  /* --lr-schedule constant|linear|cosine (NULL: none) */
    int64_t warmup;           /* --warmup N steps */
    double min_lr_ratio;      /* --min-lr-ratio R */
    bool help;
} train_args;

/* Defaults; @p default_data is the token file the build makes. */
void train_args_defaults(train_args *a, const char *default_data);

/*
 * Parse argv into @p a (which holds the defaults). Returns 0 on success, or
 * -1 after printing what is wrong to @p err.
 */
int train_args_parse(int argc, char **argv, train_args *a, FILE *err);

void train_args_usage(FILE *f, const char *prog);

#endif
