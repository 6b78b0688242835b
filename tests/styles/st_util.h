/* Helpers for the styles tests: checks with the last error, GPT configs, a
 * training loop shared by the single-rank reference and the parallel runs. */
#ifndef DT_TEST_ST_UTIL_H
#define DT_TEST_ST_UTIL_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dtensor.h"

#define ST_OK(call)                                                                                \
    do {                                                                                           \
        dt_status st_s_ = (call);                                                                  \
        if (st_s_ != DT_OK)                                                                        \
            fail_msg("%s -> %s: %s", #call, dt_status_str(st_s_), dt_last_error());                \
    } while (0)

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

/* The param at @p fqn ("layers.0.attention.wq.weight"). */
static inline dt_tensor *st_param(dt_module *root, const char *fqn)
{
    char mod[256];
    const char *dot = strrchr(fqn, '.');
    snprintf(mod, sizeof(mod), "%.*s", dot != NULL ? (int)(dot - fqn) : 0, fqn);
    dt_module *m = NULL;
    ST_OK(dt_module_find(root, mod, &m));
    return dt_module_param(m, dot != NULL ? dot + 1 : fqn);
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

/* The loss's value whether it is local or a replicated distributed scalar. */
static inline double st_loss_value(dt_tensor *loss)
{
    double v = 0.0;
    ST_OK(dt_tensor_item(dt_tensor_is_distributed(loss) ? dt_to_local(loss) : loss, &v));
    return v;
}

typedef enum st_optim { ST_SGD, ST_ADAMW } st_optim;

/* Train @p steps steps; losses[s] gets step s's loss. */
static inline void st_train(dt_module *model, st_optim which, const dt_token_data *data, int steps,
                            int64_t batch, int64_t seq, double *losses)
{
    dt_optim *opt = NULL;
    if (which == ST_SGD) {
        dt_sgd_params p = {.field_mask = DT_SGD_PARAM_FIELD_LR, .lr = 0.5};
        ST_OK(dt_optim_sgd_create(model, &p, &opt));
    } else {
        dt_adamw_params p = {.field_mask = DT_ADAMW_PARAM_FIELD_LR, .lr = 3e-3};
        ST_OK(dt_optim_adamw_create(model, &p, &opt));
    }
    for (int s = 0; s < steps; s++) {
        dt_tensor *x = NULL, *y = NULL, *logits = NULL, *loss = NULL;
        dt_optim_zero_grad(opt);
        ST_OK(dt_token_data_batch(data, s, batch, seq, 0, batch, &x, &y));
        ST_OK(dt_module_call(model, x, &logits));
        ST_OK(dt_nn_cross_entropy(logits, y, &loss));
        dt_tensor_release(logits);
        losses[s] = st_loss_value(loss);
        ST_OK(dt_backward(loss, NULL));
        ST_OK(dt_optim_step(opt));
        dt_tensor_release(loss);
        dt_tensor_release(x);
        dt_tensor_release(y);
    }
    dt_optim_destroy(opt);
}

#endif
