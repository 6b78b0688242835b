/* train_gpt's options: one table row per option, typed parsers, usage text. */
#include <errno.h>
#include <math.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"

typedef enum opt_kind { OPT_STR, OPT_INT, OPT_DOUBLE, OPT_U64, OPT_FLAG } opt_kind;

typedef struct opt_row {
    const char *name;
    opt_kind kind;
    size_t offset; /* into train_args */
    const char *meta;
    const char *help;
} opt_row;

#define FIELD(f) offsetof(train_args, f)

static const opt_row rows[] = {
    {"--config", OPT_STR, FIELD(config), "tiny|small", "model size (shared spec gpt.md)"},
    {"--dim", OPT_INT, FIELD(dim), "D", "override the preset's model width"},
    {"--n-heads", OPT_INT, FIELD(n_heads), "H",
     "override the preset's heads (tp must divide them)"},
    {"--n-layers", OPT_INT, FIELD(n_layers), "L", "override the preset's blocks"},
    {"--ffn-dim", OPT_INT, FIELD(ffn_dim), "F", "override the preset's MLP width"},
    {"--steps", OPT_INT, FIELD(steps), "N", "training steps"},
    {"--batch", OPT_INT, FIELD(batch), "B", "global batch (sequences per step)"},
    {"--seq", OPT_INT, FIELD(seq), "T", "sequence length (default: the config's max_seq_len)"},
    {"--lr", OPT_DOUBLE, FIELD(lr), "LR", "learning rate (default 0.1 sgd, 3e-3 adamw)"},
    {"--optim", OPT_STR, FIELD(optim), "sgd|adamw", "optimizer"},
    {"--momentum", OPT_DOUBLE, FIELD(momentum), "M", "SGD momentum (default 0)"},
    {"--weight-decay", OPT_DOUBLE, FIELD(weight_decay), "WD",
     "weight decay (default 0.1 adamw, 0 sgd)"},
    {"--clip-grad", OPT_DOUBLE, FIELD(clip_grad), "NORM", "clip gradients to this global norm"},
    {"--seed", OPT_U64, FIELD(seed), "S", "initialisation seed"},
    {"--data", OPT_STR, FIELD(data), "FILE", "flat uint16 token file"},
    {"--init", OPT_STR, FIELD(init), "FILE", "start from these weights (safetensors, by FQN)"},
    {"--save", OPT_STR, FIELD(save), "FILE", "save the trained weights (safetensors, by FQN)"},
    {"--print-model", OPT_FLAG, FIELD(print_model), NULL, "print the module tree and shapes"},
    {"--mesh", OPT_STR, FIELD(mesh), "tp=N",
     "device mesh, e.g. tp=4 or dp=1,tp=2 (default tp=<ranks> under dtrun)"},
    {"--sequence-parallel", OPT_FLAG, FIELD(sequence_parallel), NULL,
     "norms on sequence shards (the default plan's SequenceParallel variant)"},
    {"--plan", OPT_STR, FIELD(plan), "FILE", "tensor-parallel plan text (default: the spec's)"},
    {"--explain-plan", OPT_FLAG, FIELD(explain_plan), NULL,
     "print each parameter's placements, shapes and bytes on rank 0"},
    {"--data-parallel", OPT_STR, FIELD(data_parallel), "ddp|zero1|zero2|zero3",
     "data-parallel style over the mesh's dp dim (default zero2)"},
    {"--memory-report", OPT_FLAG, FIELD(memory_report), NULL,
     "one row per rank: current/peak MiB by category, host and device apart"},
    {"--save-checkpoint", OPT_STR, FIELD(save_checkpoint), "DIR",
     "sharded checkpoint (weights, optimizer state, step) after the last step"},
    {"--every", OPT_INT, FIELD(every), "N", "with --save-checkpoint: also every N steps"},
    {"--resume", OPT_STR, FIELD(resume), "DIR",
     "continue from a sharded checkpoint (any mesh) at its step, up to --steps"},
    {"--device", OPT_STR, FIELD(device), "cpu|sim|cuda",
     "where parameters, activations and optimizer state live (default: DT_DEVICE's)"},
    {"--cpu-offload", OPT_FLAG, FIELD(cpu_offload), NULL,
     "with ZeRO on a device: master weights, optimizer state and step in host memory"},
    {"--eager-init", OPT_FLAG, FIELD(eager_init), NULL,
     "on several ranks: build and initialise the full model on every rank, then shard it "
     "(default: deferred, each rank allocates and initialises its shards only)"},
    {"--estimate-memory", OPT_FLAG, FIELD(estimate_memory), NULL,
     "print the per-rank memory estimate before allocating anything, and the measured peaks "
     "next to it at the end"},
    {"--estimate-only", OPT_FLAG, FIELD(estimate_only), NULL,
     "print the per-rank memory estimate and stop (nothing is allocated)"},
    {"--precision", OPT_STR, FIELD(precision), "f32|bf16",
     "bf16: matmuls (forward and backward) on bf16-rounded operands with f32 accumulation, as "
     "torch.autocast; weights, optimizer and the other ops stay f32 (default f32)"},
    {"--reduce-dtype", OPT_STR, FIELD(reduce_dtype), "f32|bf16",
     "what gradients are sent and summed in over the dp dim (bf16: half the bytes; the "
     "optimizer still gets f32 gradients; default f32)"},
    {"--param-dtype", OPT_STR, FIELD(param_dtype), "f32|bf16",
     "what ZeRO gathers parameters in (bf16: half the bytes, the model computes on bf16 values "
     "of the f32 master weights; default f32)"},
    {"--micro-batches", OPT_INT, FIELD(micro_batches), "N",
     "split each rank's rows into N forward/backward passes, gradients summed and reduced once, "
     "in the last (default 1)"},
    {"--activation-checkpointing", OPT_FLAG, FIELD(activation_checkpointing), NULL,
     "keep only each block's input in forward and recompute the block in backward "
     "(dt_module_checkpoint_matching \"layers.*\"): less activation memory, one more forward"},
    {"--lr-schedule", OPT_STR, FIELD(lr_schedule), "constant|linear|cosine",
     "warm-up, then constant or a decay to --min-lr-ratio x lr at --steps (default: none)"},
    {"--warmup", OPT_INT, FIELD(warmup), "N", "with --lr-schedule: linear warm-up steps"},
    {"--min-lr-ratio", OPT_DOUBLE, FIELD(min_lr_ratio), "R",
     "with --lr-schedule: the floor, a fraction of the lr (default 0)"},
    {"--help", OPT_FLAG, FIELD(help), NULL, "this text"},
};

void train_args_defaults(train_args *a, const char *default_data)
{
    *a = (train_args){.config = "tiny",
                      .steps = 20,
                      .batch = 8,
                      .seq = 0,
                      .lr = -1.0,
                      .optim = "adamw",
                      .precision = "f32",
                      .reduce_dtype = "f32",
                      .param_dtype = "f32",
                      .micro_batches = 1,
                      .momentum = 0.0,
                      .weight_decay = -1.0,
                      .clip_grad = 0.0,
                      .seed = 1234,
                      .data = default_data,
                      .init = NULL,
                      .save = NULL};
}

static int parse_value(const opt_row *r, const char *v, train_args *a, FILE *err)
{
    char *end = NULL;
    void *dst = (char *)a + r->offset;
    errno = 0;
    switch (r->kind) {
    case OPT_STR:
        *(const char **)dst = v;
        return 0;
    case OPT_INT: {
        long long x = strtoll(v, &end, 10);
        if (errno != 0 || end == v || *end != '\0' || x < 0)
            break;
        *(int64_t *)dst = x;
        return 0;
    }
    case OPT_U64: {
        unsigned long long x = strtoull(v, &end, 10);
        if (errno != 0 || end == v || *end != '\0' || v[0] == '-')
            break;
        *(uint64_t *)dst = x;
        return 0;
    }
    case OPT_DOUBLE: {
        double x = strtod(v, &end); /* every double option is a finite x >= 0 */
        if (errno != 0 || end == v || *end != '\0' || !isfinite(x) || x < 0.0)
            break;
        *(double *)dst = x;
        return 0;
    }
    default:
        break;
    }
    static const char *const want[OPT_FLAG + 1] = {[OPT_INT] = "an integer >= 0",
                                                   [OPT_DOUBLE] = "a finite number >= 0",
                                                   [OPT_U64] = "an unsigned integer"};
    fprintf(err, "train_gpt: %s: bad value '%s' (expected %s: %s)\n", r->name, v, r->meta,
            want[r->kind] != NULL ? want[r->kind] : "a value");
    return -1;
}

int train_args_parse(int argc, char **argv, train_args *a, FILE *err)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *eq = strchr(arg, '=');
        size_t len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
        const opt_row *r = NULL;
        for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++)
            if (strlen(rows[k].name) == len && strncmp(rows[k].name, arg, len) == 0)
                r = &rows[k];
        if (r == NULL) {
            fprintf(err, "train_gpt: unknown option '%s' (see --help)\n", arg);
            return -1;
        }
        if (r->kind == OPT_FLAG) {
            *(bool *)((char *)a + r->offset) = true;
            continue;
        }
        const char *v = eq != NULL ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (v == NULL) {
            fprintf(err, "train_gpt: %s needs a value (%s)\n", r->name, r->meta);
            return -1;
        }
        if (parse_value(r, v, a, err) != 0)
            return -1;
    }
    if (strcmp(a->optim, "sgd") != 0 && strcmp(a->optim, "adamw") != 0) {
        fprintf(err, "train_gpt: --optim '%s' (expected sgd or adamw)\n", a->optim);
        return -1;
    }
    if (strcmp(a->precision, "f32") != 0 && strcmp(a->precision, "bf16") != 0) {
        fprintf(err, "train_gpt: --precision '%s' (expected f32 or bf16)\n", a->precision);
        return -1;
    }
    const char *const dtypes[2][2] = {{"--reduce-dtype", a->reduce_dtype},
                                      {"--param-dtype", a->param_dtype}};
    for (int i = 0; i < 2; i++)
        if (strcmp(dtypes[i][1], "f32") != 0 && strcmp(dtypes[i][1], "bf16") != 0) {
            fprintf(err, "train_gpt: %s '%s' (expected f32 or bf16)\n", dtypes[i][0], dtypes[i][1]);
            return -1;
        }
    if (a->lr_schedule != NULL && strcmp(a->lr_schedule, "constant") != 0 &&
        strcmp(a->lr_schedule, "linear") != 0 && strcmp(a->lr_schedule, "cosine") != 0) {
        fprintf(err, "train_gpt: --lr-schedule '%s' (expected constant, linear or cosine)\n",
                a->lr_schedule);
        return -1;
    }
    if (a->micro_batches < 1) {
        fprintf(err, "train_gpt: --micro-batches must be >= 1\n");
        return -1;
    }
    if (a->batch < 1 || a->clip_grad < 0.0) {
        fprintf(err, "train_gpt: --batch must be >= 1 and --clip-grad >= 0\n");
        return -1;
    }
    return 0;
}

void train_args_usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s [options]\n\nTrains the reference GPT on a token file, printing the "
            "loss every step,\nthen tokens/s and memory.\n\n",
            prog);
    for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
        char left[48];
        snprintf(left, sizeof(left), "%s%s%s", rows[k].name, rows[k].meta ? " " : "",
                 rows[k].meta ? rows[k].meta : "");
        fprintf(f, "  %-26s %s\n", left, rows[k].help);
    }
}
