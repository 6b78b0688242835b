/*
 * A resource's reservations on the virtual clock (a rank's port, a NIC, an
 * uplink): the busy intervals after a floor, sorted. A transfer takes the
 * earliest gap that fits on every resource of its path, so the p-1 transfers each rank posts at
 * once in an all-to-all round pack as they do through shared-memory windows, where each rank's
 * copies go on independently (reserving only after the last one instead
 * made a 4-rank round take up to 5 transfer times, not 3).
 */
#ifndef DT_COMMSIM_BUSY_H
#define DT_COMMSIM_BUSY_H

#include <stdbool.h>
#include <stdint.h>

typedef struct cs_busy {
    double floor;    /* nothing fits before this */
    double (*iv)[2]; /* [start, end), sorted, disjoint, all ending after floor */
    uint32_t n, cap;
} cs_busy;

/* One resource a transfer holds, and for how long. */
typedef struct cs_claim {
    cs_busy *busy;
    double dur;
} cs_claim;

/* The earliest t >= @p from at which each of the @p n claims' resources is
 * free for its duration. */
double cs_busy_fit(const cs_claim *c, int n, double from);
/* Mark [t, t + @p dur) busy on @p a (a gap cs_busy_fit found); intervals
 * ending by @p now are folded into the floor. False on no memory. */
bool cs_busy_add(cs_busy *a, double t, double dur, double now);
void cs_busy_free(cs_busy *a);

#endif
