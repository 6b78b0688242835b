/*
 * generate's command line:
 *   generate --checkpoint DIR [--mesh tp=N] --prompt TEXT --tokens K
 *            [--greedy | --temperature T --top-k K --seed S]
 */
#ifndef GENERATE_ARGS_H
#define GENERATE_ARGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct gen_args {
    const char *checkpoint; /* a train_gpt --save-checkpoint directory */
    const char *mesh;       /* "tp=N"; NULL: tp = the number of processes */
    const char *prompt;
    int64_t tokens;     /* how many to generate */
    bool greedy;        /* the default when no sampling option is given */
    bool sampling;      /* --temperature, --top-k or --seed given */
    double temperature; /* > 0; default 1 */
    int64_t top_k;      /* 0: the whole vocabulary */
    uint64_t seed;
    bool help;
} gen_args;

/* Parse argv into @p a; 0, or -1 after printing "generate: ..." naming the
 * bad option or value to @p err. */
int gen_args_parse(int argc, char **argv, gen_args *a, FILE *err);

/* The usage text. */
void gen_args_usage(FILE *f, const char *prog);

#endif
