/* Matching of simulated sends and receives (see commsim_match.h): an
 * open-addressing table of per-pair queues. */
#include "commsim_match.h"

#include <stdlib.h>

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    return k ^ (k >> 33);
}

static cs_pairq *find(cs_pairq *slot, uint64_t cap, uint64_t key)
{
    for (uint64_t i = mix(key) & (cap - 1);; i = (i + 1) & (cap - 1))
        if (slot[i].key == key || slot[i].key == 0)
            return &slot[i];
}

/* Keep the load under a half. */
static bool grow(cs_match *m)
{
    if (2 * (m->used + 1) <= m->cap)
        return true;
    uint64_t cap = m->cap ? 2 * m->cap : 4096;
    cs_pairq *n = calloc(cap, sizeof(*n));
    if (n == NULL)
        return false;
    for (uint64_t i = 0; i < m->cap; i++)
        if (m->slot[i].key != 0)
            *find(n, cap, m->slot[i].key) = m->slot[i];
    free(m->slot);
    m->slot = n, m->cap = cap;
    return true;
}

static bool enqueue(cs_pairq *p, const cs_half *h)
{
    if (p->len == p->cap) {
        uint32_t cap = p->cap ? 2 * p->cap : 2;
        cs_half *q = malloc(cap * sizeof(*q));
        if (q == NULL)
            return false;
        for (uint32_t i = 0; i < p->len; i++)
            q[i] = p->q[(p->head + i) % p->cap];
        free(p->q);
        p->q = q, p->cap = cap, p->head = 0;
    }
    p->q[(p->head + p->len++) % p->cap] = *h;
    return true;
}

int cs_match_post(cs_match *m, int src, int dst, bool is_send, const cs_half *h, cs_half *other)
{
    if (!grow(m))
        return -1;
    uint64_t key = ((uint64_t)(uint32_t)src << 32 | (uint32_t)dst) + 1;
    cs_pairq *p = find(m->slot, m->cap, key);
    if (p->key == 0) {
        *p = (cs_pairq){.key = key};
        m->used++;
    }
    if (p->len > 0 && p->sends != is_send) {
        *other = p->q[p->head];
        p->head = (p->head + 1) % p->cap;
        p->len--;
        return 1;
    }
    p->sends = is_send;
    return enqueue(p, h) ? 0 : -1;
}

bool cs_match_pending(const cs_match *m, int *src, int *dst)
{
    for (uint64_t i = 0; i < m->cap; i++)
        if (m->slot[i].key != 0 && m->slot[i].len > 0) {
            *src = (int)((m->slot[i].key - 1) >> 32);
            *dst = (int)((m->slot[i].key - 1) & 0xffffffffu);
            return true;
        }
    return false;
}

void cs_match_free(cs_match *m)
{
    for (uint64_t i = 0; i < m->cap; i++)
        free(m->slot[i].q);
    free(m->slot);
    *m = (cs_match){0};
}
