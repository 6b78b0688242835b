/*
 * train_gpt - trains the reference GPT (shared spec gpt.md) on a token file
 * and prints the loss every step, then tokens/s and memory by category.
 *
 *   train_gpt --config tiny --steps 30 --optim adamw --lr 3e-3
 *   train_gpt --init weights.safetensors --save out.safetensors
 *   dtrun -n 4 train_gpt --mesh dp=2,tp=2 --steps 100 --save-checkpoint ck --every 50
 *   dtrun -n 4 train_gpt --mesh tp=4 --steps 200 --resume ck   (continues at step 100)
 *   dtrun -n 4 train_gpt --mesh dp=2,tp=2 --data-parallel zero3 --estimate-only
 *   train_gpt --config small --activation-checkpointing --memory-report
 *
 * On several ranks the model is built deferred (shapes only), sharded, then
 * materialised: each rank allocates and initialises only its shards, and
 * --init / --resume read only their slices of the files. --eager-init builds
 * the full model on every rank first (the same values).
 *
 * The parallel options (--mesh, --sequence-parallel, --plan, --data-parallel)
 * only change the placements of the model's parameters (parallel.c,
 * data_parallel.c), not this loop; nor does --activation-checkpointing (the
 * blocks layers.* recompute their activations in backward: the same losses,
 * a lower activation peak).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>
#include <unistd.h>

#include <dtensor.h>

#include "args.h"
#include "checkpointing.h"
#include "data_parallel.h"
#include "estimate.h"
#include "parallel.h"

#ifndef DT_DEFAULT_TOKENS
#define DT_DEFAULT_TOKENS "tokens.bin"
#endif

/* Seconds on a monotonic clock. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* main's checks: one message naming the program, then the cleanup at out */
/* What failed on this rank, for the other ranks (fail_everywhere). */
static dt_status fail_status = DT_OK;
static char fail_msg[1024];

#define TRY(call)                                                                                  \
    do {                                                                                           \
        dt_status try_s_ = (call);                                                                 \
        if (try_s_ != DT_OK) {                                                                     \
            fail_status = try_s_;                                                                  \
            snprintf(fail_msg, sizeof(fail_msg), "%s", dt_last_error());                           \
            fprintf(stderr, "train_gpt: %s: %s\n", dt_status_str(try_s_), fail_msg);               \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

/*
 * A failure on this rank alone (out of memory under its budget, a bad file)
 * must reach the others with its reason, not as a peer that just exited:
 * abort the world with it (a no-op when the failure was another rank's abort).
 */
static void fail_everywhere(const train_parallel *par)
{
    if (fail_status != DT_OK && par->rt != NULL && par->world > 1)
        (void)dt_comm_abort(dt_runtime_world(par->rt), fail_status, fail_msg);
}

static dt_status make_optimizer(const train_args *a, dt_module *model, dt_optim **out)
{
    if (strcmp(a->optim, "sgd") == 0) {
        dt_sgd_params p = {.field_mask = DT_SGD_PARAM_FIELD_LR | DT_SGD_PARAM_FIELD_MOMENTUM |
                                         DT_SGD_PARAM_FIELD_WEIGHT_DECAY,
                           .lr = a->lr >= 0.0 ? a->lr : 0.1,
                           .momentum = a->momentum,
                           .weight_decay = a->weight_decay >= 0.0 ? a->weight_decay : 0.0};
        return dt_optim_sgd_create(model, &p, out);
    }
    dt_adamw_params p = {.field_mask = DT_ADAMW_PARAM_FIELD_LR | DT_ADAMW_PARAM_FIELD_WEIGHT_DECAY,
                         .lr = a->lr >= 0.0 ? a->lr : 3e-3,
                         .weight_decay = a->weight_decay >= 0.0 ? a->weight_decay : 0.1};
    return dt_optim_adamw_create(model, &p, out);
}

/* The GPT; @p deferred: without storage (dt_module_materialize fills it). */
static dt_status create_model(const dt_gpt_config *cfg, uint64_t seed, bool deferred,
                              dt_module **out)
{
    if (deferred)
        dt_nn_deferred_begin();
    dt_status s = dt_gpt_create(cfg, seed, out);
    if (deferred)
        dt_nn_deferred_end();
    return s;
}

/* Replace *t by its copy on @p device (nothing to do when it is there). */
static dt_status to_device(dt_tensor **t, dt_device device)
{
    dt_tensor *moved = NULL;
    CHECK(dt_tensor_to_device(*t, device, &moved));
    dt_tensor_release(*t);
    *t = moved;
    return DT_OK;
}

/* --lr-schedule: set up in main once the optimizer has its base lr. */
static struct {
    bool on;
    dt_lr_schedule_params p;
    double base_lr;
} schedule;

/* --lr-schedule / --warmup / --min-lr-ratio into the schedule, for --steps steps. */
static dt_status schedule_setup(const train_args *a, const dt_optim *opt)
{
    if (a->lr_schedule == NULL)
        return DT_OK;
    dt_lr_schedule_kind k = DT_LR_CONSTANT;
    if (strcmp(a->lr_schedule, "linear") == 0)
        k = DT_LR_LINEAR;
    else if (strcmp(a->lr_schedule, "cosine") == 0)
        k = DT_LR_COSINE;
    schedule.p = (dt_lr_schedule_params){.field_mask = DT_LR_SCHEDULE_PARAM_FIELD_KIND |
                                                       DT_LR_SCHEDULE_PARAM_FIELD_WARMUP_STEPS |
                                                       DT_LR_SCHEDULE_PARAM_FIELD_TOTAL_STEPS |
                                                       DT_LR_SCHEDULE_PARAM_FIELD_MIN_LR_RATIO,
                                         .kind = k,
                                         .warmup_steps = a->warmup,
                                         .total_steps = a->steps,
                                         .min_lr_ratio = a->min_lr_ratio};
    schedule.base_lr = dt_optim_lr(opt);
    double lr = 0.0; /* checked now, not at the first step */
    CHECK(dt_lr_schedule_value(&schedule.p, schedule.base_lr, 0, &lr));
    schedule.on = true;
    return DT_OK;
}

/* Rows [lo, hi) of the global batch: forward, loss scaled by @p weight,
 * backward; @p loss_out gets the unscaled mean loss of these rows. */
static dt_status micro_step(const train_args *a, const train_parallel *par, dt_module *model,
                            const dt_token_data *data, int64_t step, int64_t seq, int64_t lo,
                            int64_t hi, double weight, double *loss_out)
{
    dt_tensor *x = NULL, *y = NULL, *logits = NULL, *loss = NULL, *scaled = NULL;
    dt_status s = dt_token_data_batch(data, step, a->batch, seq, lo, hi, &x, &y);
    if (s == DT_OK)
        s = to_device(&x, par->device);
    if (s == DT_OK)
        s = to_device(&y, par->device);
    if (s == DT_OK)
        s = dt_module_call(model, x, &logits);
    if (s == DT_OK)
        s = dt_nn_cross_entropy(logits, y, &loss);
    dt_tensor_release(logits); /* the graph keeps what backward needs */
    if (s == DT_OK)
        s = dt_item(loss, loss_out);
    if (s == DT_OK)
        s = weight == 1.0 ? dt_backward(loss, NULL) : dt_scale(loss, weight, &scaled);
    if (s == DT_OK && scaled != NULL)
        s = dt_backward(scaled, NULL);
    dt_tensor_release(scaled);
    dt_tensor_release(loss);
    dt_tensor_release(x);
    dt_tensor_release(y);
    return s;
}

/*
 * One step: this dp rank's rows in --micro-batches pieces (gradients summed,
 * synced over dp only in the last backward), optional clipping, update;
 * @p loss_out gets the global batch's loss.
 */
static dt_status train_step(const train_args *a, const train_parallel *par, dt_module *model,
                            dt_optim *opt, const dt_token_data *data, int64_t step, int64_t seq,
                            double *loss_out, double *norm_out)
{
    int64_t lo = 0, hi = 0, n = a->micro_batches; /* this dp rank's rows of the global batch */
    CHECK(dt_dp_rows(par->mesh, train_dp_dim(par), a->batch, &lo, &hi));
    if (n > hi - lo)
        return dt_set_error(DT_ERR_INVALID_ARG,
                            "train_gpt: --micro-batches %" PRId64
                            " is more than this rank's %" PRId64 " rows of --batch %" PRId64,
                            n, hi - lo, a->batch);
    dt_optim_zero_grad(opt);
    double local = 0.0; /* the mean loss over this rank's rows */
    for (int64_t j = 0; j < n; j++) {
        int64_t mlo = lo + j * (hi - lo) / n, mhi = lo + (j + 1) * (hi - lo) / n;
        double w = (double)(mhi - mlo) / (double)(hi - lo), v = 0.0;
        if (par->data_parallel) /* one reduction, in the last backward */
            CHECK(dt_dp_set_gradient_sync(model, j == n - 1));
        CHECK(micro_step(a, par, model, data, step, seq, mlo, mhi, w, &v));
        local += w * v;
    }
    dt_tensor *lt = NULL; /* the global batch's loss, whatever the mesh */
    CHECK(dt_tensor_from_buffer(0, NULL, DT_DTYPE_F64, &local, &lt));
    dt_status s = dt_dp_mean_loss(lt, par->mesh, train_dp_dim(par), a->batch, loss_out);
    dt_tensor_release(lt);
    CHECK(s);
    if (a->clip_grad > 0.0)
        CHECK(dt_clip_grad_norm(model, a->clip_grad, norm_out));
    if (schedule.on) /* this step's lr */
        CHECK(dt_optim_schedule(opt, &schedule.p, schedule.base_lr));
    return dt_optim_step(opt);
}

/* The GPT config of the preset with the size options applied, and the
 * sequence length; 0, or -1 with the reason on stderr. */
static int configure(const train_args *a, dt_gpt_config *cfg, int64_t *seq)
{
    dt_status s = dt_gpt_config_preset(a->config, cfg);
    if (s != DT_OK) {
        fprintf(stderr, "train_gpt: %s: %s\n", dt_status_str(s), dt_last_error());
        return -1;
    }
    cfg->dim = a->dim > 0 ? a->dim : cfg->dim; /* e.g. --dim 48 --n-heads 6 for tp=3 */
    cfg->n_heads = a->n_heads > 0 ? a->n_heads : cfg->n_heads;
    cfg->n_layers = a->n_layers > 0 ? a->n_layers : cfg->n_layers;
    cfg->ffn_dim = a->ffn_dim > 0 ? a->ffn_dim : cfg->ffn_dim;
    *seq = a->seq > 0 ? a->seq : cfg->max_seq_len;
    if (*seq > cfg->max_seq_len) {
        fprintf(stderr, "train_gpt: --seq %" PRId64 " exceeds max_seq_len %" PRId64 " of '%s'\n",
                *seq, cfg->max_seq_len, a->config);
        return -1;
    }
    return 0;
}

/* Step @p s's report: on a terminal one line that rewrites itself (step,
 * loss, tokens/s, time left), else a plain line per step for logs and scripts. */
static void print_step(const train_args *a, int64_t s, int64_t first, double loss, double norm,
                       double step_s, double elapsed, int64_t tokens_per_step, bool tty)
{
    if (!tty) {
        printf("step %4" PRId64 "  loss %.6f", s, loss);
        if (a->clip_grad > 0.0)
            printf("  grad_norm %.4f", norm);
        printf("  (%.1f ms)\n", 1e3 * step_s);
    } else {
        double done = (double)(s + 1 - first), left = (double)(a->steps - s - 1);
        printf("\rstep %" PRId64 "/%" PRId64 "  loss %.6f", s + 1, a->steps, loss);
        if (a->clip_grad > 0.0)
            printf("  grad_norm %.4f", norm);
        printf("  %.0f tokens/s  ETA %.0f s\033[K", done * (double)tokens_per_step / elapsed,
               left * elapsed / done);
        if (s + 1 == a->steps)
            printf("\n");
    }
    fflush(stdout);
}

/* Steps [first, a->steps): a report per step, checkpoints as asked, then tokens/s. */
static dt_status train_loop(const train_args *a, const train_parallel *par, dt_module *model,
                            dt_optim *opt, const dt_token_data *data, int64_t first, int64_t seq)
{
    bool tty = isatty(fileno(stdout));
    double t0 = now();
    for (int64_t s = first; s < a->steps; s++) {
        double loss = 0.0, norm = 0.0, ts = now();
        CHECK(train_step(a, par, model, opt, data, s, seq, &loss, &norm));
        print_step(a, s, first, loss, norm, now() - ts, now() - t0, a->batch * seq, tty);
        CHECK(train_ck_after_step(par, a->save_checkpoint, a->every, s, a->steps, model, opt));
    }
    double elapsed = now() - t0;
    if (a->steps > first)
        printf("%.0f tokens/s (%" PRId64 " steps in %.2f s)\n",
               (double)((a->steps - first) * a->batch * seq) / elapsed, a->steps - first, elapsed);
    return DT_OK;
}

int main(int argc, char **argv)
{
    train_args a;
    train_args_defaults(&a, DT_DEFAULT_TOKENS);
    if (train_args_parse(argc, argv, &a, stderr) != 0)
        return 2;
    if (a.help) {
        train_args_usage(stdout, argv[0]);
        return 0;
    }
    int rc = 1;
    dt_module *model = NULL;
    dt_optim *opt = NULL;
    dt_token_data *data = NULL;
    train_parallel par = {.tp = 1};
    dt_gpt_config cfg;
    int64_t seq = 0;
    dt_memory_estimate est;
    TRY(train_parallel_init(&par));
    if (configure(&a, &cfg, &seq) != 0)
        goto out;
    TRY(train_estimate(&par, &a, &cfg, seq, &est)); /* before any tensor exists */
    if (a.estimate_memory || a.estimate_only)
        train_estimate_print(&par, &est, stdout);
    if (a.estimate_only) {
        rc = 0;
        goto out;
    }
    TRY(dt_token_data_open(a.data, &data));
    if (dt_token_data_vocab(data) > cfg.vocab_size) {
        fprintf(stderr, "train_gpt: %s holds token id %" PRId64 ", beyond vocab_size %" PRId64 "\n",
                a.data, dt_token_data_vocab(data) - 1, cfg.vocab_size);
        goto out;
    }
    /* several ranks: shapes only until sharded, then each rank its shards */
    bool deferred = par.world > 1 && !a.eager_init;
    TRY(create_model(&cfg, a.seed, deferred, &model));
    if (a.init != NULL && !deferred)
        TRY(dt_load_full(model, a.init)); /* validated before anything is written */
    par.device = dt_runtime_device(par.rt);
    if (a.device != NULL)
        TRY(dt_device_parse(a.device, &par.device));
    TRY(dt_module_to(model, par.device)); /* before sharding: styles keep the device */
    /* shard the weights: any mesh trains the same model */
    TRY(train_parallel_apply(&par, a.mesh, a.sequence_parallel, a.plan, a.explain_plan, model));
    if (deferred && a.cpu_offload) /* offload copies the tp shards: they need values */
        TRY(dt_module_materialize(model));
    /* then dp, then the optimizer */
    dt_dtype reduce_dtype = strcmp(a.reduce_dtype, "bf16") == 0 ? DT_DTYPE_BF16 : DT_DTYPE_F32;
    dt_dtype param_dtype = strcmp(a.param_dtype, "bf16") == 0 ? DT_DTYPE_BF16 : DT_DTYPE_F32;
    TRY(train_dp_apply(&par, a.data_parallel, a.cpu_offload, reduce_dtype, param_dtype, a.batch,
                       model));
    if (a.activation_checkpointing) /* the blocks keep only their inputs */
        TRY(dt_module_checkpoint_matching(model, "layers.*", NULL));
    TRY(dt_module_materialize(model)); /* deferred: now, shard by shard */
    if (a.init != NULL && deferred)    /* each rank reads its shards' boxes of the file */
        TRY(dt_load_full(model, a.init));
    TRY(make_optimizer(&a, model, &opt));
    TRY(schedule_setup(&a, opt));
    if (strcmp(a.precision, "bf16") == 0) /* the matmuls of this thread's forward and backward */
        TRY(dt_autocast_set(DT_DTYPE_BF16, NULL));
    int64_t first = 0; /* a resumed run continues at the checkpoint's step */
    if (a.resume != NULL)
        TRY(train_ck_resume(&par, a.resume, model, opt, &first));
    if (a.print_model)
        TRY(dt_module_print(model, stdout));
    printf("GPT %s: %" PRId64 " parameters (dim %" PRId64 ", %" PRId64 " layers, %" PRId64
           " heads, ffn %" PRId64 ", vocab %" PRId64 ")\n",
           a.config, dt_module_param_numel(model), cfg.dim, cfg.n_layers, cfg.n_heads, cfg.ffn_dim,
           cfg.vocab_size);
    printf("data %s: %" PRId64 " tokens; batch %" PRId64 " x seq %" PRId64
           "; %s lr %g; device %s%s\n",
           a.data, dt_token_data_size(data), a.batch, seq, a.optim, dt_optim_lr(opt),
           dt_device_type_name(par.device.type),
           dt_autocast_get() == DT_DTYPE_BF16 ? "; matmuls in bf16" : "");
    fflush(stdout);

    TRY(train_loop(&a, &par, model, opt, data, first, seq));
    if (a.save != NULL) {
        TRY(dt_save_full(model, a.save));
        printf("saved %s\n", a.save);
    }
    TRY(train_dp_memory_report(&par, a.memory_report, stdout));
    if (a.memory_report || a.estimate_memory)
        TRY(train_estimate_compare(&par, &est, stdout));
    rc = 0;
out:
    fail_everywhere(&par);
    dt_optim_destroy(opt);
    dt_module_destroy(model);
    dt_token_data_close(data);
    train_parallel_destroy(&par);
    return rc;
}
