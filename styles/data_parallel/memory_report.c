/*
 * dt_memory_report: every rank's memory accounting gathered to rank 0 of a
 * comm and printed as one row per rank (current / peak MiB by category).
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include <stdio.h>

#include "dtensor/data_parallel.h"

#define MIB (1024.0 * 1024.0)

static const dt_mem_category shown[] = {DT_MEM_PARAMETER, DT_MEM_GRADIENT, DT_MEM_OPTIMIZER,
                                        DT_MEM_ACTIVATION, DT_MEM_COMM};
#define N_SHOWN ((int)(sizeof(shown) / sizeof(shown[0])))

static void print_rows(FILE *f, const char *title, int n, const dt_memory_stats *rows)
{
    fprintf(f, "%s (MiB, current/peak)\n%4s", title != NULL ? title : "memory", "rank");
    for (int c = 0; c < N_SHOWN; c++)
        fprintf(f, " %17s", dt_mem_category_name(shown[c]));
    fprintf(f, " %17s\n", "total");
    for (int r = 0; r < n; r++) {
        fprintf(f, "%4d", r);
        for (int c = 0; c < N_SHOWN; c++)
            fprintf(f, " %8.3f/%8.3f", rows[r].current[shown[c]] / MIB,
                    rows[r].peak[shown[c]] / MIB);
        fprintf(f, " %8.3f/%8.3f\n", rows[r].total_current / MIB, rows[r].total_peak / MIB);
    }
    fflush(f);
}

dt_status dt_memory_report(dt_comm *comm, const char *title, FILE *f, dt_memory_stats *rows)
{
    dt_memory_stats mine;
    DT_CHECK(dt_memory_stats_get(dt_device_cpu(), &mine));
    int n = comm != NULL ? dt_comm_size(comm) : 1, me = comm != NULL ? dt_comm_rank(comm) : 0;
    dt_memory_stats *all = calloc((size_t)n, sizeof(*all));
    if (all == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_memory_report: no memory for %d rows", n);
    dt_status st = DT_OK;
    size_t words = sizeof(mine) / sizeof(int64_t); /* the struct is all int64_t */
    if (comm != NULL)
        st = dt_comm_allgather(comm, &mine, all, words, DT_DTYPE_I64, NULL);
    else
        all[0] = mine;
    if (st == DT_OK && me == 0 && f != NULL)
        print_rows(f, title, n, all);
    if (st == DT_OK && rows != NULL)
        memcpy(rows, all, (size_t)n * sizeof(*all));
    free(all);
    return st;
}
