/* Gap-filling reservations of commsim's ports, NICs and uplinks (commsim_busy.h). */
#include "commsim_busy.h"

#include <stdlib.h>
#include <string.h>

/* At most this many intervals per resource; the earliest beyond it joins the
 * floor (a gap is lost, nothing overlaps), so a search stays short on any
 * number of ranks. A NIC of 8 ranks in a 64-host direct round holds 504
 * reservations: capped at 64, the cluster model's 1 MiB two-level
 * all-reduce on 512 ranks took 1.1 ms, at 256 0.49; at 1024 a 512-rank run
 * of every algorithm took minutes (the direct one's p^2 messages). */
#define CS_BUSY_MAX 256

/* The end of an interval of @p a overlapping [t, t + dur), or t if none. */
static double clash(const cs_busy *a, double t, double dur)
{
    for (uint32_t i = 0; i < a->n && a->iv[i][0] < t + dur; i++)
        if (a->iv[i][1] > t)
            return a->iv[i][1];
    return t;
}

double cs_busy_fit(const cs_claim *c, int n, double from)
{
    double t = from;
    for (int i = 0; i < n; i++)
        t = t > c[i].busy->floor ? t : c[i].busy->floor;
    for (int moved = 1; moved;) { /* t only grows, past finitely many intervals */
        moved = 0;
        for (int i = 0; i < n; i++) {
            double u = clash(c[i].busy, t, c[i].dur);
            moved |= u != t;
            t = u;
        }
    }
    return t;
}

static void drop_first(cs_busy *a)
{
    a->floor = a->iv[0][1] > a->floor ? a->iv[0][1] : a->floor;
    memmove(a->iv, a->iv + 1, (size_t)(--a->n) * sizeof(*a->iv));
}

bool cs_busy_add(cs_busy *a, double t, double dur, double now)
{
    while (a->n > 0 && a->iv[0][1] <= now)
        drop_first(a);
    if (dur <= 0)
        return true;
    if (a->n == CS_BUSY_MAX)
        drop_first(a);
    if (a->n == a->cap) {
        uint32_t cap = a->cap ? 2 * a->cap : 4;
        double(*iv)[2] = realloc(a->iv, cap * sizeof(*iv));
        if (iv == NULL)
            return false;
        a->iv = iv, a->cap = cap;
    }
    uint32_t i = a->n;
    while (i > 0 && a->iv[i - 1][0] > t) {
        a->iv[i][0] = a->iv[i - 1][0], a->iv[i][1] = a->iv[i - 1][1];
        i--;
    }
    a->iv[i][0] = t, a->iv[i][1] = t + dur;
    a->n++;
    return true;
}

void cs_busy_free(cs_busy *a)
{
    free(a->iv);
    a->iv = NULL;
    a->n = a->cap = 0;
}
