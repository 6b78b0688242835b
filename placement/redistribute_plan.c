/*
 * The redistribute planner: (src spec, dst spec) -> steps, one mesh dim and
 * one transition each. Greedy, as PyTorch's default: when the source has
 * shards, walk the mesh dims right to left first (inner shards of a nested
 * sharding are gathered before outer ones); a target Shard whose tensor dim
 * is sharded differently by the mesh dims before it is first replicated.
 * Then walk left to right to reach the targets still missing. Strided
 * shards are gathered before and sliced after that walk.
 * Plans are cached on the mesh keyed by the spec pair; planning never
 * communicates.
 */
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "placement/placement_impl.h"

const char *dt__step_kind_name(dt__step_kind k)
{
    switch (k) {
    case DT__STEP_ALLGATHER:
        return "all-gather";
    case DT__STEP_ALLREDUCE:
        return "all-reduce";
    case DT__STEP_REDUCE_SCATTER:
        return "reduce-scatter";
    case DT__STEP_ALLTOALL:
        return "all-to-all";
    case DT__STEP_SLICE:
        return "local slice";
    case DT__STEP_PARTITION:
        return "local partition";
    }
    return "?";
}

dt_status dt__redist_check(const char *fn, const dt_spec *src, const dt_spec *dst)
{
    char a[256], b[256];
    if (!dt_mesh_equal(src->mesh, dst->mesh)) {
        dt_mesh_format(src->mesh, a, sizeof(a));
        dt_mesh_format(dst->mesh, b, sizeof(b));
        for (char *p = a; *p; p++)
            *p = *p == '\n' ? ' ' : *p;
        for (char *p = b; *p; p++)
            *p = *p == '\n' ? ' ' : *p;
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: cannot redistribute across different meshes (%s-> %s)", fn, a, b);
    }
    if (src->ndim != dst->ndim || src->dtype != dst->dtype ||
        memcmp(src->shape, dst->shape, sizeof(int64_t) * (size_t)src->ndim) != 0) {
        dt_spec_format(src, a, sizeof(a));
        dt_spec_format(dst, b, sizeof(b));
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: source %s and target %s differ in shape or dtype",
                      fn, a, b);
    }
    return DT_OK;
}

typedef struct planner {
    const dt_spec *spec; /* for shape, mesh and dtype */
    dt__plan *plan;
    dt_placement cur[DT_MESH_MAX_DIMS];
} planner;

/* Bytes this rank receives in one step (see dt_redistribute_explain). */
static int64_t step_bytes(const dt_spec *spec, const dt__step *st)
{
    const dt_mesh *m = spec->mesh;
    int n = m->shape[st->mesh_dim], me = m->coord[st->mesh_dim];
    int64_t es = (int64_t)dt_dtype_size(spec->dtype),
            full = dt__shape_numel(spec->ndim, st->logical_shape);
    int64_t inner = full, mine = 0, sz = 0;
    switch (st->kind) {
    case DT__STEP_ALLGATHER:
    case DT__STEP_REDUCE_SCATTER: {
        int d = st->kind == DT__STEP_ALLGATHER ? st->src.dim : st->dst.dim;
        dt_shard_chunk(st->logical_shape[d], n, me, &mine, NULL);
        inner = st->logical_shape[d] ? full / st->logical_shape[d] : 0;
        if (st->kind == DT__STEP_ALLGATHER)
            return (full - mine * inner) * es;
        return (int64_t)(n - 1) * mine * inner * es;
    }
    case DT__STEP_ALLREDUCE:
        return n > 1 ? 2 * (int64_t)(n - 1) * full * es / n : 0;
    case DT__STEP_ALLTOALL: {
        int a = st->src.dim, b = st->dst.dim;
        int64_t la = st->logical_shape[a], lb = st->logical_shape[b], bme = 0, total = 0;
        int64_t rest = (la && lb) ? full / la / lb : 0;
        dt_shard_chunk(lb, n, me, &bme, NULL);
        for (int p = 0; p < n; p++) {
            if (p == me)
                continue;
            dt_shard_chunk(la, n, p, &sz, NULL);
            total += sz * bme * rest;
        }
        return total * es;
    }
    case DT__STEP_SLICE:
    case DT__STEP_PARTITION:
        return 0;
    }
    return 0;
}

static dt_status push(planner *p, int j, dt_placement a, dt_placement b, dt__step_kind kind)
{
    dt__plan *plan = p->plan;
    const dt_spec *s = p->spec;
    if (plan->n_steps == DT__PLAN_MAX_STEPS)
        return DT_ERR(DT_ERR_INTERNAL, "redistribute: plan longer than %d steps",
                      DT__PLAN_MAX_STEPS);
    dt__step *st = &plan->steps[plan->n_steps];
    memcpy(plan->states[plan->n_steps], p->cur, sizeof(p->cur));
    st->mesh_dim = j;
    st->src = a;
    st->dst = b;
    st->kind = kind;
    /* the group of mesh dim j works on the tensor as cut by the other mesh
     * dims (the planner's order guarantees those never cut the dims it moves) */
    dt_placement pre[DT_MESH_MAX_DIMS];
    for (int k = 0; k < s->mesh_ndim; k++)
        pre[k] = k != j ? p->cur[k] : dt_replicate();
    dt__local_shape(s->ndim, s->shape, s->mesh_ndim, s->mesh->shape, pre, s->mesh->coord,
                    st->logical_shape, NULL);
    st->bytes = step_bytes(s, st);
    p->cur[j] = b;
    plan->n_steps++;
    memcpy(plan->states[plan->n_steps], p->cur, sizeof(p->cur));
    return DT_OK;
}

/* Emit the step(s) taking mesh dim j from cur[j] to b. */
static dt_status transition(planner *p, int j, dt_placement b)
{
    dt_placement a = p->cur[j], r = dt_replicate();
    if (dt_placement_equal(a, b))
        return DT_OK;
    switch (a.kind) {
    case DT_PLACEMENT_SHARD:
        if (b.kind == DT_PLACEMENT_SHARD)
            return push(p, j, a, b, DT__STEP_ALLTOALL);
        DT_CHECK(push(p, j, a, r, DT__STEP_ALLGATHER));
        return b.kind == DT_PLACEMENT_PARTIAL ? push(p, j, r, b, DT__STEP_PARTITION) : DT_OK;
    case DT_PLACEMENT_REPLICATE:
        return push(p, j, a, b, b.kind == DT_PLACEMENT_SHARD ? DT__STEP_SLICE : DT__STEP_PARTITION);
    case DT_PLACEMENT_PARTIAL:
        if (b.kind == DT_PLACEMENT_SHARD)
            return push(p, j, a, b, DT__STEP_REDUCE_SCATTER);
        DT_CHECK(push(p, j, a, r, DT__STEP_ALLREDUCE));
        return b.kind == DT_PLACEMENT_PARTIAL ? push(p, j, r, b, DT__STEP_PARTITION) : DT_OK;
    }
    return DT_ERR(DT_ERR_INTERNAL, "redistribute: bad placement kind %d", (int)a.kind);
}

/* Do mesh dims < j shard tensor dim e the same way in src and dst? */
static bool prefix_aligned(const dt_placement *src, const dt_placement *dst, int j, int e)
{
    for (int i = 0; i < j; i++)
        if (dt_placement_is_shard(src[i], e) != dt_placement_is_shard(dst[i], e))
            return false;
    return true;
}

/* The greedy walk over plain placements (no strided shard in @p start or
 * @p target): right to left when something is sharded, then left to right. */
static dt_status plan_plain(planner *p, const dt_placement *start, const dt_placement *target)
{
    int M = p->spec->mesh_ndim;
    bool has_shard = false;
    for (int k = 0; k < M; k++)
        has_shard = has_shard || start[k].kind == DT_PLACEMENT_SHARD;
    if (has_shard) {
        for (int j = M - 1; j >= 0; j--) {
            dt_placement t = target[j];
            /* mesh dims < j are untouched so far: p->cur there is still start */
            if (t.kind == DT_PLACEMENT_SHARD && !prefix_aligned(start, target, j, t.dim))
                t = dt_replicate();
            DT_CHECK(transition(p, j, t));
        }
    }
    for (int j = 0; j < M; j++)
        DT_CHECK(transition(p, j, target[j]));
    return DT_OK;
}

/* Strided shards split a dim after the plain ones (shard_math.c), so they
 * are gathered first (innermost, i.e. rightmost, first) and sliced last
 * (outermost first); in between the plain planner runs. */
static dt_status plan_compute(const dt_spec *src, const dt_spec *dst, dt__plan *plan)
{
    planner p = {.spec = src, .plan = plan};
    int M = src->mesh_ndim;
    dt_placement start[DT_MESH_MAX_DIMS], mid[DT_MESH_MAX_DIMS];
    bool same = true;
    memset(plan, 0, sizeof(*plan));
    plan->mesh_ndim = M;
    plan->ndim = src->ndim;
    memcpy(p.cur, src->pl, sizeof(p.cur[0]) * (size_t)M);
    memcpy(plan->states[0], p.cur, sizeof(p.cur));
    for (int k = 0; k < M; k++)
        same = same && dt_placement_equal(src->pl[k], dst->pl[k]);
    if (same)
        return DT_OK;
    for (int j = M - 1; j >= 0; j--)
        if (p.cur[j].strided)
            DT_CHECK(transition(&p, j, dt_replicate()));
    memcpy(start, p.cur, sizeof(start[0]) * (size_t)M);
    dt__placements_unstride(M, dst->pl, mid);
    DT_CHECK(plan_plain(&p, start, mid));
    for (int j = 0; j < M; j++)
        if (dst->pl[j].strided)
            DT_CHECK(transition(&p, j, dst->pl[j]));
    return DT_OK;
}

typedef struct plan_key {
    int mesh_ndim, ndim;
    int mesh_shape[DT_MESH_MAX_DIMS], coord[DT_MESH_MAX_DIMS];
    dt_placement src[DT_MESH_MAX_DIMS], dst[DT_MESH_MAX_DIMS];
    int64_t shape[DT_MAX_DIMS];
    int dtype;
} plan_key;

dt_status dt__redist_plan(const dt_spec *src, const dt_spec *dst, dt__plan *out)
{
    plan_key key;
    memset(&key, 0, sizeof(key)); /* padding too: the key is compared as bytes */
    key.mesh_ndim = src->mesh_ndim;
    key.ndim = src->ndim;
    memcpy(key.mesh_shape, src->mesh->shape, sizeof(int) * (size_t)src->mesh_ndim);
    memcpy(key.coord, src->mesh->coord, sizeof(int) * (size_t)src->mesh_ndim);
    memcpy(key.src, src->pl, sizeof(dt_placement) * (size_t)src->mesh_ndim);
    memcpy(key.dst, dst->pl, sizeof(dt_placement) * (size_t)src->mesh_ndim);
    memcpy(key.shape, src->shape, sizeof(int64_t) * (size_t)src->ndim);
    key.dtype = (int)src->dtype;
    if (dt__mesh_cache_get(src->mesh, &key, sizeof(key), out, sizeof(*out)))
        return DT_OK;
    DT_CHECK(plan_compute(src, dst, out));
    dt__mesh_cache_put(src->mesh, &key, sizeof(key), out, sizeof(*out));
    if (dt__log_level() >= DT_LOG_LEVEL_DEBUG) {
        char buf[2048];
        dt__plan_format(out, src->mesh, src->dtype, buf, sizeof(buf));
        DT_LOG_DEBUG("redist", "plan %s", buf);
    }
    return DT_OK;
}

#define APPEND(...)                                                                                \
    do {                                                                                           \
        size_t room_ = (size_t)p < len ? len - (size_t)p : 0;                                      \
        int w_ = snprintf(room_ ? buf + p : NULL, room_, __VA_ARGS__);                             \
        p += w_ > 0 ? w_ : 0;                                                                      \
    } while (0)

int dt__plan_format(const dt__plan *plan, const dt_mesh *mesh, dt_dtype dtype, char *buf,
                    size_t len)
{
    int p = 0;
    char s[128], a[32], b[32], sh[128];
    if (len > 0)
        buf[0] = '\0';
    for (int i = 0; i <= plan->n_steps; i++) {
        dt_placements_format(plan->mesh_ndim, plan->states[i], "", s, sizeof(s));
        APPEND("%s%s", i ? " -> " : "", s);
    }
    if (plan->n_steps == 0)
        APPEND(" (no change)");
    APPEND("\n");
    int64_t total = 0;
    for (int i = 0; i < plan->n_steps; i++) {
        const dt__step *st = &plan->steps[i];
        const char *name = dt_mesh_dim_name(mesh, st->mesh_dim);
        dt_placement_format(st->src, a, sizeof(a));
        dt_placement_format(st->dst, b, sizeof(b));
        dt__shape_str(plan->ndim, st->logical_shape, sh, sizeof(sh));
        APPEND("  step %d: mesh dim %d%s%s%s: %s -> %s  %s on %s %s, %lld bytes received\n", i + 1,
               st->mesh_dim, name ? " (" : "", name ? name : "", name ? ")" : "", a, b,
               dt__step_kind_name(st->kind), sh, dt_dtype_name(dtype), (long long)st->bytes);
        total += st->bytes;
    }
    APPEND("  total: %d step%s, %lld bytes received by this rank\n", plan->n_steps,
           plan->n_steps == 1 ? "" : "s", (long long)total);
    return p;
}

dt_status dt_redistribute_explain(const dt_spec *src, const dt_spec *dst, char *buf, size_t len)
{
    DT_ARG_NOT_NULL(src);
    DT_ARG_NOT_NULL(dst);
    dt__plan plan;
    DT_CHECK(dt__redist_check(__func__, src, dst));
    DT_CHECK(dt__redist_plan(src, dst, &plan));
    dt__plan_format(&plan, src->mesh, src->dtype, buf, len);
    return DT_OK;
}
