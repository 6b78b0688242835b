/*
 * The collective ways to make a distributed tensor: dt_from_local inferring
 * the global shape (local shapes exchanged over the mesh, checked the same way
 * on every rank so a bad shard fails everywhere instead of hanging later), and
 * dt_distribute_from scattering from one source rank.
 *
 * Mesh-wide exchanges run dim by dim on the mesh's dim comms: an all-gather
 * from the last dim to the first leaves every rank with a row-major table;
 * a broadcast/scatter from the first dim to the last reaches every rank.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "placement/placement_impl.h"

/* ndim (-1: bad), dtype, shape, then the placements as (kind, dim, op); the
 * header of dt_distribute_from puts the source's device type at REC_PL. */
#define REC_PL  (2 + DT_MAX_DIMS)
#define REC_LEN (REC_PL + 3 * DT_MESH_MAX_DIMS)

static dt_status need_comms(const char *fn, const dt_mesh *m)
{
    for (int k = 0; k < m->ndim; k++)
        if (m->dim_comm[k] == NULL)
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "%s: the mesh has no comms (a virtual mesh cannot communicate)", fn);
    return DT_OK;
}

/* Every rank's record, row-major by mesh rank, into a new table. */
static dt_status gather_records(dt_mesh *m, const int64_t *rec, int64_t **table)
{
    int64_t *buf = malloc(sizeof(int64_t) * REC_LEN * (size_t)m->size), *tmp = NULL;
    size_t len = REC_LEN;
    dt_status s = DT_OK;
    if (buf == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_from_local: no memory for %d shape records", m->size);
    memcpy(buf, rec, sizeof(int64_t) * REC_LEN);
    for (int k = m->ndim - 1; k >= 0; k--) {
        tmp = malloc(sizeof(int64_t) * len * (size_t)m->shape[k]);
        if (tmp == NULL) {
            s = DT_ERR(DT_ERR_NO_MEMORY, "dt_from_local: no memory for shape records");
            break;
        }
        s = dt_comm_allgather(m->dim_comm[k], buf, tmp, len, DT_DTYPE_I64, NULL);
        free(buf);
        buf = tmp;
        if (s != DT_OK)
            break;
        dt__mesh_count_coll(m, DT_COLL_ALLGATHER,
                            (int64_t)(sizeof(int64_t) * len * (size_t)(m->shape[k] - 1)));
        len *= (size_t)m->shape[k];
    }
    if (s != DT_OK) {
        free(buf);
        return s;
    }
    *table = buf;
    return DT_OK;
}

/* Global shape from the table: along a sharded dim the sum of the shards at
 * coordinate 0 of every non-sharding mesh dim; elsewhere rank 0's size. */
static void infer_shape(const dt_mesh *m, const dt_placement *pl, int ndim, const int64_t *table,
                        int64_t *shape)
{
    for (int d = 0; d < ndim; d++) {
        shape[d] = 0;
        for (int r = 0; r < m->size; r++) {
            int c[DT_MESH_MAX_DIMS];
            bool on_axis = true, sharded = false;
            dt_mesh_rank_to_coord(m, r, c);
            for (int k = 0; k < m->ndim; k++) {
                bool sk = dt_placement_is_shard(pl[k], d);
                sharded = sharded || sk;
                on_axis = on_axis && (sk || c[k] == 0);
            }
            if (on_axis)
                shape[d] += table[r * REC_LEN + 2 + d];
            if (!sharded)
                break; /* rank 0 alone */
        }
    }
}

/* The one mesh rank whose shard differs from every other rank's, or -1 (none,
 * or more than one: uneven chunks differ legitimately). */
static int odd_rank(const dt_mesh *m, int ndim, const int64_t *table)
{
    int odd = -1;
    for (int r = 0; r < m->size; r++) {
        int same = 0;
        for (int q = 0; q < m->size; q++)
            same += memcmp(table + r * REC_LEN + 2, table + q * REC_LEN + 2,
                           sizeof(int64_t) * (size_t)ndim) == 0;
        if (same == 1 && m->size > 2) {
            if (odd >= 0)
                return -1;
            odd = r;
        }
    }
    return odd;
}

/* The shards do not fit: name the rank that is out of line only when one
 * is (the first mismatch against a shape inferred from all of them may be
 * an innocent rank), else list every rank's shard. */
static dt_status misfit(const char *fn, const dt_spec *spec, const int64_t *table)
{
    const dt_mesh *m = spec->mesh;
    char g[128], p[64], list[512] = "", a[128];
    dt__shape_str(spec->ndim, spec->shape, g, sizeof(g));
    dt_placements_format(m->ndim, spec->pl, ",", p, sizeof(p));
    int odd = odd_rank(m, spec->ndim, table);
    if (odd >= 0) {
        char b[128];
        dt__shape_str(spec->ndim, table + odd * REC_LEN + 2, a, sizeof(a));
        dt__shape_str(spec->ndim, table + (odd == 0 ? 1 : 0) * REC_LEN + 2, b, sizeof(b));
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: mesh rank %d holds a shard of shape %s where the other ranks hold "
                      "%s: the shards are not the %s chunks of one tensor",
                      fn, odd, a, b, p);
    }
    for (int r = 0; r < m->size && strlen(list) + 64 < sizeof(list); r++) {
        dt__shape_str(spec->ndim, table + r * REC_LEN + 2, a, sizeof(a));
        size_t k = strlen(list);
        snprintf(list + k, sizeof(list) - k, "%smesh rank %d %s", r ? ", " : "", r, a);
    }
    return DT_ERR(DT_ERR_INVALID_ARG,
                  "%s: the shards are not the %s chunks of one tensor (of the inferred global "
                  "shape %s): %s",
                  fn, p, g, list);
}

static dt_status check_table(const char *fn, const dt_spec *spec, const int64_t *table)
{
    const dt_mesh *m = spec->mesh;
    for (int r = 0; r < m->size; r++) {
        int c[DT_MESH_MAX_DIMS];
        int64_t want[DT_MAX_DIMS];
        dt_mesh_rank_to_coord(m, r, c);
        dt__local_shape(spec->ndim, spec->shape, m->ndim, m->shape, spec->pl, c, want, NULL);
        if (memcmp(want, table + r * REC_LEN + 2, sizeof(int64_t) * (size_t)spec->ndim) != 0)
            return misfit(fn, spec, table);
    }
    return DT_OK;
}

static dt_status from_local_infer(dt_tensor *local, dt_mesh *mesh, int n, const dt_placement *pl,
                                  dt_spec **out)
{
    const char *fn = "dt_from_local";
    int64_t rec[REC_LEN] = {-1, 0}, *table = NULL, shape[DT_MAX_DIMS];
    dt_placement norm[DT_MESH_MAX_DIMS];
    dt_status s;
    DT_CHECK(need_comms(fn, mesh));
    if (local != NULL && local->dist == NULL) {
        rec[0] = local->ndim;
        rec[1] = local->dtype;
        memcpy(rec + 2, local->shape, sizeof(int64_t) * (size_t)local->ndim);
    }
    for (int k = 0; k < n && k < DT_MESH_MAX_DIMS && pl != NULL; k++) {
        rec[REC_PL + 3 * k] = pl[k].kind;
        rec[REC_PL + 3 * k + 1] = pl[k].dim;
        rec[REC_PL + 3 * k + 2] = pl[k].op;
    }
    /* exchange first, even with a bad argument here, so no rank is left waiting */
    DT_CHECK(gather_records(mesh, rec, &table));
    for (int r = 0; r < mesh->size; r++) {
        const int64_t *x = table + r * REC_LEN;
        if (x[0] < 0) {
            s = DT_ERR(DT_ERR_INVALID_ARG,
                       "%s: mesh rank %d passed no local tensor (NULL, "
                       "released or distributed)",
                       fn, r);
            goto out;
        }
        if (memcmp(x + REC_PL, table + REC_PL, sizeof(int64_t) * 3 * DT_MESH_MAX_DIMS) != 0) {
            s = DT_ERR(DT_ERR_INVALID_ARG, "%s: mesh rank %d passed other placements than rank 0",
                       fn, r);
            goto out;
        }
        if (x[0] != table[0] || x[1] != table[1]) {
            s = DT_ERR(DT_ERR_INVALID_ARG,
                       "%s: mesh rank %d has a %lld-d %s shard but rank 0 a %lld-d %s one", fn, r,
                       (long long)x[0], dt_dtype_name((dt_dtype)x[1]), (long long)table[0],
                       dt_dtype_name((dt_dtype)table[1]));
            goto out;
        }
    }
    if (n != mesh->ndim) /* dt_spec_create words it */
        DT_CHECK_GOTO(
            dt_spec_create(mesh, n, pl, (int)table[0], table + 2, (dt_dtype)table[1], out), s, out);
    for (int k = 0; k < n; k++)
        DT_CHECK_GOTO(dt_placement_normalize(pl[k], (int)table[0], &norm[k]), s, out);
    infer_shape(mesh, norm, (int)table[0], table, shape);
    DT_CHECK_GOTO(dt_spec_create(mesh, n, norm, (int)table[0], shape, (dt_dtype)table[1], out), s,
                  out);
    s = check_table(fn, *out, table);
    if (s != DT_OK) {
        dt_spec_release(*out);
        *out = NULL;
    }
out:
    free(table);
    return s;
}

static dt_status from_local_given(dt_tensor *local, dt_mesh *mesh, int n, const dt_placement *pl,
                                  const int64_t *global_shape, dt_spec **out)
{
    dt_spec *spec = NULL;
    int64_t want[DT_MAX_DIMS];
    if (local == NULL || local->dist != NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_from_local: 'local' is NULL or distributed");
    DT_CHECK(dt_spec_create(mesh, n, pl, local->ndim, global_shape, local->dtype, &spec));
    dt__local_shape(spec->ndim, spec->shape, mesh->ndim, mesh->shape, spec->pl, mesh->coord, want,
                    NULL);
    if (memcmp(want, local->shape, sizeof(int64_t) * (size_t)local->ndim) != 0) {
        char a[128], b[128], g[128];
        dt__shape_str(local->ndim, local->shape, a, sizeof(a));
        dt__shape_str(local->ndim, want, b, sizeof(b));
        dt__shape_str(local->ndim, global_shape, g, sizeof(g));
        dt_spec_release(spec);
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_from_local: the local shard is %s but global shape %s gives mesh rank "
                      "%d a shard of %s",
                      a, g, mesh->my_rank, b);
    }
    *out = spec;
    return DT_OK;
}

dt_status dt_from_local(dt_tensor *local, dt_mesh *mesh, int n, const dt_placement *pl,
                        const int64_t *global_shape, dt_tensor **out)
{
    dt_spec *spec = NULL;
    dt_status s;
    DT_ARG_NOT_NULL(mesh);
    DT_ARG_NOT_NULL(out);
    if (local != NULL && dt__handle_problem(local, DT__MAGIC_TENSOR) != NULL) {
        if (global_shape != NULL) /* no exchange on this path: fail here */
            DT_ARG_ALIVE(local);
        local = NULL; /* the exchange reports it on every rank, as a NULL */
    }
    if (global_shape != NULL)
        DT_CHECK(from_local_given(local, mesh, n, pl, global_shape, &spec));
    else
        DT_CHECK(from_local_infer(local, mesh, n, pl, &spec));
    s = dt__dist_wrap(spec, local, out);
    dt_spec_release(spec);
    return s;
}

/* ------------------------------------------------------------ scatter from one rank */

/* Does this rank take part in stage k (its coords after k equal src's)? */
static bool in_stage(const dt_mesh *m, const int *src, int k)
{
    for (int j = k + 1; j < m->ndim; j++)
        if (m->coord[j] != src[j])
            return false;
    return true;
}

static dt_status bcast_header(dt_mesh *m, const int *src, int64_t *hdr)
{
    for (int k = 0; k < m->ndim; k++) {
        if (!in_stage(m, src, k))
            continue;
        DT_CHECK(dt_comm_broadcast(m->dim_comm[k], hdr, REC_LEN, DT_DTYPE_I64, src[k], NULL));
    }
    return DT_OK;
}

/* Stage k: the root of this rank's group along mesh dim k holds @p cur (the
 * tensor cut by mesh dims < k); afterwards every member holds its piece. */
static dt_status scatter_stage(const dt_spec *sp, const int *src, int k, dt_device dev,
                               dt_tensor **cur)
{
    dt_mesh *m = sp->mesh;
    dt_comm *comm = m->dim_comm[k];
    int n = m->shape[k], me = m->coord[k], root = src[k];
    dt_placement pre[DT_MESH_MAX_DIMS];
    int64_t shape[DT_MAX_DIMS];
    dt_tensor *y = NULL, *sbuf = NULL;
    dt_status s;
    for (int j = 0; j < m->ndim; j++)
        pre[j] = j < k ? sp->pl[j] : dt_replicate();
    dt__local_shape(sp->ndim, sp->shape, m->ndim, m->shape, pre, m->coord, shape, NULL);
    if (sp->pl[k].kind != DT_PLACEMENT_SHARD) {
        if (me != root)
            DT_CHECK(dt_tensor_empty(sp->ndim, shape, sp->dtype, dev, cur));
        DT_CHECK(dt_comm_broadcast(comm, dt_tensor_data(*cur), (size_t)dt_tensor_numel(*cur),
                                   sp->dtype, root, NULL));
        dt__mesh_count_coll(m, DT_COLL_BROADCAST, me == root ? 0 : (int64_t)dt_tensor_nbytes(*cur));
        return DT_OK;
    }
    size_t *sc = calloc(4 * (size_t)n, sizeof(size_t)), *sd = sc + n, *rc = sd + n, *rd = rc + n;
    int d = sp->pl[k].dim;
    int64_t sz;
    if (sc == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_distribute_from: no memory for %d counts", 4 * n);
    dt_shard_chunk(shape[d], n, me, &sz, NULL);
    shape[d] = sz;
    DT_CHECK_GOTO(dt_tensor_empty(sp->ndim, shape, sp->dtype, dev, &y), s, err_release);
    if (me == root) {
        DT_CHECK_GOTO(dt__pack_chunks(*cur, d, n, -1, sc, &sbuf), s, err_release);
        for (int q = 1; q < n; q++)
            sd[q] = sd[q - 1] + sc[q - 1];
    }
    rc[root] = (size_t)dt_tensor_numel(y);
    DT_CHECK_GOTO(dt_comm_alltoallv(comm, sbuf ? dt_tensor_data(sbuf) : NULL, sc, sd,
                                    dt_tensor_data(y), rc, rd, sp->dtype, NULL),
                  s, err_release);
    dt__mesh_count_coll(m, DT_COLL_BROADCAST, me == root ? 0 : (int64_t)dt_tensor_nbytes(y));
    dt_tensor_release(sbuf);
    dt_tensor_release(*cur);
    free(sc);
    *cur = y;
    return DT_OK;
err_release:
    dt_tensor_release(sbuf);
    dt_tensor_release(y);
    free(sc);
    return s;
}

/* @p spec with its strided shards replaced by Replicate: @p spec itself
 * (borrowed) when it has none, else a new reference. */
static dt_status plain_spec(dt_spec *spec, dt_spec **out)
{
    dt_placement pl[DT_MESH_MAX_DIMS];
    if (!dt__placements_unstride(spec->mesh_ndim, spec->pl, pl)) {
        *out = spec;
        return DT_OK;
    }
    return dt__spec_like(spec, spec->mesh_ndim, pl, out);
}

dt_status dt_distribute_from(dt_tensor *full, int src_rank, dt_mesh *mesh, int n,
                             const dt_placement *pl, dt_tensor **out)
{
    const char *fn = "dt_distribute_from";
    int64_t hdr[REC_LEN] = {-1, 0};
    int src[DT_MESH_MAX_DIMS];
    dt_spec *spec = NULL, *plain = NULL;
    dt_tensor *cur = NULL;
    dt_status s;
    DT_ARG_NOT_NULL(mesh);
    DT_ARG_NOT_NULL(out);
    if (full != NULL) /* NULL is allowed off the source rank */
        DT_ARG_ALIVE(full);
    DT_CHECK(need_comms(fn, mesh));
    DT_CHECK(dt_mesh_rank_to_coord(mesh, src_rank, src)); /* same on every rank */
    bool is_src = mesh->my_rank == src_rank;
    if (is_src && full != NULL && full->dist == NULL) {
        hdr[0] = full->ndim;
        hdr[1] = full->dtype;
        memcpy(hdr + 2, full->shape, sizeof(int64_t) * (size_t)full->ndim);
        hdr[REC_PL] = full->device.type;
    }
    DT_CHECK(bcast_header(mesh, src, hdr));
    /* every rank receives on the source's device type (its own GPU for CUDA) */
    dt_device dev = {(dt_device_type)hdr[REC_PL], 0};
    if (dev.type == DT_DEVICE_CUDA && mesh->rt != NULL)
        dev.index = dt_runtime_device(mesh->rt).index;
    if (hdr[0] < 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: source mesh rank %d passed no full local tensor", fn,
                      src_rank);
    /* the same spec on every rank: a bad placement fails everywhere */
    DT_CHECK(dt_spec_create(mesh, n, pl, (int)hdr[0], hdr + 2, (dt_dtype)hdr[1], &spec));
    /* strided shards split last: scatter the plain layout, then slice locally */
    DT_CHECK_GOTO(plain_spec(spec, &plain), s, out);
    if (is_src)
        DT_CHECK_GOTO(dt_tensor_contiguous(full, &cur), s, out);
    for (int k = 0; k < mesh->ndim; k++) {
        if (!in_stage(mesh, src, k))
            continue;
        DT_CHECK_GOTO(scatter_stage(plain, src, k, dev, &cur), s, out);
    }
    if (plain != spec) {
        dt__plan plan;
        dt_tensor *y = NULL;
        DT_CHECK_GOTO(dt__redist_plan(plain, spec, &plan), s, out);
        DT_CHECK_GOTO(dt__redist_exec(&plan, plain, cur, &y), s, out);
        dt_tensor_release(cur);
        cur = y;
    }
    if (cur == full) { /* nothing was received (all Replicate/Partial): own the data */
        dt_tensor *c = NULL;
        DT_CHECK_GOTO(dt_tensor_clone(full, &c), s, out);
        dt_tensor_release(cur);
        cur = c;
    }
    if (dt__partial_zero(spec))
        DT_CHECK_GOTO(dt_tensor_fill(cur, 0.0), s, out);
    s = dt__dist_wrap(spec, cur, out);
out:
    dt_tensor_release(cur);
    if (plain != spec)
        dt_spec_release(plain);
    dt_spec_release(spec);
    return s;
}
