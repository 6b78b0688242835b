/*
 * The forward random stream: where random ops inside a forward (dropout)
 * take their seeds, as torch's default generator. A counter-based stream -
 * (seed, offset) is its whole state - so activation checkpointing can save
 * it before a forward and replay it exactly in the recompute.
 */
#include "dtensor/nn.h"

/* per thread, as grad mode: a forward and its backward run on one thread */
static _Thread_local dt_rng_state g_rng = {.seed = DT_RNG_DEFAULT_SEED, .offset = 0};

/* splitmix64: a well-mixed 64-bit value from a counter */
static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void dt_rng_manual_seed(uint64_t seed)
{
    g_rng.seed = seed;
    g_rng.offset = 0;
}

uint64_t dt_rng_next_seed(void)
{
    return mix(g_rng.seed ^ mix(g_rng.offset++));
}

dt_rng_state dt_rng_get_state(void)
{
    return g_rng;
}

void dt_rng_set_state(dt_rng_state state)
{
    g_rng = state;
}
