/* The dp_api tests' shared pieces: the tiny GPT's config and token data
 * (set up once per test group), a rank's share of a global batch, one
 * forward/backward step and gradient comparisons against a single-rank run. */
#ifndef DT_TEST_DP_API_COMMON_H
#define DT_TEST_DP_API_COMMON_H

#include "dp_util.h"

#define BATCH 4
#define SEQ   16

extern dt_token_data *data;
extern dt_gpt_config cfg;

/* cmocka group setup / teardown: the runtime, the config and the token data. */
int setup(void **state);
int teardown(void **state);

/* This rank's share of a global batch of @p b rows (dp rank r takes
 * [r*B/R, (r+1)*B/R)): the grad_scale that makes the dp sum the gradient of
 * the global mean. */
double share(dt_mesh *mesh, int64_t b);

/* Forward + backward (+ clip to @p clip when > 0) on this rank's rows of batch
 * @p step (all rows when @p mesh is NULL); returns the clip norm. */
double fwd_bwd(dt_module *m, dt_mesh *mesh, int64_t step, double clip);

/* Relative L2 difference of @p m's full gradient of @p fqn from @p ref's. */
double grad_diff(dt_module *m, dt_module *ref, const char *fqn);

/* Parameters whose gradients the reduce_dtype and no_sync checks compare. */
#define N_FQNS 3
extern const char *const fqns[N_FQNS];

/* The GPT made data parallel (@p stage, gradients reduced in @p reduce) and
 * the same GPT on this rank alone. */
void dp_and_reference(dt_mesh *mesh, dt_dp_stage stage, dt_dtype reduce, dt_module **m,
                      dt_module **ref);

#define FAILS(call, status, needle)                                                                \
    do {                                                                                           \
        dt_status s_ = (call);                                                                     \
        if (s_ != (status) || strstr(dt_last_error(), (needle)) == NULL)                           \
            fail_msg("%s -> %s '%s' (want %s naming '%s')", #call, dt_status_str(s_),              \
                     dt_last_error(), dt_status_str(status), (needle));                            \
    } while (0)

#endif
