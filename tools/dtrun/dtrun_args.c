/* dtrun's command line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrun.h"

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: dtrun -n N [--nnodes M --node-rank R --master HOST:PORT] [--tag-output]\n"
        "             [--grace SECONDS] PROGRAM [ARGS...]\n"
        "  -n, --nproc-per-node N  ranks on this node\n"
        "  --nnodes M              nodes in the job (default 1); rank = node_rank * N + local\n"
        "  --node-rank R           this node's index, 0..M-1 (default 0)\n"
        "  --master HOST:PORT      rank 0's store address (required when M > 1; node 0 binds it);\n"
        "                          default 127.0.0.1 and a free port\n"
        "  --tag-output            prefix every output line with \"[rank] \"\n"
        "  --grace SECONDS         SIGTERM-to-SIGKILL delay when tearing down (default 2)\n"
        "  --stop-timeout SECONDS  a rank stopped (SIGSTOP) this long fails the job; 0: never\n"
        "                          (default DT_TIMEOUT_S, else 300, like the ranks' timeout)\n"
        "  --bind auto|none        auto (default): when ranks outnumber the CPUs dtrun may\n"
        "                          use, pin rank i to the (i mod CPUs)-th of them, so ranks\n"
        "                          sharing a core stay paired instead of migrating\n"
        "Multi-node jobs need the same DT_JOB_TOKEN exported on every node.\n");
}

static bool parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

static bool parse_seconds(const char *s, double hi, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !(v >= 0 && v <= hi))
        return false;
    *out = v;
    return true;
}

/* The stop timeout's default: the ranks' own timeout, DT_TIMEOUT_S (300 s). */
static double default_stop_timeout(void)
{
    const char *e = getenv("DT_TIMEOUT_S");
    double v = 300;
    /* a bad value is the ranks' to report: they refuse to start with it */
    if (e == NULL || !parse_seconds(e, 1e6, &v) || v == 0)
        v = 300;
    return v;
}

static bool parse_master(const char *v, dtrun_opts *o)
{
    const char *colon = strrchr(v, ':');
    size_t hl = colon ? (size_t)(colon - v) : 0;
    if (colon == NULL || hl == 0 || hl >= sizeof(o->master_addr) ||
        !parse_int(colon + 1, 1, 65535, &o->master_port))
        return false;
    memcpy(o->master_addr, v, hl);
    o->master_addr[hl] = '\0';
    return true;
}

/* One option that takes a value: 0, or 2 after printing what is wrong. */
static int parse_value_option(const char *a, const char *v, dtrun_opts *o)
{
    const char *want = NULL;
    if (strcmp(a, "-n") == 0 || strcmp(a, "--nproc-per-node") == 0) {
        if (!parse_int(v, 1, DTRUN_MAX_RANKS, &o->nproc))
            want = "1..4096 ranks";
    } else if (strcmp(a, "--nnodes") == 0) {
        if (!parse_int(v, 1, DTRUN_MAX_RANKS, &o->nnodes))
            want = "1..4096 nodes";
    } else if (strcmp(a, "--node-rank") == 0) {
        if (!parse_int(v, 0, DTRUN_MAX_RANKS - 1, &o->node_rank))
            want = "a node index >= 0";
    } else if (strcmp(a, "--master") == 0) {
        if (!parse_master(v, o))
            want = "HOST:PORT with port 1..65535";
    } else if (strcmp(a, "--bind") == 0) {
        if (strcmp(v, "auto") == 0 || strcmp(v, "none") == 0)
            o->bind = strcmp(v, "auto") == 0;
        else
            want = "auto or none";
    } else if (strcmp(a, "--grace") == 0) {
        if (!parse_seconds(v, 3600, &o->grace_s))
            want = "0..3600 seconds";
    } else if (strcmp(a, "--stop-timeout") == 0) {
        if (!parse_seconds(v, 1e6, &o->stop_timeout_s))
            want = "0..1000000 seconds";
    } else {
        fprintf(stderr, "dtrun: unknown option '%s'\n", a);
        usage(stderr);
        return 2;
    }
    if (want == NULL)
        return 0;
    fprintf(stderr, "dtrun: %s must be %s, got '%s'\n", a, want, v);
    return 2;
}

/* Options that only make sense together. */
static int check_opts(const dtrun_opts *o)
{
    if (o->node_rank >= o->nnodes) {
        fprintf(stderr, "dtrun: --node-rank %d is out of range for --nnodes %d\n", o->node_rank,
                o->nnodes);
        return 2;
    }
    if ((long)o->nnodes * o->nproc > DTRUN_MAX_RANKS) {
        fprintf(stderr, "dtrun: %d nodes x %d ranks is more than %d ranks\n", o->nnodes, o->nproc,
                DTRUN_MAX_RANKS);
        return 2;
    }
    if (o->nnodes > 1 && o->master_port == 0) {
        fprintf(stderr, "dtrun: --nnodes %d needs --master HOST:PORT\n", o->nnodes);
        return 2;
    }
    return 0;
}

int dtrun_parse_args(int argc, char **argv, dtrun_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->nnodes = 1;
    o->grace_s = 2.0;
    o->stop_timeout_s = default_stop_timeout();
    o->bind = true;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(a, "--tag-output") == 0) {
            o->tag_output = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "dtrun: option %s needs a value\n", a);
            return 2;
        }
        int rc = parse_value_option(a, argv[++i], o);
        if (rc != 0)
            return rc;
    }
    if (i >= argc || o->nproc == 0) {
        fprintf(stderr, "dtrun: %s\n", o->nproc == 0 ? "-n N is required" : "no PROGRAM given");
        usage(stderr);
        return 2;
    }
    o->argv = argv + i;
    return check_opts(o);
}
