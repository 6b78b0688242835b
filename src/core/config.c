/* The registry of every environment tunable: name, default, help. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/log.h"

typedef struct dt_config_entry {
    const char *name;
    const char *dflt; /* NULL: unset */
    const char *help;
} dt_config_entry;

/* Keep sorted by area; add a row here for every new tunable. */
static const dt_config_entry config_table[] = {
    {"DT_LOG", "warn", "log level: none|error|warn|info|debug|trace"},
    {"DT_LOG_SUBSYS", "all", "comma list of subsystems to log (core,alloc,kernel,comm,mesh,redist,...)"},
    {"DT_LOG_FILE", NULL, "log to this file instead of stderr; %r = rank, %p = pid"},
    {"DT_ALLOC", "caching", "host allocator: caching|system"},
    {"DT_NUM_THREADS", "0", "compute threads per rank; 0 = cores / local ranks"},
    {"DT_BLAS_AUTOSELECT", "1", "pick the OpenBLAS kernel for this CPU when OPENBLAS_CORETYPE is unset"},
    {"OPENBLAS_NUM_THREADS", NULL, "OpenBLAS threads at load (read by OpenBLAS); when unset dtensor loads it with DT_NUM_THREADS' count, since idle OpenBLAS workers poll for ~0.1 s"},
    {"OPENBLAS_CORETYPE", NULL, "OpenBLAS kernel (read by OpenBLAS); when set, dtensor never overrides it"},
    {"LOCAL_WORLD_SIZE", NULL, "ranks on this node (dtrun/torchrun); divides the cores for DT_NUM_THREADS"},
    {"OMPI_COMM_WORLD_LOCAL_SIZE", NULL, "ranks on this node under Open MPI's mpirun"},
    {"MPI_LOCALNRANKS", NULL, "ranks on this node under MPICH/Hydra"},
    {"SLURM_NTASKS_PER_NODE", NULL, "ranks on this node under srun"},
    {"DT_TIMEOUT_S", "300", "seconds a collective or store wait may take before DT_ERR_TIMEOUT"},
    {"DT_ALGO", NULL, "force collective algorithms, e.g. allreduce:ring,allgather:ring"},
    {"DT_SPIN_US", "-1", "microseconds a wait spins before sleeping on the event fd; -1 = auto: adaptive 5-200 us of polling (none with more local ranks than cores), then 50 us polling with sched_yield while the host is contended"},
    {"DT_CMA", "1", "copy between ranks of one host with cross-memory attach (process_vm_readv/writev) where a collective can: 0 = never"},
    {"DT_SHM", "1", "carry messages of up to 4080 bytes between ranks of one host through shared-memory rings instead of UCX: 0 = never"},
    {"DT_RING_SEGMENT_KB", "4096", "segment size (KiB) of pipelined ring collectives"},
    {"DT_STORE_BIND", "127.0.0.1", "address the rank-0 store binds to"},
    {"DT_STORE_STALL_S", "10", "seconds the store waits on a half-sent message or a missing AUTH before dropping the client"},
    {"DT_JOB_TOKEN", NULL, "secret every store client must present (set by dtrun)"},
    {"DT_DEVICE", "auto", "device of this rank: cpu|cuda|sim|auto (auto: cuda when a GPU is usable)"},
    {"DT_NCCL", "1", "0: CUDA ranks talk over UCX with staged device buffers instead of NCCL"},
    {"DT_SIM_DELAY_US", "0", "sim device: microseconds each queued kernel or copy waits first"},
};

static const dt_config_entry *config_find(const char *name)
{
    /* callers pass literals, so the last few names are found by address:
     * collectives look tunables up on every call */
    static _Thread_local struct { const char *name; const dt_config_entry *e; } memo[4];
    static _Thread_local unsigned next;
    for (int i = 0; i < 4; i++)
        if (memo[i].name == name)
            return memo[i].e;
    for (size_t i = 0; i < sizeof(config_table) / sizeof(config_table[0]); i++)
        if (strcmp(config_table[i].name, name) == 0) {
            memo[next % 4].name = name;
            memo[next++ % 4].e = &config_table[i];
            return &config_table[i];
        }
    return NULL;
}

const char *dt__config_str(const char *name)
{
    const dt_config_entry *e = config_find(name);
    if (e == NULL) {
        /* not through DT_LOG_*: the logger itself reads the registry */
        fprintf(stderr, "dtensor: internal: tunable %s is not in the registry\n", name);
        return getenv(name);
    }
    const char *v = getenv(name);
    return (v != NULL && v[0] != '\0') ? v : e->dflt;
}

int64_t dt__config_int(const char *name)
{
    const char *v = dt__config_str(name);
    return v != NULL ? strtoll(v, NULL, 10) : 0;
}

double dt__config_double(const char *name)
{
    const char *v = dt__config_str(name);
    return v != NULL ? strtod(v, NULL) : 0.0;
}

void dt_config_print(FILE *f)
{
    for (size_t i = 0; i < sizeof(config_table) / sizeof(config_table[0]); i++) {
        const dt_config_entry *e = &config_table[i];
        const char *cur = getenv(e->name);
        fprintf(f, "%-20s default=%-10s current=%-10s %s\n", e->name, e->dflt ? e->dflt : "-",
                cur ? cur : "-", e->help);
    }
}
