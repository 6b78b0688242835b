/* Helpers for the styles tests: checks with the last error, counting
 * distributed parameters, deterministic tokens (the training loop and weight
 * comparison are common/multirank.h's). */
#ifndef DT_TEST_ST_UTIL_H
#define DT_TEST_ST_UTIL_H

#include "common/multirank.h"

#define ST_OK(call) MR_OK(call)

/* @p call must fail with @p status and a message containing @p needle. */
#define ST_FAILS(call, status, needle)                                                             \
    do {                                                                                           \
        dt_status st_s_ = (call);                                                                  \
        if (st_s_ != (status))                                                                     \
            fail_msg("%s -> %s (want %s): %s", #call, dt_status_str(st_s_), dt_status_str(status), \
                     dt_last_error());                                                             \
        if (strstr(dt_last_error(), (needle)) == NULL)                                             \
            fail_msg("%s: message '%s' does not name '%s'", #call, dt_last_error(), (needle));     \
    } while (0)

/* Number of parameters of @p m that are distributed. */
static dt_status st_count_dist_(const char *fqn, dt_module *o, const char *n, dt_tensor *p,
                                void *user)
{
    (void)fqn, (void)o, (void)n;
    *(int *)user += dt_tensor_is_distributed(p) ? 1 : 0;
    return DT_OK;
}

static inline int st_count_distributed(dt_module *m)
{
    int n = 0;
    ST_OK(dt_module_foreach_param(m, st_count_dist_, &n));
    return n;
}

/* Deterministic tokens < vocab (a small LCG; every rank makes the same). */
static inline dt_token_data *st_tokens(int64_t n, int64_t vocab)
{
    uint16_t *t = malloc(sizeof(uint16_t) * (size_t)n);
    uint64_t x = 88172645463325252ull;
    for (int64_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        t[i] = (uint16_t)(x % (uint64_t)vocab);
    }
    dt_token_data *d = NULL;
    ST_OK(dt_token_data_from_buffer(t, n, &d));
    free(t);
    return d;
}

#endif
