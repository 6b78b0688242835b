/* The registry of every environment tunable: name, default, help, and the values it takes. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/memory_budget.h"

typedef enum cfg_kind {
    CFG_STR,    /* any text (a path, an address), or text @p check accepts */
    CFG_INT,    /* a decimal integer in [lo, hi] */
    CFG_DOUBLE, /* a finite number in [lo, hi] (lo excluded when lo_open) */
    CFG_BOOL,   /* 0|1|true|false|yes|no|on|off, read as 0 or 1 */
    CFG_ENUM,   /* one of @p values (any case), read as the value's own spelling */
    CFG_EXTERN, /* another program's variable (launchers, OpenBLAS): read leniently, never checked
                 */
} cfg_kind;

/* Extra syntax check of a CFG_STR value: false with the reason in @p why. */
typedef bool (*cfg_check_fn)(const char *v, char *why, size_t len);

typedef struct dt_config_entry {
    const char *name;
    const char *dflt; /* NULL: unset */
    const char *help;
    cfg_kind kind;
    double lo, hi;
    bool lo_open;
    const char *const *values; /* CFG_ENUM, NULL-terminated */
    cfg_check_fn check;
} dt_config_entry;

static const char *const log_levels[] = {"none", "error", "warn", "info", "debug", "trace", NULL};
static const char *const alloc_modes[] = {"caching", "system", NULL};
static const char *const devices[] = {"cpu", "cuda", "sim", "auto", NULL};
static const char *const gemm_engines[] = {"auto", "onednn", "openblas", NULL};
static const char *const debug_modes[] = {"off", "detail", NULL};

static bool check_subsys(const char *v, char *why, size_t len);
static bool check_algo(const char *v, char *why, size_t len);
static bool check_bytes(const char *v, char *why, size_t len);
static bool check_memory_limit(const char *v, char *why, size_t len);

/* One row per kind (clang-format would spread these initialisers over blocks). */
// clang-format off
#define STR(n, d, h)            {n, d, h, CFG_STR, 0, 0, false, NULL, NULL}
#define STR_CHECKED(n, d, h, f) {n, d, h, CFG_STR, 0, 0, false, NULL, f}
#define INT(n, d, lo, hi, h)    {n, d, h, CFG_INT, lo, hi, false, NULL, NULL}
#define SECONDS(n, d, h)        {n, d, h, CFG_DOUBLE, 0, 1e7, true, NULL, NULL}
#define BOOL(n, d, h)           {n, d, h, CFG_BOOL, 0, 0, false, NULL, NULL}
#define ENUM(n, d, v, h)        {n, d, h, CFG_ENUM, 0, 0, false, v, NULL}
#define EXTERN(n, h)            {n, NULL, h, CFG_EXTERN, 0, 0, false, NULL, NULL}
// clang-format on

/* Keep sorted by area; add a row here for every new tunable. */
static const dt_config_entry config_table[] = {
    ENUM("DT_LOG", "warn", log_levels, "log level: none|error|warn|info|debug|trace"),
    STR_CHECKED("DT_LOG_SUBSYS", "all",
                "comma list of subsystems to log (core,alloc,kernel,comm,mesh,redist,...)",
                check_subsys),
    STR("DT_LOG_FILE", NULL, "log to this file instead of stderr; %r = rank, %p = pid"),
    ENUM("DT_ALLOC", "caching", alloc_modes, "host allocator: caching|system"),
    STR_CHECKED("DT_ALLOC_CACHE_MAX", NULL,
                "most bytes the host allocator's cache keeps for reuse (e.g. 2G); a freed "
                "block past it goes back to the system at once; unset = no limit beyond "
                "DT_MEMORY_LIMIT",
                check_bytes),
    STR_CHECKED("DT_MEMORY_LIMIT", "auto",
                "host bytes of tensors a rank may hold (e.g. 6G, 512M): an allocation past it "
                "fails with DT_ERR_NO_MEMORY naming the category instead of meeting the OOM "
                "killer; auto = 0.95 x the host's memory (or its cgroup's limit) / local ranks; "
                "none = no budget",
                check_memory_limit),
    INT("DT_NUM_THREADS", "0", 0, 65536, "compute threads per rank; 0 = cores / local ranks"),
    BOOL("DT_BLAS_AUTOSELECT", "1",
         "pick the OpenBLAS kernel for this CPU when OPENBLAS_CORETYPE is unset"),
    EXTERN("OPENBLAS_NUM_THREADS",
           "OpenBLAS threads at load (read by OpenBLAS); when unset dtensor loads it with "
           "DT_NUM_THREADS' count, since idle OpenBLAS workers poll for ~0.1 s"),
    EXTERN("OPENBLAS_CORETYPE",
           "OpenBLAS kernel (read by OpenBLAS); when set, dtensor never overrides it"),
    ENUM("DT_GEMM", "auto", gemm_engines,
         "CPU matmul engine: auto|onednn|openblas; auto = oneDNN when it loads, else OpenBLAS "
         "(an info line says why); an engine named here that cannot load fails every matmul"),
    INT("DT_GEMM_CACHE", "64", 1, 4096,
        "oneDNN matmul primitives kept per process (LRU: one per shape, strides, transposes, "
        "alpha/beta)"),
    STR("DT_ONEDNN_LIB", "libdnnl.so.2", "the oneDNN 2.x library dtensor dlopens (name or path)"),
    EXTERN("OMP_NUM_THREADS",
           "OpenMP threads at load (read by OpenMP); when unset dtensor loads oneDNN with "
           "DT_NUM_THREADS' count"),
    EXTERN("OMP_WAIT_POLICY",
           "what idle OpenMP threads do (read when OpenMP loads); when it, GOMP_SPINCOUNT and "
           "KMP_BLOCKTIME are unset dtensor loads oneDNN with passive: spinning idle threads "
           "slow the communication"),
    EXTERN("GOMP_SPINCOUNT", "libgomp's spin count (read by libgomp); when set, dtensor leaves "
                             "OMP_WAIT_POLICY alone"),
    EXTERN("KMP_BLOCKTIME", "LLVM/Intel OpenMP's spin time (read by libomp); when set, dtensor "
                            "leaves OMP_WAIT_POLICY alone"),
    EXTERN("LOCAL_WORLD_SIZE",
           "ranks on this node (dtrun/torchrun); divides the cores for DT_NUM_THREADS"),
    EXTERN("OMPI_COMM_WORLD_LOCAL_SIZE", "ranks on this node under Open MPI's mpirun"),
    EXTERN("MPI_LOCALNRANKS", "ranks on this node under MPICH/Hydra"),
    EXTERN("SLURM_NTASKS_PER_NODE", "ranks on this node under srun"),
    SECONDS("DT_TIMEOUT_S", "300",
            "seconds a collective or store wait may take before DT_ERR_TIMEOUT"),
    ENUM("DT_DEBUG", "off", debug_modes,
         "collective checks: off = a hash of each call's arguments rides in its messages' tags "
         "(ranks that disagree fail naming the other rank); detail = every call also swaps its "
         "arguments first, so the error prints both sides (one more all-gather per call)"),
    STR_CHECKED("DT_ALGO", NULL, "force collective algorithms, e.g. allreduce:ring,allgather:ring",
                check_algo),
    INT("DT_SPIN_US", "-1", -1, 1000000,
        "microseconds a wait spins before sleeping on the event fd; -1 = auto: adaptive 5-200 "
        "us of polling (none with more local ranks than cores), then 50 us polling with "
        "sched_yield while the host is contended"),
    BOOL("DT_CMA", "1",
         "copy between ranks of one host with cross-memory attach (process_vm_readv/writev) "
         "where a collective can: 0 = never"),
    EXTERN("UCX_RNDV_THRESH",
           "UCX's rendezvous threshold (read by UCX); when unset and DT_SHM is on (UCX then "
           "carries only other hosts' messages, over TCP) dtensor sets 256K: eager sends "
           "below it skip the rendezvous' two extra trips"),
    BOOL("DT_SHM", "1",
         "carry messages of up to 4080 bytes between ranks of one host through shared-memory "
         "rings instead of UCX: 0 = never"),
    BOOL("DT_TCP_DIRECT", "0",
         "1 = send large messages (DT_TCP_DIRECT_MIN_KB) to ranks on other hosts over dtensor's "
         "own TCP sockets (one per pair, from and into the user's buffers) instead of UCX; an "
         "empty UCX marker goes with each, so a call whose sizes differ across the threshold "
         "fails at once. Faster on slow links (1 Gbit/s), slower at 10 Gbit/s on a 2-core VM, so "
         "off by default; the world agrees (any rank's 0 turns it off everywhere)"),
    INT("DT_TCP_DIRECT_MIN_KB", "64", 0, 1048576,
        "messages from this size (KiB) on take the direct TCP path (DT_TCP_DIRECT); smaller "
        "ones go through UCX. The same on every rank, or the path is off"),
    BOOL("DT_TEST_TCP_LOCAL", "0",
         "test only: the direct TCP path (DT_TCP_DIRECT) also connects ranks of one host, over "
         "loopback, and carries their large messages where the rings do not (DT_SHM=0)"),
    BOOL("DT_SHM_MEMBARRIER", "0",
         "1 = a rank about to sleep on the shared-memory rings orders its announcement with "
         "membarrier(2), so senders need no fence after each message; 0 = both sides fence "
         "(default: on 2 KVM vCPUs the fence's cost did not show, each sleep's membarrier did)"),
    INT("DT_RING_SEGMENT_KB", "4096", 1, 1048576,
        "segment size (KiB) of pipelined ring collectives"),
    INT("DT_HIER_SEGMENT_KB", "1024", 0, 1048576,
        "chunk (KiB) over which the two-host hierarchical all-reduce pipelines its steps; "
        "0 = no pipelining"),
    INT("DT_TEST_RANKS_PER_HOST", "0", 0, 1048576,
        "test only: the hierarchical collectives take world rank i to be on host i / this "
        "(the transports still use the real hosts); 0 = the real hosts"),
    STR("DT_STORE_BIND", "127.0.0.1", "address the rank-0 store binds to"),
    SECONDS("DT_STORE_STALL_S", "10",
            "seconds the store waits on a half-sent message or a missing AUTH before dropping "
            "the client"),
    STR("DT_JOB_TOKEN", NULL, "secret every store client must present (set by dtrun)"),
    ENUM("DT_DEVICE", "auto", devices,
         "device of this rank: cpu|cuda|sim|auto (auto: cuda when a GPU is usable)"),
    BOOL("DT_NCCL", "1", "0: CUDA ranks talk over UCX with staged device buffers instead of NCCL"),
    INT("DT_SIM_DELAY_US", "0", 0, 10000000,
        "sim device: microseconds each queued kernel or copy waits first"),
};

#define N_ENTRIES (sizeof(config_table) / sizeof(config_table[0]))

/* One warning per variable for a bad value read before (or without) dt_init. */
static atomic_bool warned[N_ENTRIES];

static const dt_config_entry *config_find(const char *name)
{
    /* callers pass literals, so the last few names are found by address:
     * collectives look tunables up on every call */
    static _Thread_local struct {
        const char *name;
        const dt_config_entry *e;
    } memo[4];
    static _Thread_local unsigned next;
    for (int i = 0; i < 4; i++)
        if (memo[i].name == name)
            return memo[i].e;
    for (size_t i = 0; i < N_ENTRIES; i++)
        if (strcmp(config_table[i].name, name) == 0) {
            memo[next % 4].name = name;
            memo[next++ % 4].e = &config_table[i];
            return &config_table[i];
        }
    return NULL;
}

/* ------------------------------------------------------------ value syntax */

/* "a, b, c": the names of a NULL-terminated list. */
static void list_names(const char *const *v, char *buf, size_t len)
{
    size_t p = 0;
    buf[0] = '\0';
    for (int i = 0; v[i] != NULL && p < len; i++) {
        int w = snprintf(buf + p, len - p, "%s%s", i ? ", " : "", v[i]);
        p += w > 0 ? (size_t)w : 0;
    }
}

static bool word_char(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* "comm,mesh": names of letters, digits and '_' separated by single commas. */
static bool check_subsys(const char *v, char *why, size_t len)
{
    for (const char *p = v;; p++) {
        const char *start = p;
        while (word_char(*p))
            p++;
        if (p == start || (*p != ',' && *p != '\0')) {
            snprintf(why, len, "is not a comma list of subsystem names (e.g. comm,mesh)");
            return false;
        }
        if (*p == '\0')
            return true;
    }
}

/* "allreduce:ring,broadcast:binomial": collective names are checked here; the
 * algorithm names by the collective, which fails naming an unknown one. */
static bool check_bytes(const char *v, char *why, size_t len)
{
    uint64_t b = 0;
    if (dt__parse_bytes(v, &b))
        return true;
    snprintf(why, len, "is not a size in bytes (a number with an optional K, M, G or T suffix)");
    return false;
}

static bool check_memory_limit(const char *v, char *why, size_t len)
{
    if (strcmp(v, "auto") == 0 || strcmp(v, "none") == 0 || check_bytes(v, why, len))
        return true;
    snprintf(why, len, "is not auto, none, or a size in bytes (e.g. 6G, 512M)");
    return false;
}

static bool check_algo(const char *v, char *why, size_t len)
{
    static const char *const colls[] = {
        "allreduce", "allgather", "reduce_scatter", "alltoall", "alltoallw", "broadcast", NULL};
    for (const char *p = v;;) {
        const char *c = p;
        while (word_char(*p))
            p++;
        size_t cl = (size_t)(p - c);
        const char *a = p + 1;
        if (*p == ':')
            for (p = a; word_char(*p); p++)
                ;
        if (cl == 0 || a[-1] != ':' || p == a || (*p != ',' && *p != '\0')) {
            snprintf(why, len, "is not a comma list of collective:algorithm (e.g. allreduce:ring)");
            return false;
        }
        bool known = false;
        for (int i = 0; colls[i] != NULL && !known; i++)
            known = strlen(colls[i]) == cl && strncmp(colls[i], c, cl) == 0;
        if (!known) {
            char names[128];
            list_names(colls, names, sizeof(names));
            snprintf(why, len, "names the collective '%.*s', not one of %s", (int)cl, c, names);
            return false;
        }
        if (*p == '\0')
            return true;
        p++;
    }
}

static const char *const bool_true[] = {"1", "true", "yes", "on", NULL};
static const char *const bool_false[] = {"0", "false", "no", "off", NULL};

static int enum_index(const char *const *values, const char *v)
{
    for (int i = 0; values[i] != NULL; i++)
        if (strcasecmp(values[i], v) == 0)
            return i;
    return -1;
}

/* The "(want ...)" part of a message: what @p e accepts. */
static void want_text(const dt_config_entry *e, char *buf, size_t len)
{
    char names[160];
    switch (e->kind) {
    case CFG_INT:
        snprintf(buf, len, "an integer in %.0f..%.0f", e->lo, e->hi);
        break;
    case CFG_DOUBLE:
        snprintf(buf, len, "a number %s %g and <= %g", e->lo_open ? ">" : ">=", e->lo, e->hi);
        break;
    case CFG_BOOL:
        snprintf(buf, len, "0 or 1, true or false, yes or no, on or off");
        break;
    case CFG_ENUM:
        list_names(e->values, names, sizeof(names));
        snprintf(buf, len, "one of %s", names);
        break;
    default:
        snprintf(buf, len, "%s", e->help);
        break;
    }
}

/*
 * Whether @p v is a valid value of @p e; if not, "<NAME>='<v>' <why> (want
 * ...)" into @p msg. @p canon gets the value as the getters hand it on
 * (the enum's own spelling, "0"/"1" for a bool, else @p v itself).
 */
static bool value_check(const dt_config_entry *e, const char *v, const char **canon, char *msg,
                        size_t len)
{
    char why[160] = "", want[200];
    bool ok = true;
    *canon = v;
    switch (e->kind) {
    case CFG_INT: {
        char *end = NULL;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (isspace((unsigned char)v[0]) || end == v || *end != '\0') {
            ok = false;
            snprintf(why, sizeof(why), "is not an integer");
        } else if (errno == ERANGE || (double)x < e->lo || (double)x > e->hi) {
            ok = false;
            snprintf(why, sizeof(why), "is out of range");
        }
        break;
    }
    case CFG_DOUBLE: {
        char *end = NULL;
        errno = 0;
        double x = strtod(v, &end);
        if (isspace((unsigned char)v[0]) || end == v || *end != '\0' || isnan(x)) {
            ok = false;
            snprintf(why, sizeof(why), "is not a number");
        } else if (errno == ERANGE || !isfinite(x) || x < e->lo || (e->lo_open && x == e->lo) ||
                   x > e->hi) {
            ok = false;
            snprintf(why, sizeof(why), "is out of range");
        }
        break;
    }
    case CFG_BOOL:
        if (enum_index(bool_true, v) >= 0) {
            *canon = "1";
        } else if (enum_index(bool_false, v) >= 0) {
            *canon = "0";
        } else {
            ok = false;
            snprintf(why, sizeof(why), "is not a boolean");
        }
        break;
    case CFG_ENUM: {
        int i = enum_index(e->values, v);
        if (i >= 0)
            *canon = e->values[i];
        else {
            ok = false;
            snprintf(why, sizeof(why), "is not an allowed value");
        }
        break;
    }
    case CFG_STR:
        if (e->check != NULL && !e->check(v, why, sizeof(why)))
            ok = false;
        break;
    case CFG_EXTERN:
        break;
    }
    if (!ok) {
        want_text(e, want, sizeof(want));
        if (e->kind == CFG_STR)
            snprintf(msg, len, "%s='%s' %s", e->name, v, why);
        else
            snprintf(msg, len, "%s='%s' %s (want %s)", e->name, v, why, want);
    }
    return ok;
}

/* ------------------------------------------------------------ getters */

static const char *entry_value(const dt_config_entry *e)
{
    const char *v = getenv(e->name);
    if (v == NULL || v[0] == '\0')
        return e->dflt;
    const char *canon = v;
    char msg[512];
    if (value_check(e, v, &canon, msg, sizeof(msg)))
        return canon;
    /* dt_init refuses the value; code that runs before it (or without it)
     * takes the default, and says so once */
    if (!atomic_exchange(&warned[e - config_table], true)) {
        if (strncmp(e->name, "DT_LOG", 6) == 0) /* the logger reads these itself */
            fprintf(stderr, "dtensor: %s; using the default %s\n", msg, e->dflt ? e->dflt : "");
        else
            DT_LOG_WARN("core", "%s; using the default %s", msg, e->dflt ? e->dflt : "(unset)");
    }
    return e->dflt;
}

const char *dt__config_str(const char *name)
{
    const dt_config_entry *e = config_find(name);
    if (e == NULL) {
        /* not through DT_LOG_*: the logger itself reads the registry */
        fprintf(stderr, "dtensor: internal: tunable %s is not in the registry\n", name);
        return getenv(name);
    }
    return entry_value(e);
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

extern char **environ;

/* A DT_* variable the registry does not know is most likely a misspelt one. */
static void warn_unknown(void)
{
    static atomic_bool done;
    if (atomic_exchange(&done, true))
        return;
    for (char **ev = environ; ev != NULL && *ev != NULL; ev++) {
        const char *eq = strchr(*ev, '=');
        if (strncmp(*ev, "DT_", 3) != 0 || eq == NULL)
            continue;
        size_t n = (size_t)(eq - *ev);
        bool known = false;
        for (size_t i = 0; i < N_ENTRIES && !known; i++)
            known = strlen(config_table[i].name) == n && strncmp(config_table[i].name, *ev, n) == 0;
        if (!known)
            DT_LOG_WARN_HOST("core", "%.*s is set, but dtensor reads no such variable (misspelt?)",
                             (int)n, *ev);
    }
}

dt_status dt__config_validate(const char *fn)
{
    for (size_t i = 0; i < N_ENTRIES; i++) {
        const dt_config_entry *e = &config_table[i];
        const char *v = getenv(e->name), *canon = NULL;
        char msg[512];
        if (v != NULL && v[0] != '\0' && !value_check(e, v, &canon, msg, sizeof(msg))) {
            atomic_store(&warned[i], true); /* the error says it; no warning on top */
            return DT_ERR(DT_ERR_INVALID_ARG, "%s: environment variable %s", fn, msg);
        }
    }
    warn_unknown();
    return DT_OK;
}

void dt_config_print(FILE *f)
{
    for (size_t i = 0; i < N_ENTRIES; i++) {
        const dt_config_entry *e = &config_table[i];
        const char *cur = getenv(e->name);
        fprintf(f, "%-20s default=%-10s current=%-10s %s\n", e->name, e->dflt ? e->dflt : "-",
                cur ? cur : "-", e->help);
    }
}
