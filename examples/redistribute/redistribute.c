/*
 * redistribute - move a tensor between placements and show what happens.
 *
 *   dtrun -n 4 build/examples/redistribute/redistribute --mesh 2x2 --shape 7,5 \
 *         --from "S(0),R" --to "R,S(1)" [--names dp,tp] [--dtype f32] [--explain]
 *         [--in x.safetensors [--name T]] [--out y.safetensors]
 *
 * Every rank prints its local shape and global offset before and after, rank 0
 * prints the plan (with --explain, each rank prints its own plan: byte counts
 * differ on uneven shards), the collectives run, and whether
 * full_tensor(redistribute(distribute(x))) == x bit for bit.
 * Run without dtrun (one process) on a bigger mesh, it only plans: every
 * rank's shapes and plan, computed on virtual meshes, no communication.
 * --in reads the tensor from a safetensors file (--name picks one of several),
 * --out writes the redistributed tensor's full value to one.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtensor.h"

#define CHECK(call)                                                                                \
    do {                                                                                           \
        dt_status s_ = (call);                                                                     \
        if (s_ != DT_OK) {                                                                         \
            fprintf(stderr, "redistribute: %s: %s\n", dt_status_str(s_), dt_last_error());         \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

typedef struct args {
    int mesh_ndim, mesh[DT_MESH_MAX_DIMS];
    int ndim;
    int64_t shape[DT_MAX_DIMS];
    char *names_arg; /* the --names argv string, split in place: outlives parse() */
    const char *names[DT_MESH_MAX_DIMS];
    const char *from, *to;
    const char *in, *out, *name;
    dt_dtype dtype;
    bool explain;
} args;

static void usage(void)
{
    fprintf(stderr, "usage: redistribute --mesh 2x2 --shape 7,5 --from \"S(0),R\" --to \"R,S(1)\" "
                    "[--names dp,tp] [--dtype f32] [--explain] [--in x.safetensors [--name T]] "
                    "[--out y.safetensors]\n");
    exit(2);
}

/* The @p sep separated integers of option @p opt, each in [lo, hi]; a bad
 * one ends the program naming the option and the value. */
static int parse_ints(const char *opt, const char *s, char sep, int64_t lo, int64_t hi,
                      int64_t *out, int max)
{
    int n = 0;
    for (const char *p = s; *p;) {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno == ERANGE || v < lo || v > hi || n == max || (*end && *end != sep)) {
            fprintf(stderr,
                    "redistribute: %s '%s': want up to %d integers in [%lld, %lld] separated "
                    "by '%c'\n",
                    opt, s, max, (long long)lo, (long long)hi, sep);
            exit(2);
        }
        out[n++] = v;
        p = *end ? end + 1 : end;
    }
    return n;
}

static args parse(int argc, char **argv)
{
    args a;
    memset(&a, 0, sizeof(a));
    a.dtype = DT_DTYPE_F32;
    bool named = false;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--explain") == 0) {
            a.explain = true;
            continue;
        }
        if (v == NULL)
            usage();
        if (strcmp(argv[i], "--mesh") == 0) {
            int64_t m[DT_MESH_MAX_DIMS];
            a.mesh_ndim = parse_ints("--mesh", v, 'x', 1, INT_MAX, m, DT_MESH_MAX_DIMS);
            for (int k = 0; k < a.mesh_ndim; k++)
                a.mesh[k] = (int)m[k];
        } else if (strcmp(argv[i], "--shape") == 0) {
            a.ndim = parse_ints("--shape", v, ',', 0, INT64_MAX, a.shape, DT_MAX_DIMS);
        } else if (strcmp(argv[i], "--from") == 0) {
            a.from = v;
        } else if (strcmp(argv[i], "--to") == 0) {
            a.to = v;
        } else if (strcmp(argv[i], "--names") == 0) {
            a.names_arg = argv[i + 1];
            named = true;
        } else if (strcmp(argv[i], "--dtype") == 0) {
            CHECK(dt_dtype_parse(v, &a.dtype));
        } else if (strcmp(argv[i], "--in") == 0) {
            a.in = v;
        } else if (strcmp(argv[i], "--out") == 0) {
            a.out = v;
        } else if (strcmp(argv[i], "--name") == 0) {
            a.name = v;
        } else {
            usage();
        }
        i++;
    }
    if (a.mesh_ndim < 1 || (a.ndim < 1 && a.in == NULL) || a.from == NULL || a.to == NULL)
        usage();
    if (named) {
        int k = 0;
        for (char *p = strtok(a.names_arg, ","); p && k < DT_MESH_MAX_DIMS; p = strtok(NULL, ","))
            a.names[k++] = p;
    }
    return a;
}

static void print_shard(const char *when, const dt_spec *s, int rank)
{
    int64_t ls[DT_MAX_DIMS], off[DT_MAX_DIMS];
    char pl[64], a[96], b[96];
    int p = 0, q = 0, n = dt_spec_ndim(s);
    CHECK(dt_spec_local_shape(s, NULL, ls, off));
    dt_placements_format(dt_mesh_ndim(dt_spec_mesh(s)), dt_spec_placements(s), ",", pl, sizeof(pl));
    for (int d = 0; d < n; d++) {
        p += snprintf(a + p, sizeof(a) - (size_t)p, d ? ", %lld" : "%lld", (long long)ls[d]);
        q += snprintf(b + q, sizeof(b) - (size_t)q, d ? ", %lld" : "%lld", (long long)off[d]);
    }
    int c[DT_MESH_MAX_DIMS], pc = 0;
    char cs[32];
    dt_mesh_coordinate(dt_spec_mesh(s), c);
    for (int k = 0; k < dt_mesh_ndim(dt_spec_mesh(s)); k++)
        pc += snprintf(cs + pc, sizeof(cs) - (size_t)pc, k ? ",%d" : "%d", c[k]);
    printf("rank %d (%s) %-6s %-12s local [%s] at offset [%s]\n", rank, cs, when, pl, a, b);
}

/* One process, mesh bigger than the world: plan for every rank on virtual meshes. */
static int plan_only(const args *a, const dt_placement *pf, int nf, const dt_placement *pt, int nt)
{
    int size = 1;
    for (int k = 0; k < a->mesh_ndim; k++)
        size *= a->mesh[k];
    for (int r = 0; r < size; r++) {
        dt_mesh *m = NULL;
        dt_spec *sa = NULL, *sb = NULL;
        char buf[4096];
        CHECK(dt_mesh_create_virtual(a->mesh_ndim, a->mesh, a->names[0] ? a->names : NULL, r, &m));
        if (r == 0)
            dt_mesh_print(m, stdout);
        CHECK(dt_spec_create(m, nf, pf, a->ndim, a->shape, a->dtype, &sa));
        CHECK(dt_spec_create(m, nt, pt, a->ndim, a->shape, a->dtype, &sb));
        print_shard("from", sa, r);
        print_shard("to", sb, r);
        if (r == 0 || a->explain) {
            CHECK(dt_redistribute_explain(sa, sb, buf, sizeof(buf)));
            printf("plan of rank %d: %s", r, buf);
        }
        dt_spec_release(sa);
        dt_spec_release(sb);
        dt_mesh_release(m);
    }
    return 0;
}

/* The full tensor @p a->name (default: the first) of @p a->in; @p a's shape
 * and dtype follow it and @p name gets its name. */
static dt_tensor *load_input(args *a, char *name, size_t name_len)
{
    dt_safetensors *f = NULL;
    dt_safetensors_info info;
    dt_tensor *x = NULL;
    int i = 0;
    CHECK(dt_safetensors_open(a->in, &f));
    if (a->name != NULL)
        CHECK(dt_safetensors_find(f, a->name, &i));
    CHECK(dt_safetensors_info_at(f, i, &info));
    snprintf(name, name_len, "%s", info.name);
    CHECK(dt_safetensors_load(f, name, &x));
    dt_safetensors_close(f);
    a->ndim = dt_tensor_ndim(x);
    memcpy(a->shape, dt_tensor_shape(x), sizeof(int64_t) * (size_t)a->ndim);
    a->dtype = dt_tensor_dtype(x);
    return x;
}

/* x[i] = i (as the dtype holds it) in @p a's shape, the same on every rank. */
static dt_tensor *make_arange(const args *a)
{
    int64_t numel = 1;
    for (int i = 0; i < a->ndim; i++)
        numel *= a->shape[i];
    dt_tensor *idx = NULL, *flat = NULL, *x = NULL;
    CHECK(dt_tensor_arange(numel, DT_DTYPE_F64, &idx));
    CHECK(dt_tensor_to_dtype(idx, a->dtype, &flat));
    CHECK(dt_tensor_reshape(flat, a->ndim, a->shape, &x));
    dt_tensor_release(flat);
    dt_tensor_release(idx);
    return x;
}

/* The collectives this rank ran on @p m since the last reset. */
static void print_coll_stats(dt_mesh *m, int rank)
{
    dt_coll_stats st;
    dt_mesh_coll_stats(m, &st);
    for (int k = 0; k < DT_COLL_KIND_COUNT; k++)
        if (st.count[k] > 0)
            printf("rank %d ran %lld %s (%lld bytes received)\n", rank, (long long)st.count[k],
                   dt_coll_kind_name((dt_coll_kind)k), (long long)st.bytes[k]);
}

int main(int argc, char **argv)
{
    args a = parse(argc, argv);
    dt_placement pf[DT_MESH_MAX_DIMS], pt[DT_MESH_MAX_DIMS];
    int nf = 0, nt = 0;
    CHECK(dt_placements_parse(a.from, DT_MESH_MAX_DIMS, pf, &nf));
    CHECK(dt_placements_parse(a.to, DT_MESH_MAX_DIMS, pt, &nt));
    dt_tensor *x = NULL, *d = NULL, *y = NULL, *full = NULL;
    char name[256] = "x";
    if (a.in != NULL)
        x = load_input(&a, name, sizeof(name));
    dt_runtime *rt = NULL;
    CHECK(dt_init(NULL, &rt));
    int rank = dt_runtime_rank(rt), size = 1;
    for (int k = 0; k < a.mesh_ndim; k++)
        size *= a.mesh[k];
    if (dt_runtime_size(rt) == 1 && size > 1) {
        int rc = plan_only(&a, pf, nf, pt, nt);
        dt_tensor_release(x);
        dt_runtime_destroy(rt);
        return rc;
    }
    dt_mesh *m = NULL;
    CHECK(dt_mesh_create(rt, a.mesh_ndim, a.mesh, a.names[0] ? a.names : NULL, &m));
    if (rank == 0)
        dt_mesh_print(m, stdout);

    if (x == NULL)
        x = make_arange(&a);

    CHECK(dt_distribute(x, m, nf, pf, &d));
    print_shard("from", dt_tensor_spec(d), rank);
    dt_spec *dst = NULL;
    CHECK(dt_spec_create(m, nt, pt, a.ndim, a.shape, a.dtype, &dst));
    char buf[4096];
    CHECK(dt_redistribute_explain(dt_tensor_spec(d), dst, buf, sizeof(buf)));
    if (rank == 0 || a.explain)
        printf("plan of rank %d: %s", rank, buf);
    dt_mesh_coll_stats_reset(m);
    CHECK(dt_redistribute_to(d, dst, &y));
    print_shard("to", dt_tensor_spec(y), rank);
    print_coll_stats(m, rank);
    CHECK(dt_full_tensor(y, &full));
    bool ok = dt_tensor_equal(full, x);
    printf("rank %d full_tensor(redistribute(distribute(x))) == x: %s\n", rank, ok ? "yes" : "NO");
    if (a.out != NULL && rank == 0) {
        const char *names[1] = {name};
        CHECK(dt_safetensors_save(a.out, 1, names, &full, 0, NULL));
        printf("rank 0 wrote %s (%s)\n", a.out, name);
    }

    dt_spec_release(dst);
    dt_tensor_release(full);
    dt_tensor_release(y);
    dt_tensor_release(d);
    dt_tensor_release(x);
    dt_mesh_release(m);
    dt_runtime_destroy(rt);
    return ok ? 0 : 1;
}
