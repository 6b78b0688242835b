/*
 * dt_gpt_memory_estimate: the per-rank bytes of a train_gpt step, found by
 * replaying, without allocating, what the code allocates and frees, in its
 * order: the parameter shards (materialised deferred), ZeRO gathers and
 * their packed receive buffers, every forward op's output and what autograd
 * saves of it (src/nn/{gpt,block,attention}.c, src/ops/), the backward's
 * gradients and what data parallelism does with each (dp_grad.c: buckets,
 * all-reduce, reduce-scatter into a shard, packed copies), and the
 * optimizer's state. Two steps are replayed: the first (state allocated at
 * the optimizer step) and a steady one (state live through forward and
 * backward); the peak is the larger. The largest rank is modelled: rank 0
 * of every mesh dim holds the largest torch.chunk pieces and the most rows.
 * The forward/backward walk is in memory_estimate_step.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "styles/data_parallel/memory_estimate.h"

int64_t est__chunk(int64_t n, int parts)
{
    return parts > 1 ? (n + parts - 1) / parts : n;
}

void est__take(est_sim *s, int cat, int64_t bytes)
{
    s->cur[cat] += bytes;
    s->total += bytes;
    if (s->cur[cat] > s->peak[cat])
        s->peak[cat] = s->cur[cat];
    if (s->total > s->total_peak) {
        s->total_peak = s->total;
        s->peak_at = s->phase;
    }
}

void est__give(est_sim *s, int cat, int64_t bytes)
{
    est__take(s, cat, -bytes);
}

/* Append parameter [d0, d1] (d1 = 0: 1-d) of @p unit, tp-sharded along @p tpdim (-1: not). */
static void add_param(est_sim *s, int unit, int64_t d0, int64_t d1, int tpdim)
{
    est_param *p = &s->p[s->n_params++];
    int64_t shape[2] = {d0, d1};
    int nd = d1 > 0 ? 2 : 1;
    if (tpdim >= 0)
        shape[tpdim] = est__chunk(shape[tpdim], s->c.tp);
    p->unit = unit;
    p->local = shape[0] * (nd == 2 ? shape[1] : 1);
    /* the dp dim: the first the tp plan does not shard, else 0 (strided:
     * dp splits tp's pieces; dp_apply.c pick_dim) */
    p->k = 0;
    for (int d = nd - 1; d >= 0; d--)
        if (d != tpdim || !s->tp_plan)
            p->k = d;
    p->shard = p->local;
    if (s->zero && p->k >= 0)
        p->shard = p->local / shape[p->k] * est__chunk(shape[p->k], s->c.dp);
    p->gathers = s->zero && p->k >= 0;
}

/* The GPT's parameters in FQN order with the default plan's tp dims. */
static void list_params(est_sim *s)
{
    const dt_gpt_config *g = &s->c.gpt;
    int64_t D = g->dim, F = g->ffn_dim;
    add_param(s, 1, g->vocab_size, D, 0); /* tok_embeddings: rowwise = vocab rows */
    add_param(s, 2, g->max_seq_len, D, -1);
    for (int64_t l = 0; l < g->n_layers; l++) {
        int u = 3 + (int)l;
        add_param(s, u, D, 0, -1), add_param(s, u, D, 0, -1); /* attention_norm */
        for (int i = 0; i < 3; i++)                           /* wq, wk, wv: colwise */
            add_param(s, u, D, D, 0), add_param(s, u, D, 0, 0);
        add_param(s, u, D, D, 1), add_param(s, u, D, 0, -1);  /* wo: rowwise */
        add_param(s, u, D, 0, -1), add_param(s, u, D, 0, -1); /* ffn_norm */
        add_param(s, u, F, D, 0), add_param(s, u, F, 0, 0);   /* w1: colwise */
        add_param(s, u, D, F, 1), add_param(s, u, D, 0, -1);  /* w2: rowwise */
    }
    int u = 3 + (int)g->n_layers;
    add_param(s, u, D, 0, -1), add_param(s, u, D, 0, -1); /* norm */
    add_param(s, u + 1, g->vocab_size, D, 0);             /* output: colwise, no bias */
    s->n_units = u + 2;
}

static int64_t param_bytes(const est_sim *s, bool shards)
{
    int64_t n = 0;
    for (int i = 0; i < s->n_params; i++)
        n += shards ? s->p[i].shard : s->p[i].local;
    return 4 * n;
}

static int optim_states(const dt_memory_estimate_config *c)
{
    if (c->optim != NULL && strcmp(c->optim, "sgd") == 0)
        return c->momentum != 0.0 ? 1 : 0;
    return 2; /* adamw: exp_avg, exp_avg_sq */
}

static dt_status check(const dt_memory_estimate_config *c)
{
    const dt_gpt_config *g = &c->gpt;
    if (g->vocab_size <= 0 || g->max_seq_len <= 0 || g->dim <= 0 || g->n_layers <= 0 ||
        g->n_heads <= 0 || g->ffn_dim <= 0 || g->dim % g->n_heads != 0)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_gpt_memory_estimate: bad GPT config (dim %lld, heads %lld, layers %lld)",
                      (long long)g->dim, (long long)g->n_heads, (long long)g->n_layers);
    if (c->dp < 1 || c->tp < 1 || c->batch < 1 || c->seq < 1 || c->seq > g->max_seq_len)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_gpt_memory_estimate: dp %d, tp %d, batch %lld, seq %lld (max_seq_len "
                      "%lld): each must be >= 1, seq <= max_seq_len",
                      c->dp, c->tp, (long long)c->batch, (long long)c->seq,
                      (long long)g->max_seq_len);
    if (c->optim != NULL && strcmp(c->optim, "sgd") != 0 && strcmp(c->optim, "adamw") != 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_gpt_memory_estimate: optimizer '%s' (sgd or adamw)",
                      c->optim);
    if (c->data_parallel && ((int)c->stage < 0 || c->stage > DT_DP_ZERO3))
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_gpt_memory_estimate: bad stage %d", (int)c->stage);
    if (!c->data_parallel && c->dp > 1)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_gpt_memory_estimate: dp %d without a data-parallel style", c->dp);
    if (c->gpt.n_layers > EST_MAX_LAYERS)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_gpt_memory_estimate: %lld layers (at most %d)",
                      (long long)c->gpt.n_layers, EST_MAX_LAYERS);
    return DT_OK;
}

/* Building and sharding: deferred, each rank allocates its shards only; eager,
 * the full model first, then its tp-local copy next to it. */
static void replay_init(est_sim *s)
{
    s->phase = "init";
    if (s->c.eager_init || (s->c.dp == 1 && s->c.tp == 1)) {
        est__take(s, DT_MEM_PARAMETER, 4 * s->full_params);
        if (s->tp_plan) {
            est__take(s, DT_MEM_PARAMETER, param_bytes(s, false));
            est__give(s, DT_MEM_PARAMETER, 4 * s->full_params);
        }
        if (s->zero) { /* the shards cut out of the tp-local tensors */
            est__take(s, DT_MEM_PARAMETER, param_bytes(s, true));
            est__give(s, DT_MEM_PARAMETER, param_bytes(s, false));
        }
        return;
    }
    est__take(s, DT_MEM_PARAMETER, param_bytes(s, true));
}

/* The replay on @p s (zeroed, its config set) into @p out. */
static void replay(est_sim *s, dt_memory_estimate *out)
{
    const dt_memory_estimate_config *c = &s->c;
    const dt_gpt_config *g = &c->gpt;
    s->tp_plan = c->tp > 1 || c->data_parallel; /* train_gpt applies the plan on any mesh */
    s->zero = c->data_parallel && c->stage != DT_DP_DDP;
    s->n_states = optim_states(c);
    s->full_params =
        g->vocab_size * g->dim * 2 + g->max_seq_len * g->dim + 2 * g->dim +
        g->n_layers * (4 * g->dim * g->dim + 2 * g->dim * g->ffn_dim + 9 * g->dim + g->ffn_dim);
    list_params(s);
    replay_init(s);
    for (int step = 0; step < 2; step++)
        est__replay_step(s, step);
    memset(out, 0, sizeof(*out));
    for (int k = 0; k < DT_MEM_CATEGORY_COUNT; k++)
        out->peak[k] = s->peak[k];
    out->total_peak = s->total_peak;
    out->peak_at = s->peak_at;
    out->model_bytes = 4 * s->full_params;
}

dt_status dt_gpt_memory_estimate(const dt_memory_estimate_config *c, dt_memory_estimate *out)
{
    DT_ARG_NOT_NULL(c);
    DT_ARG_NOT_NULL(out);
    DT_CHECK(check(c));
    est_sim *s = calloc(1, sizeof(*s)); /* large: a row per parameter */
    if (s == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_gpt_memory_estimate: no memory");
    s->c = *c;
    replay(s, out);
    free(s);
    return DT_OK;
}

void dt_memory_estimate_print(const dt_memory_estimate *e, const dt_memory_stats *measured, FILE *f)
{
    static const dt_mem_category rows[] = {DT_MEM_PARAMETER,  DT_MEM_GRADIENT, DT_MEM_OPTIMIZER,
                                           DT_MEM_ACTIVATION, DT_MEM_COMM,     DT_MEM_OTHER};
    const double mib = 1048576.0;
    if (e == NULL || f == NULL)
        return;
    fprintf(f, "%-12s %12s", "category", "estimate");
    if (measured != NULL)
        fprintf(f, " %12s %7s", "measured", "ratio");
    fprintf(f, "   (MiB per rank, peak)\n");
    for (size_t i = 0; i <= sizeof(rows) / sizeof(rows[0]); i++) {
        bool total = i == sizeof(rows) / sizeof(rows[0]);
        int64_t est = total ? e->total_peak : e->peak[rows[i]];
        int64_t got = measured == NULL ? 0 : total ? measured->total_peak : measured->peak[rows[i]];
        fprintf(f, "%-12s %12.2f", total ? "total" : dt_mem_category_name(rows[i]),
                (double)est / mib);
        if (measured != NULL && est > 0)
            fprintf(f, " %12.2f %7.3f", (double)got / mib, (double)got / (double)est);
        else if (measured != NULL)
            fprintf(f, " %12.2f %7s", (double)got / mib, "-");
        fputc('\n', f);
    }
    fprintf(f, "peak during the %s (model %.2f MiB of f32 parameters)\n",
            e->peak_at != NULL ? e->peak_at : "init", (double)e->model_bytes / mib);
    fflush(f);
}
