/*
 * dt_memory_report: every rank's memory accounting gathered to rank 0 of a
 * comm and printed as one row per rank (current / peak MiB by category).
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include <stdio.h>

#include "dtensor/comm.h"

#define MIB (1024.0 * 1024.0)

static const dt_mem_category shown[] = {DT_MEM_PARAMETER, DT_MEM_GRADIENT, DT_MEM_OPTIMIZER,
                                        DT_MEM_ACTIVATION, DT_MEM_COMM};
#define N_SHOWN ((int)(sizeof(shown) / sizeof(shown[0])))

static void print_rows(FILE *f, const char *title, int n, const dt_memory_stats *rows)
{
    fprintf(f, "%s (MiB, current/peak)\n%4s", title != NULL ? title : "memory", "rank");
    for (int c = 0; c < N_SHOWN; c++)
        fprintf(f, " %17s", dt_mem_category_name(shown[c]));
    fprintf(f, " %17s %8s\n", "total", "cached");
    for (int r = 0; r < n; r++) {
        fprintf(f, "%4d", r);
        for (int c = 0; c < N_SHOWN; c++)
            fprintf(f, " %8.3f/%8.3f", rows[r].current[shown[c]] / MIB,
                    rows[r].peak[shown[c]] / MIB);
        fprintf(f, " %8.3f/%8.3f %8.3f\n", rows[r].total_current / MIB, rows[r].total_peak / MIB,
                rows[r].cached / MIB); /* held for reuse, apart from the live bytes */
    }
    fflush(f);
}

/* This rank's device memory: the first non-CPU device that ever held any
 * (zeros when none), and its name for the title. */
static void device_stats(dt_memory_stats *out, char *name, size_t len)
{
    memset(out, 0, sizeof(*out));
    snprintf(name, len, "device");
    dt_device cands[1 + 16] = {{DT_DEVICE_SIM, 0}};
    for (int i = 0; i < 16; i++)
        cands[1 + i] = (dt_device){DT_DEVICE_CUDA, i};
    for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
        dt_memory_stats st;
        if (dt_memory_stats_get(cands[i], &st) == DT_OK && st.total_peak > 0) {
            *out = st;
            snprintf(name, len, "%s", dt_device_type_name(cands[i].type));
            return;
        }
    }
}

dt_status dt_memory_report(dt_comm *comm, const char *title, FILE *f, dt_memory_stats *rows)
{
    dt_memory_stats mine[2]; /* host, device */
    char dev[16], head[160];
    DT_CHECK(dt_memory_stats_get(dt_device_cpu(), &mine[0]));
    device_stats(&mine[1], dev, sizeof(dev));
    int n = comm != NULL ? dt_comm_size(comm) : 1, me = comm != NULL ? dt_comm_rank(comm) : 0;
    dt_memory_stats *all = calloc(2 * (size_t)n, sizeof(*all));
    dt_memory_stats *host = calloc((size_t)n, sizeof(*host)),
                    *devs = calloc((size_t)n, sizeof(*devs));
    dt_status st = DT_OK;
    if (all == NULL || host == NULL || devs == NULL)
        st = DT_ERR(DT_ERR_NO_MEMORY, "dt_memory_report: no memory for %d rows", n);
    size_t words = 2 * (sizeof(mine[0]) / sizeof(int64_t)); /* the struct is all int64_t */
    if (st == DT_OK && comm != NULL)
        st = dt_comm_allgather(comm, mine, all, words, DT_DTYPE_I64, NULL);
    else if (st == DT_OK)
        memcpy(all, mine, sizeof(mine));
    bool any_device = false;
    for (int r = 0; st == DT_OK && r < n; r++) {
        host[r] = all[2 * r];
        devs[r] = all[2 * r + 1];
        any_device = any_device || devs[r].total_peak > 0;
    }
    if (st == DT_OK && me == 0 && f != NULL) {
        const char *t = title != NULL ? title : "memory";
        snprintf(head, sizeof(head), "%s, host memory", t);
        print_rows(f, any_device ? head : t, n, host);
        snprintf(head, sizeof(head), "%s, %s memory", t, dev);
        if (any_device)
            print_rows(f, head, n, devs);
    }
    if (st == DT_OK && rows != NULL)
        memcpy(rows, host, (size_t)n * sizeof(*host));
    free(all);
    free(host);
    free(devs);
    return st;
}
