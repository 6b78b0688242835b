/* commsim's event queue: a binary min-heap on (time, sequence). */
#ifndef DT_COMMSIM_HEAP_H
#define DT_COMMSIM_HEAP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct cs_event {
    double t;
    uint64_t seq; /* ties go in push order: the same run every time */
    int rank;
    int8_t par; /* -1: the rank resumes; 0/1: a transfer of a round of that parity ended */
} cs_event;

typedef struct cs_heap {
    cs_event *e;
    size_t n, cap;
    uint64_t seq;
} cs_heap;

static inline bool cs_ev_less(const cs_event *a, const cs_event *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static inline bool cs_heap_push(cs_heap *h, double t, int rank, int par)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 1024;
        cs_event *e = realloc(h->e, cap * sizeof(*e));
        if (e == NULL)
            return false;
        h->e = e, h->cap = cap;
    }
    size_t i = h->n++;
    cs_event ev = {t, h->seq++, rank, (int8_t)par};
    while (i > 0 && cs_ev_less(&ev, &h->e[(i - 1) / 2])) {
        h->e[i] = h->e[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->e[i] = ev;
    return true;
}

static inline cs_event cs_heap_pop(cs_heap *h)
{
    cs_event top = h->e[0], last = h->e[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && cs_ev_less(&h->e[c + 1], &h->e[c]))
            c++;
        if (!cs_ev_less(&h->e[c], &last))
            break;
        h->e[i] = h->e[c];
        i = c;
    }
    if (h->n > 0)
        h->e[i] = last;
    return top;
}

#endif
