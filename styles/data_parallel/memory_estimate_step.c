/*
 * One training step of train_gpt replayed on the estimate's ledger, in the
 * order the code allocates and frees (see memory_estimate.c). Shapes are the
 * largest rank's: R = rows x seq of the dp rank with the most rows, the
 * residual stream on R / tp rows with sequence parallelism, local widths
 * Dl, Fl, Vl (torch.chunk of dim, ffn_dim, vocab over tp).
 */
#include "styles/data_parallel/memory_estimate.h"

#define ACT   DT_MEM_ACTIVATION
#define F32   4 /* bytes of an f32 */
#define I64   8
#define OTHER DT_MEM_OTHER

typedef struct dims {
    int64_t b, t, r, rr, d, dl, fl, vl, hl, tt; /* tt: local heads x T x T */
} dims;

static dims dims_of(const est_sim *s)
{
    const dt_gpt_config *g = &s->c.gpt;
    int tp = s->c.tp;
    dims m;
    m.b = est__chunk(s->c.batch, s->c.dp);
    m.t = s->c.seq;
    m.r = m.b * m.t;
    m.rr = s->c.sequence_parallel ? m.b * est__chunk(m.t, tp) : m.r;
    m.d = g->dim;
    m.dl = est__chunk(g->dim, tp);
    m.fl = est__chunk(g->ffn_dim, tp);
    m.vl = est__chunk(g->vocab_size, tp);
    m.hl = m.dl / (g->dim / g->n_heads);
    m.tt = m.b * m.hl * m.t * m.t;
    return m;
}

/* ---------------------------------------------------------------- ZeRO gathers */

/* Post unit @p u's gathers: the gathered storage, a packed receive buffer off dim 0. */
static void gather_post(est_sim *s, int u)
{
    for (int i = 0; i < s->n_params; i++) {
        est_param *p = &s->p[i];
        if (p->unit != u || !p->gathers || s->posted[i])
            continue;
        if (!s->resident[i])
            est__take(s, DT_MEM_PARAMETER, F32 * p->local);
        s->resident[i] = true;
        if (p->k > 0) {
            est__take(s, DT_MEM_COMM, F32 * p->local);
            s->posted[i] = true;
        }
    }
}

static void gather_wait(est_sim *s, int u)
{
    gather_post(s, u);
    for (int i = 0; i < s->n_params; i++)
        if (s->p[i].unit == u && s->posted[i]) {
            est__give(s, DT_MEM_COMM, F32 * s->p[i].local); /* unpacked */
            s->posted[i] = false;
        }
}

/* ZeRO-3: the gathered storage goes back after the unit (or the parameter's gradient). */
static void drop_param(est_sim *s, int i)
{
    if (s->c.stage == DT_DP_ZERO3 && s->resident[i]) {
        est__give(s, DT_MEM_PARAMETER, F32 * s->p[i].local);
        s->resident[i] = false;
    }
}

static void unit_enter(est_sim *s, int u, bool prefetch)
{
    if (!s->zero)
        return;
    gather_wait(s, u);
    if (s->c.stage == DT_DP_ZERO3 && prefetch && u + 1 < s->n_units)
        gather_post(s, u + 1);
}

static void unit_exit(est_sim *s, int u)
{
    for (int i = 0; s->zero && i < s->n_params; i++)
        if (s->p[i].unit == u)
            drop_param(s, i);
}

/* Backward's regather of unit @p u, prefetching the unit before it. */
static void unit_regather(est_sim *s, int u)
{
    if (s->c.stage != DT_DP_ZERO3 || !s->c.data_parallel)
        return;
    gather_wait(s, u);
    if (u - 1 >= 1)
        gather_post(s, u - 1);
}

/* ---------------------------------------------------------------- gradients */

/* The gradient of parameter @p i was just computed (F32 * local bytes of ACT). */
static void param_grad(est_sim *s, int i)
{
    est_param *p = &s->p[i];
    int64_t b = F32 * p->local, shard = F32 * p->shard;
    if (!s->c.data_parallel) { /* the engine re-tags it as the leaf's gradient */
        est__give(s, ACT, b), est__take(s, DT_MEM_GRADIENT, b);
        return;
    }
    int64_t *r = s->reap[0];
    if (s->c.stage == DT_DP_DDP) { /* copied into its bucket, made at its first gradient */
        int k = s->bucket[i];
        if (!s->bucket_live[k])
            est__take(s, DT_MEM_GRADIENT, F32 * s->bucket_numel[k]);
        s->bucket_live[k] = true;
        est__give(s, ACT, b);
        return;
    }
    if (p->k < 0 || s->c.stage == DT_DP_ZERO1) { /* all-reduced in place, then kept / sliced */
        r[ACT] += b;
        r[DT_MEM_GRADIENT] -= p->k < 0 ? b : shard;
    } else if (p->k == 0) { /* reduce-scattered from the gradient itself */
        est__take(s, DT_MEM_GRADIENT, shard);
        r[ACT] += b;
    } else { /* from a packed copy */
        est__take(s, DT_MEM_COMM, b);
        est__take(s, DT_MEM_GRADIENT, shard);
        est__give(s, ACT, b);
        r[DT_MEM_COMM] += b;
    }
    drop_param(s, i);
}

/* A unit's backward ended: the reductions of the unit before it completed
 * (they progress while later units compute; @p all: every one, at the end
 * of backward), their buffers go and the gradients are installed. */
static void reap(est_sim *s, bool all)
{
    for (int g = 1; g >= (all ? 0 : 1); g--) {
        int64_t *r = s->reap[g];
        est__take(s, DT_MEM_GRADIENT, -r[DT_MEM_GRADIENT]);
        est__give(s, ACT, r[ACT]);
        est__give(s, DT_MEM_COMM, r[DT_MEM_COMM]);
        for (int k = 0; k < DT_MEM_CATEGORY_COUNT; k++)
            r[k] = 0;
    }
    for (int k = 0; k < DT_MEM_CATEGORY_COUNT; k++) /* this unit's: next time */
        s->reap[1][k] = s->reap[0][k], s->reap[0][k] = 0;
}

/* DDP buckets as dp_apply.c makes them: parameters in reverse order, a new
 * bucket when the next would pass 4 MiB. */
static void make_buckets(est_sim *s)
{
    int64_t cap = ((int64_t)4 << 20) / F32;
    int n = 0;
    for (int i = s->n_params - 1; i >= 0; i--) {
        int64_t len = s->p[i].local;
        if (n == 0 || (s->bucket_numel[n - 1] + len > cap && s->bucket_numel[n - 1] > 0))
            s->bucket_numel[n++] = 0;
        s->bucket[i] = n - 1;
        s->bucket_numel[n - 1] += len;
        s->bucket_live[n - 1] = false;
    }
}

/* A weight gradient [@p i's local] and, when @p bias >= 0, the bias's. */
static void weight_grads(est_sim *s, int w, int bias)
{
    est__take(s, ACT, F32 * s->p[w].local);
    param_grad(s, w);
    if (bias >= 0) {
        est__take(s, ACT, F32 * s->p[bias].local);
        param_grad(s, bias);
    }
}

/* A partial (tp) input gradient [rows, D] made whole: all-reduced (or
 * reduce-scattered to @p out_rows) into a new tensor. Returns its rows. */
static int64_t materialize(est_sim *s, const dims *m, int64_t rows, int64_t out_rows)
{
    if (s->c.tp > 1) {
        est__take(s, OTHER, F32 * out_rows * m->d);
        est__give(s, ACT, F32 * rows * m->d);
        return -out_rows; /* negative: held in OTHER */
    }
    return rows;
}

static void give_rows(est_sim *s, int64_t signed_rows, int64_t width)
{
    if (signed_rows < 0)
        est__give(s, OTHER, F32 * -signed_rows * width);
    else
        est__give(s, ACT, F32 * signed_rows * width);
}

/* ---------------------------------------------------------------- forward */

/* A rowwise layer's output [R, D] partial, reduced into the residual's rows. */
static void rowwise_out(est_sim *s, const dims *m)
{
    if (s->c.tp > 1) {
        est__take(s, ACT, F32 * m->r * m->d);
        est__take(s, OTHER, F32 * m->rr * m->d);
        est__give(s, ACT, F32 * m->r * m->d);
    } else {
        est__take(s, ACT, F32 * m->r * m->d);
    }
}

static void give_rowwise_out(est_sim *s, const dims *m)
{
    est__give(s, s->c.tp > 1 ? OTHER : ACT, F32 * m->rr * m->d);
}

/* A norm's output for the linears after it: saved [rr, D] plus mean / rstd;
 * with sequence parallelism the all-gathered [R, D] is what they save. */
static void norm_for_linears(est_sim *s, const dims *m)
{
    est__take(s, ACT, F32 * m->rr * (m->d + 2));
    if (s->c.sequence_parallel) {
        est__take(s, OTHER, F32 * m->r * m->d);
        est__give(s, ACT, F32 * m->rr * m->d);
    }
}

static void give_norm_input(est_sim *s, const dims *m)
{
    est__give(s, s->c.sequence_parallel ? OTHER : ACT, F32 * m->r * m->d);
}

/* What a block's forward allocates and frees between its unit's gathers. */
static void forward_block_body(est_sim *s, const dims *m)
{
    norm_for_linears(s, m);                          /* attention_norm */
    est__take(s, ACT, 3 * F32 * m->r * m->dl);       /* q, k, v: saved by the score matmuls */
    est__take(s, ACT, 2 * F32 * m->tt);              /* scores, probabilities (saved) */
    est__take(s, ACT, 2 * F32 * m->r * m->dl);       /* P v, merged heads (saved by wo) */
    rowwise_out(s, m);                               /* wo */
    est__give(s, ACT, F32 * (m->tt + m->r * m->dl)); /* scores, P v */
    est__take(s, ACT, F32 * m->rr * m->d);           /* h = x + attention: saved by ffn_norm */
    give_rowwise_out(s, m);
    norm_for_linears(s, m);                    /* ffn_norm */
    est__take(s, ACT, 2 * F32 * m->r * m->fl); /* w1 out, gelu out: both saved */
    rowwise_out(s, m);                         /* w2 */
    est__take(s, ACT, F32 * m->rr * m->d);     /* block output */
    give_rowwise_out(s, m);
}

/*
 * With activation checkpointing (src/nn/checkpoint_recompute.c) the block
 * keeps only its output (the next block's saved input): what the body saved
 * goes at once (taken first: an upper bound of the forward's transient).
 */
static void forward_block(est_sim *s, const dims *m, int u, bool prefetch)
{
    int64_t act = s->cur[ACT], other = s->cur[OTHER];
    unit_enter(s, u, prefetch);
    forward_block_body(s, m);
    if (s->c.activation_checkpointing) {
        est__give(s, ACT, s->cur[ACT] - act - F32 * m->rr * m->d);
        est__give(s, OTHER, s->cur[OTHER] - other);
    }
    unit_exit(s, u);
}

/* The vocab-parallel loss needs a class dim sharded over more than one rank
 * (placement/rules/rules_loss.c); on a tp dim of size 1 the logits are
 * redistributed (a copy) and the plain loss runs on the copy. */
static bool logits_copied(const est_sim *s)
{
    return s->tp_plan && s->c.tp == 1;
}

static void forward(est_sim *s, const dims *m, bool prefetch)
{
    int L = (int)s->c.gpt.n_layers;
    if (s->zero && s->c.stage != DT_DP_ZERO3)
        for (int u = 1; u < s->n_units; u++) /* ZeRO-1/2: every gather posted at the root */
            gather_post(s, u);
    if (s->c.stage == DT_DP_ZERO3 && s->zero && prefetch)
        gather_post(s, 1);
    unit_enter(s, 1, prefetch); /* tok_embeddings */
    rowwise_out(s, m);          /* token rows (rowwise: partial, reduced) */
    unit_exit(s, 1);
    unit_enter(s, 2, prefetch);      /* pos_embeddings */
    est__take(s, OTHER, I64 * m->t); /* positions */
    est__take(s, ACT, F32 * m->t * m->d);
    unit_exit(s, 2);
    est__take(s, ACT, F32 * m->rr * m->d); /* h = tok + pos */
    give_rowwise_out(s, m);
    est__give(s, ACT, F32 * m->t * m->d);
    est__give(s, OTHER, I64 * m->t);
    for (int l = 0; l < L; l++)
        forward_block(s, m, 3 + l, prefetch);
    unit_enter(s, 3 + L, prefetch); /* norm */
    norm_for_linears(s, m);
    unit_exit(s, 3 + L);
    unit_enter(s, 4 + L, prefetch); /* output: logits [R, Vl] saved by the loss */
    est__take(s, ACT, F32 * m->r * m->vl);
    unit_exit(s, 4 + L);
    if (logits_copied(s)) { /* the loss saves a replicated copy, the logits go */
        est__take(s, OTHER, F32 * m->r * m->vl);
        est__give(s, ACT, F32 * m->r * m->vl);
    }
    est__take(s, ACT, (F32 + I64) * m->r); /* loss rows, log-sum-exp */
}

/* ---------------------------------------------------------------- backward */

/* Index of the first parameter of unit @p u. */
static int first_param(const est_sim *s, int u)
{
    for (int i = 0; i < s->n_params; i++)
        if (s->p[i].unit == u)
            return i;
    return 0;
}

/* Linear backward: input gradient [rows, in] (kept, returned by the caller's
 * bookkeeping), then the weight and bias gradients. */
static void linear_back(est_sim *s, int64_t rows, int64_t in, int w, int bias)
{
    est__take(s, ACT, F32 * rows * in);
    weight_grads(s, w, bias);
}

/* Attention backward from the merged heads' gradient to the q/k/v linears. */
static void attention_back(est_sim *s, const dims *m, int p0)
{
    int64_t rdl = F32 * m->r * m->dl, d = m->d;
    linear_back(s, m->r, m->dl, p0 + 8, p0 + 9); /* wo */
    est__give(s, ACT, rdl);                      /* merged heads (saved by wo) */
    est__take(s, ACT, rdl);                      /* its gradient made contiguous */
    est__give(s, ACT, rdl);
    est__take(s, ACT, F32 * m->tt + rdl);     /* dP, dv */
    est__give(s, ACT, rdl + rdl);             /* the gradient in, v */
    est__take(s, ACT, F32 * m->tt);           /* softmax backward */
    est__give(s, ACT, 2 * F32 * m->tt);       /* dP, P */
    est__take(s, ACT, 2 * rdl);               /* dq, dk */
    est__give(s, ACT, F32 * m->tt + 2 * rdl); /* softmax grad, q, k */
    for (int j = 2; j >= 0; j--) {            /* v, k, q: contiguous copy, linear */
        est__take(s, ACT, rdl);
        est__give(s, ACT, rdl);
        linear_back(s, m->r, d, p0 + 2 + 2 * j, p0 + 3 + 2 * j);
        est__give(s, ACT, rdl);
        if (j < 2) { /* summed with the previous input gradient */
            est__take(s, ACT, F32 * m->r * d);
            est__give(s, ACT, 2 * F32 * m->r * d);
        }
    }
}

/* A norm's backward: input gradient [rr, D] and its weight/bias gradients;
 * then the residual's gradient and this one are summed. */
static void norm_back(est_sim *s, const dims *m, int w, int64_t gin)
{
    est__take(s, ACT, F32 * m->rr * m->d);
    weight_grads(s, w, w + 1);
    give_rows(s, gin, m->d);
    est__give(s, ACT, 2 * F32 * m->rr); /* mean, rstd */
}

static void residual_sum(est_sim *s, const dims *m)
{
    est__take(s, ACT, F32 * m->rr * m->d);
    est__give(s, ACT, 2 * F32 * m->rr * m->d);
}

static void backward_block(est_sim *s, const dims *m, int u)
{
    int p0 = first_param(s, u);
    int64_t rfl = F32 * m->r * m->fl;
    unit_regather(s, u);
    if (s->c.activation_checkpointing) /* the recompute, on the re-gathered unit */
        forward_block_body(s, m);
    if (s->c.sequence_parallel) /* the block output's gradient all-gathered for w2 */
        est__take(s, OTHER, F32 * m->r * m->d);
    linear_back(s, m->r, m->fl, p0 + 14, p0 + 15); /* w2 */
    if (s->c.sequence_parallel)
        est__give(s, OTHER, F32 * m->r * m->d);
    est__give(s, ACT, rfl); /* gelu out */
    est__take(s, ACT, rfl); /* gelu backward */
    est__give(s, ACT, 2 * rfl);
    linear_back(s, m->r, m->d, p0 + 12, p0 + 13); /* w1 */
    est__give(s, ACT, rfl);                       /* gelu grad */
    give_norm_input(s, m);
    norm_back(s, m, p0 + 10, materialize(s, m, m->r, m->rr));
    residual_sum(s, m);
    est__give(s, ACT, F32 * m->rr * m->d); /* h after attention */
    attention_back(s, m, p0);
    give_norm_input(s, m);
    norm_back(s, m, p0, materialize(s, m, m->r, m->rr));
    residual_sum(s, m);
    est__give(s, ACT, F32 * m->rr * m->d); /* the block input */
    if (s->c.activation_checkpointing)
        est__give(s, ACT, F32 * m->rr * m->d); /* the recomputed output */
    reap(s, false);
}

static void backward(est_sim *s, const dims *m)
{
    int L = (int)s->c.gpt.n_layers, out = 4 + L;
    est__take(s, ACT, F32 * m->r * m->vl); /* the loss's gradient of the logits */
    est__give(s, logits_copied(s) ? OTHER : ACT, F32 * m->r * m->vl);
    est__give(s, ACT, (F32 + I64) * m->r);
    unit_regather(s, out);
    linear_back(s, m->r, m->d, first_param(s, out), -1);
    est__give(s, ACT, F32 * m->r * m->vl);
    give_norm_input(s, m);
    reap(s, false);
    unit_regather(s, out - 1);
    norm_back(s, m, first_param(s, out - 1), materialize(s, m, m->r, m->rr));
    est__give(s, ACT, F32 * m->rr * m->d); /* the last block's output */
    reap(s, false);
    for (int l = L - 1; l >= 0; l--)
        backward_block(s, m, 3 + l);
    unit_regather(s, 2);
    est__take(s, ACT, F32 * m->t * m->d); /* the positions' gradient, reduced over rows */
    weight_grads(s, first_param(s, 2), -1);
    est__give(s, ACT, F32 * m->t * m->d);
    unit_regather(s, 1);
    weight_grads(s, first_param(s, 1), -1);
    est__give(s, ACT, F32 * m->rr * m->d); /* h's gradient */
    reap(s, true);
}

void est__replay_step(est_sim *s, int step)
{
    dims m = dims_of(s);
    int64_t params = 0, ids = 2 * I64 * m.r;
    for (int i = 0; i < s->n_params; i++)
        params += F32 * s->p[i].shard;
    s->phase = "forward";
    if (s->c.data_parallel && s->c.stage == DT_DP_DDP)
        make_buckets(s);
    est__take(s, OTHER, ids); /* the batch's inputs and targets */
    forward(s, &m, step > 0);
    s->phase = "backward";
    backward(s, &m);
    s->phase = "optimizer step";
    if (step == 0)
        est__take(s, DT_MEM_OPTIMIZER, s->n_states * params);
    est__give(s, OTHER, ids);
    s->phase = "forward";
    est__give(s, DT_MEM_GRADIENT, s->cur[DT_MEM_GRADIENT]); /* zero_grad */
}
