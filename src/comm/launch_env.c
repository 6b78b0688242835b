/*
 * Reading rank, size and the rendezvous from dtrun/torchrun, Open MPI, Hydra
 * or Slurm. Launcher variables are read with getenv() on purpose: they are the
 * launchers' interface, not dtensor tunables (DT_JOB_TOKEN is, via the registry).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/launch_env.h"
#include "core/config.h"
#include "core/error.h"

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return (v != NULL && v[0] != '\0') ? v : NULL;
}

/* An integer variable in [lo, hi]; unset -> *out = dflt (or an error if required). */
static dt_status env_int(const char *name, long lo, long hi, bool required, int dflt, int *out)
{
    const char *v = env(name);
    if (v == NULL) {
        if (required)
            return DT_ERR(DT_ERR_INVALID_ARG, "dt__launch_env_read: %s is not set", name);
        *out = dflt;
        return DT_OK;
    }
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0')
        return DT_ERR(DT_ERR_INVALID_ARG, "dt__launch_env_read: %s='%s' is not an integer", name,
                      v);
    if (x < lo || x > hi)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt__launch_env_read: %s=%ld is outside %ld..%ld", name,
                      x, lo, hi);
    *out = (int)x;
    return DT_OK;
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* "2(x3),1" with node index 3 -> 1: tasks on node @p node. -1 if unparsable. */
static int slurm_tasks_on_node(const char *spec, int node)
{
    const char *p = spec;
    while (*p) {
        char *end;
        long n = strtol(p, &end, 10), rep = 1;
        if (end == p || n < 0)
            return -1;
        p = end;
        if (strncmp(p, "(x", 2) == 0) {
            rep = strtol(p + 2, &end, 10);
            if (end == p + 2 || *end != ')' || rep < 1)
                return -1;
            p = end + 1;
        }
        if (node < rep)
            return (int)n;
        node -= (int)rep;
        if (*p == ',')
            p++;
        else if (*p != '\0')
            return -1;
    }
    return -1;
}

/* First host of a Slurm hostlist: "gpu[03-05,9],cpu1" -> "gpu03". */
static bool slurm_first_host(const char *list, char *out, size_t cap)
{
    size_t i = 0, o = 0;
    while (list[i] && list[i] != ',' && list[i] != '[' && o + 1 < cap)
        out[o++] = list[i++];
    if (list[i] == '[') {
        i++;
        while (list[i] && list[i] != '-' && list[i] != ',' && list[i] != ']' && o + 1 < cap)
            out[o++] = list[i++];
        while (list[i] && list[i] != ']')
            i++;
        if (list[i] != ']')
            return false;
        i++;
        while (list[i] && list[i] != ',' && list[i] != '[' && o + 1 < cap)
            out[o++] = list[i++];
    }
    out[o] = '\0';
    return o > 0;
}

/* rank/size (required) and local rank/size (optional; lrk/lsz may be NULL) of one
 * source, each checked against its range. */
static dt_status read_ranks(dt_launch_env *e, const char *rk, const char *sz, const char *lrk,
                            const char *lsz)
{
    DT_CHECK(env_int(sz, 1, 1 << 24, true, 1, &e->size));
    DT_CHECK(env_int(rk, 0, e->size - 1, true, 0, &e->rank));
    if (lsz != NULL)
        DT_CHECK(env_int(lsz, 1, e->size, false, e->size, &e->local_size));
    else
        e->local_size = e->size;
    if (lrk != NULL)
        DT_CHECK(env_int(lrk, 0, e->local_size - 1, false, e->rank, &e->local_rank));
    else
        e->local_rank = e->rank;
    if (e->local_rank >= e->local_size)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt__launch_env_read: local rank %d (from %s) is out of "
                      "range for local size %d",
                      e->local_rank, lrk ? lrk : rk, e->local_size);
    return DT_OK;
}

static dt_status read_slurm(dt_launch_env *e)
{
    const char *ntasks = env("SLURM_NTASKS") ? "SLURM_NTASKS" : "SLURM_NPROCS";
    DT_CHECK(read_ranks(e, "SLURM_PROCID", ntasks, "SLURM_LOCALID", NULL));
    const char *tpn = env("SLURM_TASKS_PER_NODE");
    int node = 0;
    DT_CHECK(env_int("SLURM_NODEID", 0, 1 << 24, false, 0, &node));
    if (tpn != NULL) {
        int n = slurm_tasks_on_node(tpn, node);
        if (n < 1 || n > e->size)
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt__launch_env_read: SLURM_TASKS_PER_NODE='%s' "
                          "gives no task count for SLURM_NODEID=%d",
                          tpn, node);
        e->local_size = n;
    }
    if (e->local_rank >= e->local_size)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt__launch_env_read: SLURM_LOCALID=%d is out of range "
                      "for %d tasks on this node",
                      e->local_rank, e->local_size);
    return DT_OK;
}

/* master_addr when MASTER_ADDR is unset. */
static dt_status default_addr(dt_launch_env *e)
{
    if (e->local_size == e->size) {
        snprintf(e->master_addr, sizeof(e->master_addr), "127.0.0.1");
        return DT_OK;
    }
    if (strcmp(e->source, "slurm") == 0) {
        const char *names[] = {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"};
        for (int i = 0; i < 3; i++) {
            const char *l = env(names[i]);
            if (l == NULL)
                continue;
            if (!slurm_first_host(l, e->master_addr, sizeof(e->master_addr)))
                return DT_ERR(DT_ERR_INVALID_ARG, "dt__launch_env_read: cannot parse %s='%s'",
                              names[i], l);
            return DT_OK;
        }
    }
    return DT_ERR(DT_ERR_INVALID_ARG,
                  "dt__launch_env_read: ranks span several nodes (%s: %d of "
                  "%d local) and MASTER_ADDR is not set: export rank 0's host as MASTER_ADDR",
                  e->source, e->local_size, e->size);
}

/* The job id that names this run identically on every rank; "" if none. */
static void job_id(const dt_launch_env *e, char *out, size_t cap)
{
    out[0] = '\0';
    if (strcmp(e->source, "ompi") == 0) {
        const char *j = env("OMPI_MCA_ess_base_jobid");
        if (j == NULL)
            j = env("PMIX_NAMESPACE");
        if (j != NULL)
            snprintf(out, cap, "ompi:%s", j);
    } else if (strcmp(e->source, "slurm") == 0) {
        const char *j = env("SLURM_JOB_ID") ? env("SLURM_JOB_ID") : env("SLURM_JOBID");
        const char *s = env("SLURM_STEP_ID") ? env("SLURM_STEP_ID") : env("SLURM_STEPID");
        if (j != NULL)
            snprintf(out, cap, "slurm:%s.%s", j, s ? s : "0");
    } else if (strcmp(e->source, "pmi") == 0) {
        const char *j = env("PMI_JOBID");
        if (j != NULL)
            snprintf(out, cap, "pmi:%s", j);
        else if (e->local_size == e->size) /* one node: the Hydra proxy is every rank's parent */
            snprintf(out, cap, "pmi-ppid:%ld", (long)getppid());
    } else if (strcmp(e->source, "env") == 0) {
        const char *j = env("TORCHELASTIC_RUN_ID");
        snprintf(out, cap, "env:%s:%s:%s", j ? j : "", env("MASTER_ADDR") ? env("MASTER_ADDR") : "",
                 env("MASTER_PORT") ? env("MASTER_PORT") : "");
    }
}

/* token: DT_JOB_TOKEN, else derived from the job id @p jid, else "". */
static dt_status job_token(dt_launch_env *e, const char *jid)
{
    const char *tok = dt__config_str("DT_JOB_TOKEN");
    if (tok != NULL && tok[0] != '\0') {
        if (strlen(tok) >= sizeof(e->token))
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt__launch_env_read: DT_JOB_TOKEN is %zu chars "
                          "(max %zu)",
                          strlen(tok), sizeof(e->token) - 1);
        snprintf(e->token, sizeof(e->token), "%s", tok);
    } else if (jid[0] != '\0') {
        snprintf(e->token, sizeof(e->token), "dtjob-%016" PRIx64,
                 (uint64_t)(fnv1a(jid) ^ 0x9e3779b97f4a7c15ull));
    } else {
        e->token[0] = '\0';
    }
    return DT_OK;
}

/* master_addr, master_port and token (see launch_env.h). */
static dt_status rendezvous(dt_launch_env *e)
{
    char jid[320];
    job_id(e, jid, sizeof(jid));
    const char *addr = env("MASTER_ADDR");
    if (addr != NULL) {
        if (strlen(addr) >= sizeof(e->master_addr))
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt__launch_env_read: MASTER_ADDR is %zu chars "
                          "(max %zu)",
                          strlen(addr), sizeof(e->master_addr) - 1);
        snprintf(e->master_addr, sizeof(e->master_addr), "%s", addr);
    } else {
        DT_CHECK(default_addr(e));
    }
    bool need_port = e->size > 1;
    if (env("MASTER_PORT") != NULL || (need_port && strcmp(e->source, "env") == 0)) {
        DT_CHECK(env_int("MASTER_PORT", 1, 65535, true, 0, &e->master_port));
    } else if (need_port) {
        if (jid[0] == '\0')
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt__launch_env_read: no job id to derive a port "
                          "from (%s); export MASTER_PORT",
                          e->source);
        e->master_port = 10000 + (int)(fnv1a(jid) % 20000);
    } else {
        e->master_port = 0;
    }
    return job_token(e, jid);
}

dt_status dt__launch_env_read(dt_launch_env *out)
{
    DT_ARG_NOT_NULL(out);
    dt_launch_env e;
    memset(&e, 0, sizeof(e));
    if (env("RANK") != NULL || env("WORLD_SIZE") != NULL) {
        snprintf(e.source, sizeof(e.source), "env");
        DT_CHECK(read_ranks(&e, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"));
    } else if (env("OMPI_COMM_WORLD_RANK") != NULL || env("OMPI_COMM_WORLD_SIZE") != NULL) {
        snprintf(e.source, sizeof(e.source), "ompi");
        DT_CHECK(read_ranks(&e, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                            "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"));
    } else if (env("PMI_RANK") != NULL || env("PMI_SIZE") != NULL) {
        snprintf(e.source, sizeof(e.source), "pmi");
        DT_CHECK(read_ranks(&e, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"));
    } else if (env("SLURM_PROCID") != NULL) {
        snprintf(e.source, sizeof(e.source), "slurm");
        DT_CHECK(read_slurm(&e));
    } else {
        snprintf(e.source, sizeof(e.source), "single");
        e.size = e.local_size = 1;
    }
    DT_CHECK(rendezvous(&e));
    *out = e;
    return DT_OK;
}
