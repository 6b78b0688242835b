/*
 * Matching of simulated sends and receives: per ordered pair of ranks, in
 * posting order, as the transports match a collective's tags.
 */
#ifndef DT_COMMSIM_MATCH_H
#define DT_COMMSIM_MATCH_H

#include <stdbool.h>
#include <stdint.h>

typedef struct cs_half {
    double t; /* when it was posted */
    int rank; /* who posted it */
    int8_t par;
    bool done;    /* an eager send: complete already */
    bool scratch; /* its buffer is the schedule's scratch (cs_op.scratch) */
} cs_half;

typedef struct cs_pairq {
    uint64_t key; /* (src << 32 | dst) + 1; 0: an empty slot */
    cs_half *q;
    uint32_t head, len, cap;
    bool sends; /* what is queued: sends (else receives) */
} cs_pairq;

typedef struct cs_match {
    cs_pairq *slot;
    uint64_t cap, used;
} cs_match;

/* Post one half of the message src -> dst. Returns 1 with its partner in
 * @p other when one was waiting (then dequeued), 0 when queued, -1 when out of memory. */
int cs_match_post(cs_match *m, int src, int dst, bool is_send, const cs_half *h, cs_half *other);
/* Whether any half is still waiting (a deadlock at the end). */
bool cs_match_pending(const cs_match *m, int *src, int *dst);
void cs_match_free(cs_match *m);

#endif
