/*
 * Choosing the next token from the logits: greedy (the first arg-max), or
 * sampling from softmax(logits / temperature) over the top-k tokens with a
 * seeded generator. Every rank holds the same logits and the same seed, so
 * every rank draws the same token without communicating.
 */
#ifndef GENERATE_SAMPLE_H
#define GENERATE_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct gen_sampler {
    bool greedy;
    double temperature; /* > 0 */
    int64_t top_k;      /* 0 or >= vocab: every token */
    uint64_t state;     /* splitmix64 state, from the seed */
} gen_sampler;

/* The next token of @p vocab logits (a host f32 row); -1 when out of memory. */
int64_t gen_sample(gen_sampler *s, const float *logits, int64_t vocab);

#endif
