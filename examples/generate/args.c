/* generate's options (see args.h): each parsed with a message naming the bad value. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"

static int bad(FILE *err, const char *opt, const char *v, const char *want)
{
    fprintf(err, "generate: %s: bad value '%s' (expected %s)\n", opt, v, want);
    return -1;
}

static int parse_i64(FILE *err, const char *opt, const char *v, int64_t min, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || x < min) {
        char want[64];
        snprintf(want, sizeof(want), "an integer >= %" PRId64, min);
        return bad(err, opt, v, want);
    }
    *out = x;
    return 0;
}

/* One option with its value @p v (NULL for a flag); 1 for an unknown option. */
static int parse_one(const char *opt, const char *v, gen_args *a, FILE *err)
{
    char *end = NULL;
    errno = 0;
    if (strcmp(opt, "--checkpoint") == 0)
        a->checkpoint = v;
    else if (strcmp(opt, "--mesh") == 0)
        a->mesh = v;
    else if (strcmp(opt, "--prompt") == 0)
        a->prompt = v;
    else if (strcmp(opt, "--tokens") == 0)
        return parse_i64(err, opt, v, 1, &a->tokens);
    else if (strcmp(opt, "--top-k") == 0) {
        a->sampling = true;
        return parse_i64(err, opt, v, 0, &a->top_k);
    } else if (strcmp(opt, "--temperature") == 0) {
        a->sampling = true;
        a->temperature = strtod(v, &end);
        if (errno != 0 || end == v || *end != '\0' || !isfinite(a->temperature) ||
            a->temperature <= 0.0)
            return bad(err, opt, v, "a finite number > 0");
    } else if (strcmp(opt, "--seed") == 0) {
        a->sampling = true;
        unsigned long long x = strtoull(v, &end, 10);
        if (errno != 0 || end == v || *end != '\0' || v[0] == '-')
            return bad(err, opt, v, "an unsigned integer");
        a->seed = x;
    } else
        return 1;
    return 0;
}

int gen_args_parse(int argc, char **argv, gen_args *a, FILE *err)
{
    *a = (gen_args){.temperature = 1.0};
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i];
        if (strcmp(opt, "--help") == 0 || strcmp(opt, "--greedy") == 0) {
            a->help |= opt[2] == 'h';
            a->greedy |= opt[2] == 'g';
            continue;
        }
        if (i + 1 == argc) {
            bool known = parse_one(opt, "1", &(gen_args){0}, err) != 1;
            fprintf(err,
                    known ? "generate: %s needs a value\n"
                          : "generate: unknown option '%s' (see --help)\n",
                    opt);
            return -1;
        }
        int r = parse_one(opt, argv[i + 1], a, err);
        if (r == 1) {
            fprintf(err, "generate: unknown option '%s' (see --help)\n", opt);
            return -1;
        }
        if (r != 0)
            return -1;
        i++;
    }
    if (a->help)
        return 0;
    if (a->greedy && a->sampling) {
        fprintf(err, "generate: --greedy excludes --temperature, --top-k and --seed\n");
        return -1;
    }
    const char *missing = a->checkpoint == NULL ? "--checkpoint DIR"
                          : a->prompt == NULL   ? "--prompt TEXT"
                          : a->tokens == 0      ? "--tokens K"
                                                : NULL;
    if (missing != NULL) {
        fprintf(err, "generate: %s is required (see --help)\n", missing);
        return -1;
    }
    if (a->prompt[0] == '\0') {
        fprintf(err, "generate: --prompt '' is empty (it needs at least one character)\n");
        return -1;
    }
    a->greedy = !a->sampling;
    return 0;
}

void gen_args_usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s --checkpoint DIR [--mesh tp=N] --prompt TEXT --tokens K\n"
            "          [--greedy | --temperature T --top-k K --seed S]\n\n"
            "Loads a train_gpt checkpoint (saved on any mesh), shards the GPT over tp=N\n"
            "ranks (launch with dtrun -n N) and continues TEXT by K tokens with a KV cache;\n"
            "prints the prompt and its continuation, then tokens/s.\n\n"
            "  --checkpoint DIR   a train_gpt --save-checkpoint directory (with config.json)\n"
            "  --mesh tp=N        tensor-parallel ranks (default: the number of processes)\n"
            "  --prompt TEXT      the text to continue (byte-level tokens)\n"
            "  --tokens K         tokens to generate\n"
            "  --greedy           always the most likely token (the default)\n"
            "  --temperature T    sample from softmax(logits / T) (default 1)\n"
            "  --top-k K          sample among the K most likely tokens (0: all)\n"
            "  --seed S           the sampler's seed (default 0)\n",
            prog);
}
