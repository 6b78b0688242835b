/*
 * What this rank shares its host with: the ranks a launcher started on it and
 * the memory it may use (the smaller of the machine's and its cgroup's limit).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/config.h"
#include "core/host_info.h"

int dt__host_local_ranks(void)
{
    static const char *const vars[] = {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                       "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        int64_t v = dt__config_int(vars[i]);
        if (v > 0)
            return (int)v;
    }
    return 1;
}

/* The first number in file @p path (after @p key when given); 0 when none. */
static uint64_t read_number(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    char line[256];
    uint64_t v = 0;
    while (v == 0 && fgets(line, sizeof(line), f) != NULL) {
        const char *p = line;
        if (key != NULL && strncmp(line, key, strlen(key)) != 0)
            continue;
        p += key != NULL ? strlen(key) : 0;
        if (sscanf(p, " %" SCNu64, &v) != 1) /* "max" (cgroup v2): no limit */
            v = 0;
    }
    fclose(f);
    return v;
}

uint64_t dt__host_memory_bytes(void)
{
    uint64_t total = read_number("/proc/meminfo", "MemTotal:") * 1024;
    /* cgroup v2, then v1 (whose "no limit" is a huge number, larger than total) */
    uint64_t limits[2] = {read_number("/sys/fs/cgroup/memory.max", NULL),
                          read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes", NULL)};
    for (int i = 0; i < 2; i++)
        if (limits[i] > 0 && (total == 0 || limits[i] < total))
            total = limits[i];
    return total;
}
