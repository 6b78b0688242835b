/*
 * commsim: predicted time and bus bandwidth of every algorithm of a
 * collective, and the dispatcher's choice, on a job of any size.
 *
 *   commsim --ranks N [--per-host K] [--collective allreduce] [--bytes 1G]
 *           [--model local|cluster|veth] [--set key=value]... [--algo A] [--csv]
 *   commsim --batch   (such command lines on stdin, one per line)
 *
 * --bytes counts as bench/comm/comm_bench does (float32, the largest
 * buffer); the model's keys are listed by --help and docs/COMMSIM.md.
 */
#include "commsim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct opts {
    int ranks;
    const char *coll, *algo;
    uint64_t bytes;
    cs_model m;
    bool csv;
} opts;

static int usage(FILE *f)
{
    fprintf(f, "usage: commsim --ranks N [--per-host K] [--hosts-per-switch H]\n"
               "               [--collective allreduce|allgather|reduce_scatter|broadcast]\n"
               "               [--bytes SIZE (K/M/G)] [--model local|cluster|veth]\n"
               "               [--set key=value]... [--algo NAME] [--csv]\n"
               "       commsim --batch  (such command lines on stdin, one a line)\n"
               "model keys (times in us, bandwidths in GB/s): ");
    cs_model m;
    cs_model_preset("local", &m);
    cs_model_print(&m);
    return f == stdout ? 0 : 2;
}

static int bad(const char *what, const char *value)
{
    fprintf(stderr, "commsim: %s: bad value '%s'\n", what, value ? value : "(missing)");
    return 2;
}

/* A positive integer, or a size with a binary K/M/G suffix. */
static bool parse_u64(const char *s, uint64_t *v)
{
    char *end = NULL;
    if (s == NULL || *s == '-')
        return false;
    unsigned long long x = strtoull(s, &end, 10);
    int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    if (end == s || (shift && end[1] != '\0') || (!shift && *end != '\0') || x == 0)
        return false;
    *v = (uint64_t)x << shift;
    return (*v >> shift) == x;
}

static bool known_coll(const char *c)
{
    for (const char *const *p = cs_collectives; *p != NULL; p++)
        if (strcmp(*p, c) == 0)
            return true;
    return false;
}

static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){.coll = "allreduce", .bytes = 1u << 30};
    cs_model_preset("local", &o->m);
    int per_host = 0, hps = 0;
    char err[200];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t x = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return usage(stdout) - 1;
        if (strcmp(a, "--csv") == 0) {
            o->csv = true;
            continue;
        }
        i++;
        if (strcmp(a, "--ranks") == 0 || strcmp(a, "--per-host") == 0 ||
            strcmp(a, "--hosts-per-switch") == 0) {
            if (!parse_u64(v, &x) || x > (1u << 20) || (strcmp(a, "--ranks") == 0 && x < 2))
                return bad(a, v);
            *(strcmp(a, "--ranks") == 0 ? &o->ranks : a[2] == 'p' ? &per_host : &hps) = (int)x;
        } else if (strcmp(a, "--bytes") == 0) {
            if (!parse_u64(v, &o->bytes) || o->bytes > (1ull << 40))
                return bad(a, v);
        } else if (strcmp(a, "--collective") == 0) {
            if (v == NULL || !known_coll(v))
                return bad(a, v);
            o->coll = v;
        } else if (strcmp(a, "--algo") == 0) {
            o->algo = v;
        } else if (strcmp(a, "--model") == 0) {
            if (v == NULL || !cs_model_preset(v, &o->m))
                return bad(a, v);
        } else if (strcmp(a, "--set") == 0) {
            if (v == NULL || !cs_model_set(&o->m, v, err, sizeof(err))) {
                fprintf(stderr, "commsim: --set: %s\n", v ? err : "bad value '(missing)'");
                return 2;
            }
        } else {
            fprintf(stderr, "commsim: unknown option '%s'\n", a);
            return usage(stderr);
        }
    }
    if (o->ranks == 0)
        return bad("--ranks", NULL);
    o->m.per_host = per_host ? per_host : o->m.per_host;
    o->m.hosts_per_switch = hps ? hps : o->m.hosts_per_switch;
    if (o->bytes / 4 < (uint64_t)o->ranks) {
        fprintf(stderr, "commsim: --bytes %llu: less than one float per rank on %d ranks\n",
                (unsigned long long)o->bytes, o->ranks);
        return 2;
    }
    return 0;
}

/* Predict one algorithm; a row of the table. Returns false on an error. */
static bool row(const opts *o, const char *algo, const char *chosen)
{
    char err[200];
    const char *mark = strcmp(algo, chosen) == 0 ? "*" : "";
    if (strcmp(algo, "direct") == 0 && o->ranks > 512) { /* p^2 messages */
        if (!o->csv)
            printf("  %-20s %14s\n", algo, "(not run: over 512 ranks)");
        return true;
    }
    if (strcmp(algo, "hier") == 0 && o->algo == NULL &&
        (!cs_hier_applies(o->ranks, o->m.per_host) || o->ranks > 512)) {
        if (!o->csv) /* the host layout is found per rank in O(ranks x hosts) */
            printf("  %-20s %14s\n", algo,
                   o->ranks > 512 ? "(not run: over 512 ranks)"
                                  : "(not run: needs hosts of one size > 1)");
        return true;
    }
    cs_job job;
    if (!cs_build(&job, o->coll, algo, o->ranks, o->m.per_host, o->bytes, err, sizeof(err))) {
        fprintf(stderr, "commsim: %s\n", err);
        return false;
    }
    /* a forced algorithm (DT_ALGO) leaves the tiny path, as in comm.c */
    job.tiny = o->algo == NULL && *mark && cs_tiny(o->coll, o->ranks, o->m.per_host, o->bytes);
    double t = cs_simulate(&job, &o->m, err, sizeof(err));
    uint32_t rounds = job.shapes[0].nrounds, shapes = job.nshapes;
    bool tiny = job.tiny;
    cs_job_free(&job);
    if (t < 0) {
        fprintf(stderr, "commsim: %s %s: %s\n", o->coll, algo, err);
        return false;
    }
    double busbw = (double)o->bytes / t * cs_busbw_factor(o->coll, o->ranks) / 1e9;
    if (o->csv)
        printf("%s,%d,%d,%llu,%s,%.9g,%.6g,%s\n", o->coll, o->ranks, o->m.per_host,
               (unsigned long long)o->bytes, algo, t, busbw, mark);
    else
        printf("  %-20s %14.2f %12.3f %8u %7u %s\n", algo, t * 1e6, busbw, rounds, shapes,
               !*mark ? ""
               : tiny ? "<- dispatcher (tiny path)"
                      : "<- dispatcher");
    return true;
}

/* One command line's predictions; its exit status. */
static int run(int argc, char **argv)
{
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    bool one_host = o.ranks <= o.m.per_host;
    const char *chosen = cs_dispatch(o.coll, o.ranks, o.m.per_host, o.bytes);
    int hosts = (o.ranks + o.m.per_host - 1) / o.m.per_host;
    if (!o.csv) {
        printf("%s of %llu bytes on %d ranks: %d host(s) of %d, %d hosts per switch\nmodel: ",
               o.coll, (unsigned long long)o.bytes, o.ranks, hosts,
               one_host ? o.ranks : o.m.per_host, o.m.hosts_per_switch);
        cs_model_print(&o.m);
        printf("  %-20s %14s %12s %8s %7s\n", "algorithm", "time (us)", "busbw GB/s", "rounds",
               "shapes");
    }
    const char *const *algos = cs_algorithms(o.coll);
    if (o.algo != NULL && !row(&o, o.algo, chosen)) /* an unknown one fails naming it */
        return 1;
    for (; o.algo == NULL && *algos != NULL; algos++)
        if (!row(&o, *algos, chosen))
            return 1;
    double link = one_host ? o.m.bw_shm : (o.m.bw_shm < o.m.bw_net ? o.m.bw_shm : o.m.bw_net);
    if (!o.csv)
        printf("dispatcher: %s%s\nbandwidth bound: busbw %.3f GB/s (the slowest link)\n", chosen,
               cs_algorithms(o.coll) && strcmp(chosen, "peer_copy") == 0 ? " (not simulated)" : "",
               link / 1e9);
    return 0;
}

/* --batch: one command line per line of stdin, each answer followed by a
 * line "#end RC". A model fit predicts thousands of rows; as one process each
 * the library's loading dominated (~0.1 s a row). */
static int batch(void)
{
    char line[4096], *args[64];
    while (fgets(line, sizeof(line), stdin) != NULL) {
        int n = 0;
        args[n++] = "commsim";
        for (char *t = strtok(line, " \t\n"); t != NULL && n < 63; t = strtok(NULL, " \t\n"))
            args[n++] = t;
        args[n] = NULL;
        int rc = run(n, args);
        printf("#end %d\n", rc);
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--batch") == 0)
        return batch();
    return run(argc, argv);
}
