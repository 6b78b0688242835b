/*
 * The per-rank host memory budget, DT_MEMORY_LIMIT. An allocation that would
 * take this rank's live plus cached host bytes past it first empties the
 * allocator's cache; if the live bytes alone would still pass it, the
 * allocation fails with DT_ERR_NO_MEMORY naming the category, the bytes and
 * what is live, instead of the kernel's OOM killer ending one process of the
 * job without a word. Ranks of a job run the same program on the same budget,
 * so they reach it at the same allocation.
 */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"
#include "core/host_info.h"
#include "core/log.h"
#include "core/memory_budget.h"

#define AUTO_SHARE 0.95 /* of the host's memory, divided among its ranks */

bool dt__parse_bytes(const char *v, uint64_t *out)
{
    char *end = NULL;
    double x = strtod(v, &end);
    if (end == v || !isfinite(x) || x < 0.0)
        return false;
    static const char units[] = "KMGT";
    double scale = 1.0;
    const char *u = *end != '\0' ? strchr(units, *end) : NULL;
    if (u != NULL) {
        scale = ldexp(1.0, 10 * (int)(u - units + 1));
        end++;
        if (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0)
            end += strlen(end);
    }
    if (*end != '\0' || x * scale >= 0x1p63)
        return false;
    *out = (uint64_t)(x * scale);
    return true;
}

static int64_t budget = -1; /* bytes; -1: none */
static char budget_how[160];
static pthread_once_t budget_once = PTHREAD_ONCE_INIT;

static void budget_read(void)
{
    const char *v = dt__config_str("DT_MEMORY_LIMIT");
    uint64_t bytes = 0;
    if (v == NULL || strcmp(v, "none") == 0) {
        snprintf(budget_how, sizeof(budget_how), "none (DT_MEMORY_LIMIT=none)");
        return;
    }
    if (strcmp(v, "auto") == 0) {
        uint64_t host = dt__host_memory_bytes();
        int ranks = dt__host_local_ranks();
        if (host == 0) {
            snprintf(budget_how, sizeof(budget_how), "none (the host's memory is unknown)");
            return;
        }
        budget = (int64_t)(AUTO_SHARE * (double)host / ranks);
        snprintf(budget_how, sizeof(budget_how),
                 "%.2f GiB (DT_MEMORY_LIMIT=auto: %.2f x %.2f GiB / %d local ranks)",
                 (double)budget / 1073741824.0, AUTO_SHARE, (double)host / 1073741824.0, ranks);
    } else if (dt__parse_bytes(v, &bytes)) { /* validated by the registry already */
        budget = (int64_t)bytes;
        snprintf(budget_how, sizeof(budget_how), "%" PRId64 " bytes (DT_MEMORY_LIMIT=%s)", budget,
                 v);
    }
    DT_LOG_INFO("alloc", "host memory budget per rank: %s", budget_how);
}

int64_t dt__memory_budget(const char **how)
{
    pthread_once(&budget_once, budget_read);
    if (how != NULL)
        *how = budget_how;
    return budget;
}

dt_status dt__memory_budget_refuse(size_t nbytes, dt_mem_category cat, const dt_memory_stats *live)
{
    const char *how = NULL;
    (void)dt__memory_budget(&how);
    char parts[256];
    int n = 0;
    for (int c = 0; c < DT_MEM_CATEGORY_COUNT && n < (int)sizeof(parts); c++)
        if (live->current[c] > 0)
            n += snprintf(parts + n, sizeof(parts) - (size_t)n, "%s%s %.3f MiB", n ? ", " : "",
                          dt_mem_category_name((dt_mem_category)c),
                          (double)live->current[c] / 1048576.0);
    return DT_ERR(DT_ERR_NO_MEMORY,
                  "%zu bytes of %s would take this rank's host tensors to %" PRId64
                  " bytes, past its budget of %s; live: %s",
                  nbytes, dt_mem_category_name(cat), live->total_current + (int64_t)nbytes, how,
                  n > 0 ? parts : "nothing");
}
