/* The per-rank host memory budget, DT_MEMORY_LIMIT (memory_budget.c). */
#ifndef DT_CORE_MEMORY_BUDGET_H
#define DT_CORE_MEMORY_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

#include "dtensor/memory.h"

/* "123", "1.5G", "512MiB", "64KB" (binary units K M G T) into bytes; false
 * when @p v is not such a size. */
bool dt__parse_bytes(const char *v, uint64_t *out);

/* The budget in bytes, -1 when none; @p how (may be NULL) receives how it was
 * set. Read from DT_MEMORY_LIMIT once per process. */
int64_t dt__memory_budget(const char **how);

/* The error of an allocation of @p nbytes of category @p cat refused by the
 * budget, with @p live the host's accounting: returns DT_ERR_NO_MEMORY. */
dt_status dt__memory_budget_refuse(size_t nbytes, dt_mem_category cat, const dt_memory_stats *live);

#endif
