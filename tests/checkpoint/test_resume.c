/*
 * Resuming training from a sharded checkpoint with optimizer state (4 ranks):
 * the GPT trains 3 steps on dp=2 x tp=2 (DDP, ZeRO-1, ZeRO-3; SGD with
 * momentum, AdamW), saves model + optimizer + step, then keeps training as
 * the uninterrupted run. The checkpoint is loaded on tp=4, on dp=4 with
 * ZeRO-3, on dp=2 x tp=2 under another style (ZeRO-3 -> DDP, DDP -> ZeRO-2,
 * ...) and on one rank (a local model per rank): each holds exactly the
 * saved full optimizer state and step, and its steps 3..5 give the losses
 * of the uninterrupted run within 1e-6 relative. Then the error cases.
 */
#include <math.h>

#include "ck_gpt_util.h"
#include "common/multirank.h"

#define SEQ     16
#define BATCH   4
#define STEPS   6
#define SAVE_AT 3

static dt_token_data *data;
static dt_gpt_config cfg;
static dt_mesh *m22, *m4, *m41;

static int setup(void **state)
{
    if (mr_setup_gpt(state, SEQ, &data, &cfg) != 0)
        return -1;
    const char *dptp[2] = {"dp", "tp"}, *tp[1] = {"tp"};
    int s22[2] = {2, 2}, s4[1] = {4}, s41[2] = {4, 1};
    if (dt_mesh_create(mr_rt, 2, s22, dptp, &m22) != DT_OK ||
        dt_mesh_create(mr_rt, 1, s4, tp, &m4) != DT_OK ||
        dt_mesh_create(mr_rt, 2, s41, dptp, &m41) != DT_OK)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    dt_mesh_release(m22);
    dt_mesh_release(m4);
    dt_mesh_release(m41);
    dt_token_data_close(data);
    return mr_teardown(state);
}

typedef enum { OPT_SGD, OPT_SGD_PLAIN, OPT_ADAMW } opt_kind;

typedef struct run {
    dt_module *model;
    dt_optim *opt;
    dt_comm *dpc; /* NULL: no dp dim */
} run;

/* A seeded GPT on @p mesh (NULL: local): the spec's plan on "tp" when it has
 * more than one rank, then @p stage over "dp" (< 0: none), then the optimizer. */
static run run_make(dt_mesh *mesh, int stage, opt_kind ok, uint64_t seed)
{
    run r = {0};
    CK_OK(dt_gpt_create(&cfg, seed, &r.model));
    int d = 0;
    if (mesh != NULL && dt_mesh_dim_index(mesh, "tp", &d) == DT_OK &&
        dt_mesh_dim_size(mesh, d) > 1) {
        dt_plan *plan = NULL;
        CK_OK(dt_plan_gpt_default(false, &plan));
        CK_OK(dt_parallelize_module(r.model, mesh, plan, "tp"));
        dt_plan_destroy(plan);
    }
    if (stage >= 0) {
        dt_fsdp_params p = {.field_mask = DT_FSDP_PARAM_FIELD_STAGE, .stage = (dt_dp_stage)stage};
        CK_OK(dt_fully_shard(r.model, mesh, "dp", &p));
        CK_OK(dt_mesh_dim_index(mesh, "dp", &d));
        r.dpc = dt_mesh_dim_comm(mesh, d);
    }
    if (ok == OPT_ADAMW) {
        dt_adamw_params p = {.field_mask = DT_ADAMW_PARAM_FIELD_LR, .lr = 3e-3};
        CK_OK(dt_optim_adamw_create(r.model, &p, &r.opt));
    } else {
        dt_sgd_params p = {.field_mask = DT_SGD_PARAM_FIELD_LR | DT_SGD_PARAM_FIELD_MOMENTUM,
                           .lr = 0.2,
                           .momentum = ok == OPT_SGD ? 0.9 : 0.0};
        CK_OK(dt_optim_sgd_create(r.model, &p, &r.opt));
    }
    return r;
}

static void run_free(run *r)
{
    dt_optim_destroy(r->opt);
    dt_module_destroy(r->model);
}

/* Steps [from, to) on the spec's batch windows; losses[s] = the global batch's. */
static void run_train(run *r, int from, int to, double *losses)
{
    int R = r->dpc != NULL ? dt_comm_size(r->dpc) : 1,
        k = r->dpc != NULL ? dt_comm_rank(r->dpc) : 0;
    int64_t lo = k * BATCH / R, hi = (k + 1) * BATCH / R;
    for (int s = from; s < to; s++) {
        dt_tensor *x = NULL, *y = NULL, *logits = NULL, *loss = NULL;
        dt_optim_zero_grad(r->opt);
        CK_OK(dt_token_data_batch(data, s, BATCH, SEQ, lo, hi, &x, &y));
        CK_OK(dt_module_call(r->model, x, &logits));
        CK_OK(dt_nn_cross_entropy(logits, y, &loss));
        dt_tensor_release(logits);
        double l = 0.0;
        CK_OK(dt_tensor_item(dt_tensor_is_distributed(loss) ? dt_to_local(loss) : loss, &l));
        l *= (double)(hi - lo) / (double)BATCH;
        if (r->dpc != NULL)
            CK_OK(dt_comm_allreduce(r->dpc, &l, &l, 1, DT_DTYPE_F64, DT_REDUCE_OP_SUM, NULL));
        losses[s] = l;
        CK_OK(dt_backward(loss, NULL));
        CK_OK(dt_optim_step(r->opt));
        dt_tensor_release(loss);
        dt_tensor_release(x);
        dt_tensor_release(y);
    }
}

#define MAX_STATES (2 * CK_MAX_PARAMS)

static char names[MAX_STATES][160];

static int cmp_name(const void *a, const void *b)
{
    return strcmp(names[*(const int *)a], names[*(const int *)b]);
}

/* The full optimizer state (collective when distributed), sorted by
 * "<fqn>.<state>" (the parameter order may differ between layouts). */
static int full_states(const dt_optim *o, dt_tensor **out)
{
    dt_tensor *t[MAX_STATES];
    int n = 0, order[MAX_STATES];
    for (int i = 0; i < dt_optim_num_params(o); i++)
        for (int s = 0; s < dt_optim_num_states(o); s++) {
            dt_tensor *placed = NULL;
            assert_true(n < MAX_STATES);
            snprintf(names[n], sizeof(names[0]), "%s.%s", dt_optim_param_fqn(o, i),
                     dt_optim_state_name(o, s));
            order[n] = n;
            CK_OK(dt_optim_state_placed(o, i, dt_optim_state_name(o, s), &placed));
            dt_tensor *full = NULL; /* may share the state's storage (Replicate): copied */
            if (dt_tensor_is_distributed(placed))
                CK_OK(dt_full_tensor(placed, &full));
            CK_OK(dt_tensor_clone(full != NULL ? full : placed, &t[n++]));
            dt_tensor_release(full);
            dt_tensor_release(placed);
        }
    qsort(order, (size_t)n, sizeof(int), cmp_name);
    static char sorted[MAX_STATES][160];
    for (int i = 0; i < n; i++) {
        out[i] = t[order[i]];
        memcpy(sorted[i], names[order[i]], sizeof(sorted[0]));
    }
    memcpy(names, sorted, sizeof(names));
    return n;
}

static void assert_losses(const double *want, const double *got, const char *what)
{
    for (int s = SAVE_AT; s < STEPS; s++)
        if (!(fabs(got[s] - want[s]) <= 1e-6 * fabs(want[s])))
            fail_msg("%s: step %d loss %.9f, uninterrupted %.9f", what, s, got[s], want[s]);
}

/* Load @p dir into @p r, check state and step, train to STEPS, compare losses. */
static void resume_check(run *r, const char *dir, dt_tensor **saved, int n_saved,
                         const double *want, const char *what)
{
    CK_OK(dt_checkpoint_load(r->model, r->opt, dir));
    assert_int_equal(dt_optim_step_count(r->opt), SAVE_AT);
    dt_tensor *got[MAX_STATES];
    int n = full_states(r->opt, got);
    assert_int_equal(n, n_saved);
    for (int i = 0; i < n; i++)
        if (!dt_tensor_equal(got[i], saved[i]))
            fail_msg("%s: optimizer state %s differs from the saved one", what, names[i]);
    ck_release_all(got, n);
    double losses[STEPS] = {0};
    run_train(r, SAVE_AT, STEPS, losses);
    assert_losses(want, losses, what);
}

static void resume_case(int stage, opt_kind ok)
{
    char dir[64], what[96];
    const char *on = ok == OPT_ADAMW ? "adamw" : ok == OPT_SGD ? "sgd-momentum" : "sgd";
    snprintf(dir, sizeof(dir), "ck_resume_%s_%s", dt_dp_stage_name((dt_dp_stage)stage), on);
    if (dt_runtime_rank(mr_rt) == 0)
        ck_rmdir(dir);
    mr_barrier();
    run src = run_make(m22, stage, ok, 11);
    double want[STEPS] = {0};
    run_train(&src, 0, SAVE_AT, want);
    CK_OK(dt_checkpoint_save(src.model, src.opt, dir));
    dt_tensor *saved[MAX_STATES];
    int n_saved = full_states(src.opt, saved);
    assert_int_equal(n_saved, dt_optim_num_params(src.opt) * (ok == OPT_ADAMW ? 2 : ok == OPT_SGD));
    run_train(&src, SAVE_AT, STEPS, want); /* the uninterrupted run */
    run_free(&src);
    assert_true(want[STEPS - 1] < want[0]);

    run tp4 = run_make(m4, -1, ok, 99); /* another seed: everything must come from the files */
    snprintf(what, sizeof(what), "dp=2 x tp=2 %s %s -> tp=4", dt_dp_stage_name((dt_dp_stage)stage),
             on);
    resume_check(&tp4, dir, saved, n_saved, want, what);
    run_free(&tp4);

    run z3 = run_make(m41, DT_DP_ZERO3, ok, 99);
    snprintf(what, sizeof(what), "dp=2 x tp=2 %s %s -> dp=4 zero3",
             dt_dp_stage_name((dt_dp_stage)stage), on);
    resume_check(&z3, dir, saved, n_saved, want, what);
    run_free(&z3);

    /* the same mesh under another data-parallel style (ZeRO-3 -> DDP etc.) */
    static const int other[4] = {DT_DP_ZERO2, DT_DP_DDP, DT_DP_ZERO1, DT_DP_DDP};
    run same = run_make(m22, other[stage], ok, 99);
    snprintf(what, sizeof(what), "dp=2 x tp=2 %s %s -> %s", dt_dp_stage_name((dt_dp_stage)stage),
             on, dt_dp_stage_name((dt_dp_stage)other[stage]));
    resume_check(&same, dir, saved, n_saved, want, what);
    run_free(&same);

    run one = run_make(NULL, -1, ok, 99); /* every rank alone */
    snprintf(what, sizeof(what), "dp=2 x tp=2 %s %s -> one rank",
             dt_dp_stage_name((dt_dp_stage)stage), on);
    resume_check(&one, dir, saved, n_saved, want, what);
    run_free(&one);
    ck_release_all(saved, n_saved);
    mr_barrier();
}

static void test_resume_ddp_sgd(void **state)
{
    (void)state;
    resume_case(DT_DP_DDP, OPT_SGD);
}
static void test_resume_ddp_adamw(void **state)
{
    (void)state;
    resume_case(DT_DP_DDP, OPT_ADAMW);
}
static void test_resume_zero1_sgd(void **state)
{
    (void)state;
    resume_case(DT_DP_ZERO1, OPT_SGD);
}
static void test_resume_zero2_adamw(void **state)
{
    (void)state;
    resume_case(DT_DP_ZERO2, OPT_ADAMW);
}
static void test_resume_zero3_sgd(void **state)
{
    (void)state;
    resume_case(DT_DP_ZERO3, OPT_SGD);
}
static void test_resume_zero3_adamw(void **state)
{
    (void)state;
    resume_case(DT_DP_ZERO3, OPT_ADAMW);
}

/* Plain SGD keeps no state: only the step count is saved, and resuming works. */
static void test_resume_sgd_stateless(void **state)
{
    (void)state;
    resume_case(DT_DP_ZERO2, OPT_SGD_PLAIN);
}

/* Mismatches between the checkpoint and the optimizer fail by name; each rank
 * works alone in its own directory (local models: not collective). */
static void test_resume_errors(void **state)
{
    (void)state;
    char dir[64], bare[64];
    snprintf(dir, sizeof(dir), "ck_resume_err_%d", dt_runtime_rank(mr_rt));
    snprintf(bare, sizeof(bare), "ck_resume_bare_%d", dt_runtime_rank(mr_rt));
    ck_rmdir(dir);
    ck_rmdir(bare);
    run a = run_make(NULL, -1, OPT_ADAMW, 5);
    double l[STEPS];
    run_train(&a, 0, 2, l);
    CK_OK(dt_checkpoint_save(a.model, a.opt, dir));
    CK_OK(dt_checkpoint_save(a.model, NULL, bare));

    run s = run_make(NULL, -1, OPT_SGD, 6);
    CK_FAILS(dt_checkpoint_load(s.model, s.opt, dir), DT_ERR_INVALID_ARG,
             "holds adamw optimizer state");
    CK_FAILS(dt_checkpoint_load(s.model, s.opt, bare), DT_ERR_INVALID_ARG,
             "holds no optimizer state");
    assert_int_equal(dt_optim_step_count(s.opt), 0);
    /* without an optimizer the state is ignored: the weights load */
    CK_OK(dt_checkpoint_load(s.model, NULL, dir));
    dt_tensor *wa[CK_MAX_PARAMS];
    int n = 0;
    ck_snapshot(a.model, wa, &n);
    ck_assert_params(s.model, wa, n, "model-only load of an optimizer checkpoint");
    ck_release_all(wa, n);

    /* SGD with momentum saved, SGD without loaded: the buffers are left over */
    run m = run_make(NULL, -1, OPT_SGD, 7), p = run_make(NULL, -1, OPT_SGD_PLAIN, 8);
    run_train(&m, 0, 1, l);
    CK_OK(dt_checkpoint_save(m.model, m.opt, dir));
    CK_FAILS(dt_checkpoint_load(p.model, p.opt, dir), DT_ERR_INVALID_ARG, "momentum_buffer");
    /* and the other way round they are missing */
    CK_OK(dt_checkpoint_save(p.model, p.opt, dir));
    CK_FAILS(dt_checkpoint_load(m.model, m.opt, dir), DT_ERR_INVALID_ARG, "momentum_buffer");
    /* an optimizer over another module's parameters */
    CK_FAILS(dt_checkpoint_save(m.model, p.opt, dir), DT_ERR_INVALID_ARG, "is not the module's");
    CK_FAILS(dt_checkpoint_load(m.model, p.opt, dir), DT_ERR_INVALID_ARG, "is not the module's");
    run_free(&a);
    run_free(&s);
    run_free(&m);
    run_free(&p);
    ck_rmdir(dir);
    ck_rmdir(bare);
    mr_barrier();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_ddp_sgd),       cmocka_unit_test(test_resume_ddp_adamw),
        cmocka_unit_test(test_resume_zero1_sgd),     cmocka_unit_test(test_resume_zero2_adamw),
        cmocka_unit_test(test_resume_zero3_sgd),     cmocka_unit_test(test_resume_zero3_adamw),
        cmocka_unit_test(test_resume_sgd_stateless), cmocka_unit_test(test_resume_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
