/*
 * generate - continues a prompt with the reference GPT of a train_gpt
 * checkpoint, tensor-parallel, with a KV cache:
 *
 *   train_gpt --steps 200 --save-checkpoint ck
 *   generate --checkpoint ck --prompt "It is a truth" --tokens 40
 *   dtrun -n 2 generate --checkpoint ck --mesh tp=2 --prompt "It is" --tokens 40 \
 *       --temperature 0.8 --top-k 20 --seed 1
 *
 * The checkpoint may come from any mesh; the model is sharded by the spec's
 * tp plan, so each rank's KV cache holds its own heads (colwise wq/wk/wv).
 * Tokens are bytes, as train_gpt's data (examples/data). Prints the prompt
 * and its continuation, then a line with tokens/s. Greedy decoding gives the
 * same tokens on every tp size.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dtensor.h>

#include "args.h"
#include "model.h"
#include "sample.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Byte-level tokens: each byte of the text is its own id (examples/data). */
static dt_status tokenize(const gen_model *g, const char *text, int64_t extra, dt_tensor **out)
{
    int64_t n = (int64_t)strlen(text);
    if (n + extra - 1 > g->cfg.max_seq_len)
        return dt_set_error(DT_ERR_INVALID_ARG,
                            "generate: the prompt's %" PRId64 " tokens + --tokens %" PRId64
                            " exceed the model's max_seq_len %" PRId64 " + 1",
                            n, extra, g->cfg.max_seq_len);
    int64_t *ids = malloc((size_t)n * sizeof(*ids)), shape[2] = {1, n};
    if (ids == NULL)
        return dt_set_error(DT_ERR_NO_MEMORY, "generate: no memory for the prompt");
    for (int64_t i = 0; i < n; i++)
        ids[i] = (unsigned char)text[i];
    dt_status s = DT_OK;
    for (int64_t i = 0; i < n && s == DT_OK; i++)
        if (ids[i] >= g->cfg.vocab_size)
            s = dt_set_error(DT_ERR_INVALID_ARG,
                             "generate: prompt byte %" PRId64 " (0x%02" PRIx64
                             ") is beyond the vocabulary of %" PRId64,
                             i, ids[i], g->cfg.vocab_size);
    dt_tensor *host = NULL;
    if (s == DT_OK)
        s = dt_tensor_from_buffer(2, shape, DT_DTYPE_I64, ids, &host);
    free(ids);
    if (s == DT_OK)
        s = dt_tensor_to_device(host, g->device, out);
    dt_tensor_release(host);
    return s;
}

/* Feed @p ids, then pick the token after the last position into *next. */
static dt_status step(const gen_model *g, dt_kv_cache *c, dt_tensor *ids, gen_sampler *sm,
                      int64_t *next)
{
    dt_tensor *logits = NULL, *full = NULL, *host = NULL;
    dt_status s = dt_gpt_forward_cached(g->gpt, c, ids, &logits);
    if (s == DT_OK) /* sharded over the vocabulary: every rank gets all of it */
        s = dt_tensor_is_distributed(logits) ? dt_full_tensor(logits, &full)
                                             : (full = dt_tensor_retain(logits), DT_OK);
    if (s == DT_OK)
        s = dt_tensor_to_device(full, dt_device_cpu(), &host);
    if (s == DT_OK) {
        int64_t t = dt_tensor_dim(host, 1), v = dt_tensor_dim(host, 2);
        *next = gen_sample(sm, (const float *)dt_tensor_data(host) + (t - 1) * v, v);
        if (*next < 0)
            s = dt_set_error(DT_ERR_NO_MEMORY, "generate: no memory to sample");
    }
    dt_tensor_release(host);
    dt_tensor_release(full);
    dt_tensor_release(logits);
    return s;
}

/* The prompt, then @p k tokens printed as they come; *seconds: prompt to last token. */
static dt_status generate(const gen_model *g, const gen_args *a, double *seconds)
{
    dt_tensor *ids = NULL;
    dt_kv_cache *cache = NULL;
    DT_TRY_RETURN(tokenize(g, a->prompt, a->tokens, &ids));
    int64_t n = dt_tensor_dim(ids, 1);
    dt_status s = dt_kv_cache_create(g->gpt, 1, n + a->tokens - 1, &cache);
    gen_sampler sm = {
        .greedy = a->greedy, .temperature = a->temperature, .top_k = a->top_k, .state = a->seed};
    fputs(a->prompt, stdout);
    double t0 = now();
    for (int64_t i = 0; i < a->tokens && s == DT_OK; i++) {
        int64_t next = 0, one[2] = {1, 1};
        s = step(g, cache, ids, &sm, &next);
        if (s == DT_OK)
            putchar(next < 256 ? (int)next : '?'); /* ids past a byte: not text */
        dt_tensor *host = NULL;
        dt_tensor_release(ids);
        ids = NULL;
        if (s == DT_OK)
            s = dt_tensor_from_buffer(2, one, DT_DTYPE_I64, &next, &host);
        if (s == DT_OK)
            s = dt_tensor_to_device(host, g->device, &ids);
        dt_tensor_release(host);
    }
    *seconds = now() - t0;
    putchar('\n');
    dt_tensor_release(ids);
    dt_kv_cache_destroy(cache);
    return s;
}

int main(int argc, char **argv)
{
    gen_args a;
    if (gen_args_parse(argc, argv, &a, stderr) != 0)
        return 2;
    if (a.help) {
        gen_args_usage(stdout, argv[0]);
        return 0;
    }
    gen_model g;
    DT_TRY(gen_model_open(&g, a.checkpoint, a.mesh));
    double seconds = 0.0;
    DT_TRY(generate(&g, &a, &seconds));
    printf("%" PRId64 " tokens in %.3f s: %.1f tokens/s (tp=%d, %s)\n", a.tokens, seconds,
           (double)a.tokens / seconds, g.tp, a.greedy ? "greedy" : "sampled");
    gen_model_close(&g);
    return 0;
}
