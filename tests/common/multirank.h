/*
 * Scaffolding shared by the tests that run on dtrun ranks (tests/nn,
 * tests/styles, tests/data_parallel, tests/checkpoint): the runtime as a
 * cmocka group setup/teardown, the learnable token sequence, the GPT training
 * loop every rank also runs single-rank as the reference, the comparison of
 * full weights with that reference, and the small pieces the layer tests
 * share (deterministic parameters and inputs, full values and gradients of
 * distributed tensors, closeness checks). Compiled into a test by listing
 * ${PROJECT_SOURCE_DIR}/tests/common/multirank.c in its SOURCES.
 */
#ifndef DT_TEST_MULTIRANK_H
#define DT_TEST_MULTIRANK_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dtensor.h"

#define MR_OK(call)                                                                                \
    do {                                                                                           \
        dt_status mr_s_ = (call);                                                                  \
        if (mr_s_ != DT_OK)                                                                        \
            fail_msg("%s -> %s: %s", #call, dt_status_str(mr_s_), dt_last_error());                \
    } while (0)

/* The runtime of this process, set by mr_setup, destroyed by mr_teardown. */
extern dt_runtime *mr_rt;

/* cmocka group setup: dt_init into mr_rt (-1 with the error on stderr). */
int mr_setup(void **state);
/* cmocka group teardown: a world barrier (so no rank leaves early), then
 * dt_runtime_destroy. */
int mr_teardown(void **state);
/* mr_setup, then @p data = mr_learnable_tokens() and @p cfg = the "tiny" GPT
 * preset with max_seq_len @p seq: the group setup of the GPT training tests
 * (-1 on failure; the caller's teardown closes @p data). */
int mr_setup_gpt(void **state, int64_t seq, dt_token_data **data, dt_gpt_config *cfg);
/* A world barrier; fails the test on error. */
void mr_barrier(void);

/* 4096 tokens (3i + i/5) % 50, the same on every rank: a sequence the tiny
 * GPT learns in a few steps. NULL on failure (for use in a group setup). */
dt_token_data *mr_learnable_tokens(void);

/* The device the tests run on: the runtime's (DT_DEVICE; ctest runs cpu and sim). */
/* @p t (consumed) moved to that device. */
dt_tensor *mr_on_device(dt_tensor *t);
/* A contiguous host copy of @p t (any device): what the checks read. */
dt_tensor *mr_host(dt_tensor *t);
/* dt_gpt_create, then the model moved to the test's device (before any
 * parallelism is applied, as a user does). */
void mr_gpt_create(const dt_gpt_config *cfg, uint64_t seed, dt_module **out);

/* A 1-d mesh over the whole world whose dim is named @p dim. */
dt_mesh *mr_world_mesh(const char *dim);
/* A 2-d mesh @p dp x @p tp (dims named "dp" and "tp") over the world. */
dt_mesh *mr_dp_tp_mesh(int dp, int tp);

/* The parameter of @p root at @p fqn ("layers.0.attention.wq.weight"), borrowed. */
dt_tensor *mr_param_at(dt_module *root, const char *fqn);

/* Every parameter of @p m ~ Normal(0, std) by dt_param_init under @p seed and
 * its fqn: biases too (nonzero), and shards hold the full tensor's values, so
 * a parallel model and its single-rank reference start alike. */
void mr_init_params(dt_module *m, uint64_t seed, double std);

/* A host f32 tensor ~ N(0, 1) from @p seed (the same on every rank), requiring
 * grad when @p grad. */
dt_tensor *mr_randn(int ndim, const int64_t *shape, uint64_t seed, bool grad);

/* sum(y * y) of a local or distributed @p y (new reference). */
dt_tensor *mr_square_sum(dt_tensor *y);

/* The full value of @p t: gathered when distributed, itself otherwise (new reference). */
dt_tensor *mr_full(dt_tensor *t);

/* The full gradient of parameter @p p (new reference): its own when local;
 * when distributed, its local gradient wrapped with p's placements, gathered. */
dt_tensor *mr_full_grad(dt_tensor *p);

/* Fail naming @p what unless max |a - b| <= @p tol * max(max |b|, 1e-6). */
void mr_assert_close(const char *what, dt_tensor *a, dt_tensor *b, double tol);

typedef enum mr_optim { MR_SGD, MR_ADAMW } mr_optim;

/*
 * Train @p steps steps of global batch @p batch with SGD (lr 0.5) or AdamW
 * (lr 3e-3). With @p dp (a data-parallel comm, or NULL) rank r takes rows
 * [r*B/R, (r+1)*B/R) and losses[s] gets the global batch's loss (the local
 * means weighted by the local rows, summed over dp). @p clip > 0: clip the
 * gradient norm to it at every step. Batches go to the test's device. @p end
 * (may be NULL) gets the test device's memory stats after the last step, while the optimizer state
 * and gradients live.
 */
void mr_train(dt_module *model, mr_optim which, dt_comm *dp, double clip, const dt_token_data *data,
              int steps, int64_t batch, int64_t seq, double *losses, dt_memory_stats *end);

/* The full weights of a model against the single-rank reference. */
typedef struct mr_cmp {
    double diff2, norm2; /* squared differences and reference norms over the whole model */
    double rel;          /* the whole model's norm-wise relative error, sqrt(diff2 / norm2) */
    double worst;        /* the worst parameter's norm-wise relative error */
    char worst_fqn[128];
} mr_cmp;

/*
 * Compare every parameter of @p m (gathered when distributed) with the one at
 * the same fqn in @p ref: ||full - ref|| / ||ref||, the norm-wise relative
 * error (an element-wise max is the wrong yardstick under AdamW: an element
 * whose gradient is ~eps turns rounding noise into visible steps in any two
 * runs that sum in a different order). attention.wk.bias has an exactly zero
 * true gradient (softmax ignores a constant added to every key), so both runs
 * only move it by rounding noise: it is left out of the worst parameter and,
 * when @p noise_bound > 0, its reference must stay within that bound.
 */
mr_cmp mr_compare_weights(dt_module *m, dt_module *ref, double noise_bound);

/*
 * Fail unless a parallel run matches the single-rank one: every step's loss
 * within @p tol relative, the reference learnt (last loss < first), the whole
 * model's weights within @p tol and the worst parameter within @p param_tol.
 * @p what names the run in the messages.
 */
void mr_expect_same_run(const char *what, const double *loss, const double *ref_loss, int steps,
                        const mr_cmp *c, double tol, double param_tol);

#endif
