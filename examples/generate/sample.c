/* Greedy and top-k / temperature sampling (see sample.h). */
#include <math.h>
#include <stdlib.h>

#include "sample.h"

typedef struct scored {
    float logit;
    int64_t id;
} scored;

/* Descending logit, then ascending id: a total order, so ties are deterministic. */
static int by_logit(const void *pa, const void *pb)
{
    const scored *a = pa, *b = pb;
    if (a->logit != b->logit)
        return a->logit > b->logit ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int64_t argmax(const float *logits, int64_t vocab)
{
    int64_t best = 0;
    for (int64_t i = 1; i < vocab; i++)
        if (logits[i] > logits[best])
            best = i;
    return best;
}

int64_t gen_sample(gen_sampler *s, const float *logits, int64_t vocab)
{
    if (s->greedy)
        return argmax(logits, vocab);
    int64_t k = s->top_k > 0 && s->top_k < vocab ? s->top_k : vocab;
    scored *c = malloc((size_t)vocab * sizeof(*c));
    if (c == NULL)
        return -1;
    for (int64_t i = 0; i < vocab; i++)
        c[i] = (scored){logits[i], i};
    qsort(c, (size_t)vocab, sizeof(*c), by_logit);
    /* softmax over the k best, relative to the best for range */
    double total = 0.0, u = (double)(splitmix64(&s->state) >> 11) * 0x1.0p-53;
    for (int64_t i = 0; i < k; i++)
        total += exp(((double)c[i].logit - (double)c[0].logit) / s->temperature);
    double acc = 0.0;
    int64_t pick = c[k - 1].id;
    for (int64_t i = 0; i < k; i++) {
        acc += exp(((double)c[i].logit - (double)c[0].logit) / s->temperature) / total;
        if (u < acc) {
            pick = c[i].id;
            break;
        }
    }
    free(c);
    return pick;
}
