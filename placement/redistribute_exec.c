/*
 * The redistribute executor: one collective per plan step on this rank's
 * shard, over the comm of the step's mesh dim. Uneven and empty shards use
 * the v-collectives (exact counts) instead of padding: nothing to unpad, no
 * bytes wasted. Blocks that are not contiguous along the moved dim are packed
 * into a buffer first and unpacked after.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_check.h"
#include "comm/comm_impl.h"
#include "core/error.h"
#include "core/log.h"
#include "placement/placement_impl.h"

typedef struct step_ctx {
    const dt__step *st;
    dt_mesh *mesh;
    dt_comm *comm;
    int n, me;
    int ndim;
    dt_dtype dtype;
    dt_dtype wire;   /* what a reduction sends (dt__redist_wire_dtype) */
    size_t *scratch; /* 4 * n counts/displacements */
} step_ctx;

static dt_status new_like(const step_ctx *c, const int64_t *shape, dt_device dev, dt_tensor **out)
{
    return dt_tensor_empty(c->ndim, shape, c->dtype, dev, out);
}

/* A view of elements [off, off+numel(shape)) of the flat contiguous @p buf as @p shape. */
static dt_status block_view(dt_tensor *buf, int64_t off, int ndim, const int64_t *shape,
                            dt_tensor **out)
{
    dt_tensor *flat = NULL;
    dt_status s;
    DT_CHECK(dt_tensor_narrow(buf, 0, off, dt__shape_prod(shape, 0, ndim), &flat));
    s = dt_tensor_view(flat, ndim, shape, out);
    dt_tensor_release(flat);
    return s;
}

/* dst.narrow(d, off, len) = src */
static dt_status copy_into(dt_tensor *dst, int d, int64_t off, int64_t len, dt_tensor *src)
{
    dt_tensor *v = NULL;
    dt_status s;
    if (len == 0 || dt_tensor_numel(src) == 0)
        return DT_OK;
    DT_CHECK(dt_tensor_narrow(dst, d, off, len, &v));
    s = dt_tensor_copy_(v, src);
    dt_tensor_release(v);
    return s;
}

dt_status dt__pack_chunks(dt_tensor *x, int d, int n, int skip, size_t *counts, dt_tensor **out)
{
    int ndim = dt_tensor_ndim(x);
    int64_t total = dt_tensor_numel(x), off = 0, dim_size = dt_tensor_shape(x)[d];
    dt_tensor *buf = NULL;
    dt_status s = DT_OK;
    DT_CHECK(dt_tensor_empty(1, &total, dt_tensor_dtype(x), dt_tensor_device(x), &buf));
    for (int q = 0; q < n; q++) {
        int64_t sz, o, bs[DT_MAX_DIMS];
        dt_tensor *src = NULL, *dst = NULL;
        dt_shard_chunk(dim_size, n, q, &sz, &o);
        memcpy(bs, dt_tensor_shape(x), sizeof(int64_t) * (size_t)ndim);
        bs[d] = sz;
        counts[q] = q == skip ? 0 : (size_t)dt__shape_prod(bs, 0, ndim);
        if (counts[q] > 0) {
            DT_CHECK_GOTO(dt_tensor_narrow(x, d, o, sz, &src), s, err_release);
            DT_CHECK_GOTO(block_view(buf, off, ndim, bs, &dst), s, err_release);
            s = dt_tensor_copy_(dst, src);
            dt_tensor_release(src);
            dt_tensor_release(dst);
            if (s != DT_OK)
                goto err_release;
        }
        off += (int64_t)counts[q];
    }
    *out = buf;
    return DT_OK;
err_release:
    dt_tensor_release(buf);
    return s;
}

/* Place the packed blocks of @p buf (block q has shape bshape with dim d =
 * chunk q of dim_size) into y.narrow(d, off_q, size_q). */
static dt_status unpack_blocks(const step_ctx *c, dt_tensor *buf, const int64_t *bshape, int d,
                               int64_t dim_size, dt_tensor *y)
{
    int64_t off = 0;
    for (int q = 0; q < c->n; q++) {
        int64_t sz, o, bs[DT_MAX_DIMS];
        dt_tensor *blk = NULL;
        dt_status s;
        dt_shard_chunk(dim_size, c->n, q, &sz, &o);
        memcpy(bs, bshape, sizeof(int64_t) * (size_t)c->ndim);
        bs[d] = sz;
        int64_t cnt = dt__shape_prod(bs, 0, c->ndim);
        if (cnt == 0)
            continue;
        DT_CHECK(block_view(buf, off, c->ndim, bs, &blk));
        s = copy_into(y, d, o, sz, blk);
        dt_tensor_release(blk);
        DT_CHECK(s);
        off += cnt;
    }
    return DT_OK;
}

static void displs_of(int n, const size_t *counts, size_t *displs)
{
    size_t o = 0;
    for (int q = 0; q < n; q++) {
        displs[q] = o;
        o += counts[q];
    }
}

/* S(d) -> R: all-gather(v) of the chunks along d. */
static dt_status exec_allgather(const step_ctx *c, dt_tensor *x, dt_tensor **out)
{
    const int64_t *L = c->st->logical_shape;
    int d = c->st->src.dim;
    size_t *counts = c->scratch, *displs = c->scratch + c->n;
    dt_tensor *y = NULL, *buf = NULL;
    dt_status s;
    int64_t outer = dt__shape_prod(L, 0, d), inner = dt__shape_prod(L, d + 1, c->ndim);
    for (int q = 0; q < c->n; q++) {
        int64_t sz;
        dt_shard_chunk(L[d], c->n, q, &sz, NULL);
        counts[q] = (size_t)(outer * sz * inner);
    }
    displs_of(c->n, counts, displs);
    DT_CHECK(new_like(c, L, dt_tensor_device(x), &y));
    if (dt__shape_prod(L, 0, c->ndim) == 0) { /* every rank sees the same empty result */
        *out = y;
        return DT_OK;
    }
    if (outer == 1) { /* the chunks are contiguous pieces of the result */
        DT_CHECK_GOTO(dt_comm_allgatherv(c->comm, dt_tensor_data(x), dt_tensor_data(y), counts,
                                         displs, c->dtype, NULL),
                      s, err_release);
    } else {
        int64_t total = dt__shape_prod(L, 0, c->ndim);
        DT_CHECK_GOTO(dt_tensor_empty(1, &total, c->dtype, dt_tensor_device(x), &buf), s,
                      err_release);
        DT_CHECK_GOTO(dt_comm_allgatherv(c->comm, dt_tensor_data(x), dt_tensor_data(buf), counts,
                                         displs, c->dtype, NULL),
                      s, err_release);
        DT_CHECK_GOTO(unpack_blocks(c, buf, L, d, L[d], y), s, err_release);
        dt_tensor_release(buf);
    }
    dt__mesh_count_coll(c->mesh, DT_COLL_ALLGATHER, c->st->bytes);
    *out = y;
    return DT_OK;
err_release:
    dt_tensor_release(buf);
    dt_tensor_release(y);
    return s;
}

/* P -> R: all-reduce with the Partial's op (out of place: no copy first). */
static dt_status exec_allreduce(const step_ctx *c, dt_tensor *x, dt_tensor **out)
{
    dt_tensor *y = NULL;
    dt_status s;
    DT_CHECK(new_like(c, dt_tensor_shape(x), dt_tensor_device(x), &y));
    if (dt_tensor_numel(y) > 0) {
        DT_CHECK_GOTO(dt_comm_allreduce(c->comm, dt_tensor_data(x), dt_tensor_data(y),
                                        (size_t)dt_tensor_numel(y), c->dtype, c->st->src.op, NULL),
                      s, err_release);
        dt__mesh_count_coll(c->mesh, DT_COLL_ALLREDUCE, c->st->bytes);
    }
    *out = y;
    return DT_OK;
err_release:
    dt_tensor_release(y);
    return s;
}

/* P -> S(d): reduce-scatter(v) of the chunks along d. */
static dt_status exec_reduce_scatter(const step_ctx *c, dt_tensor *x, dt_tensor **out)
{
    const int64_t *L = c->st->logical_shape;
    int d = c->st->dst.dim;
    size_t *counts = c->scratch;
    int64_t ys[DT_MAX_DIMS], sz, off;
    dt_tensor *y = NULL, *buf = NULL;
    dt_status s;
    memcpy(ys, L, sizeof(int64_t) * (size_t)c->ndim);
    dt_shard_chunk(L[d], c->n, c->me, &sz, &off);
    ys[d] = sz;
    DT_CHECK(new_like(c, ys, dt_tensor_device(x), &y));
    if (dt__shape_prod(L, 0, c->ndim) == 0) {
        *out = y;
        return DT_OK;
    }
    if (dt__shape_prod(L, 0, d) == 1) {
        for (int q = 0; q < c->n; q++) {
            int64_t qs;
            dt_shard_chunk(L[d], c->n, q, &qs, NULL);
            counts[q] = (size_t)(qs * dt__shape_prod(L, d + 1, c->ndim));
        }
        buf = dt_tensor_retain(x); /* contiguous: the blocks are already packed */
    } else {
        DT_CHECK_GOTO(dt__pack_chunks(x, d, c->n, -1, counts, &buf), s, err_release);
    }
    DT_CHECK_GOTO(dt_comm_reduce_scatterv(c->comm, dt_tensor_data(buf), dt_tensor_data(y), counts,
                                          c->dtype, c->st->src.op, NULL),
                  s, err_release);
    dt_tensor_release(buf);
    dt__mesh_count_coll(c->mesh, DT_COLL_REDUCE_SCATTER, c->st->bytes);
    *out = y;
    return DT_OK;
err_release:
    dt_tensor_release(buf);
    dt_tensor_release(y);
    return s;
}

/* exec_alltoall's send side: counts/displacements of my chunks along b into
 * sc/sd, straight from x when those chunks are contiguous in it (a self chunk,
 * self >= 0, is left out and stays in place), else from a packed copy. */
static dt_status alltoall_send(const step_ctx *c, dt_tensor *x, int self, dt_tensor **sbuf)
{
    const int64_t *L = c->st->logical_shape, *xs = dt_tensor_shape(x);
    int b = c->st->dst.dim;
    size_t *sc = c->scratch, *sd = sc + c->n;
    if (dt__shape_prod(xs, 0, b) != 1) {
        DT_CHECK(dt__pack_chunks(x, b, c->n, self, sc, sbuf));
        displs_of(c->n, sc, sd);
        return DT_OK;
    }
    int64_t inner = dt__shape_prod(xs, b + 1, c->ndim);
    for (int q = 0; q < c->n; q++) {
        int64_t qs, qo;
        dt_shard_chunk(L[b], c->n, q, &qs, &qo);
        sc[q] = q == self ? 0 : (size_t)(qs * inner);
        sd[q] = (size_t)(qo * inner); /* chunk offsets are the prefix sums of the sizes */
    }
    *sbuf = dt_tensor_retain(x);
    return DT_OK;
}

/* exec_alltoall's receive side: rank q's block is its chunk along a of y
 * (shape ys); direct: displacements are those offsets in y itself. */
static void alltoall_recv_counts(const step_ctx *c, const int64_t *ys, int self, bool direct)
{
    const int64_t *L = c->st->logical_shape;
    int a = c->st->src.dim;
    size_t *rc = c->scratch + 2 * c->n, *rd = rc + c->n;
    int64_t per_a = dt__shape_prod(ys, 0, c->ndim) / (L[a] ? L[a] : 1);
    for (int q = 0; q < c->n; q++) {
        int64_t asz, aoff;
        dt_shard_chunk(L[a], c->n, q, &asz, &aoff);
        rc[q] = q == self ? 0 : (size_t)(per_a * asz);
        rd[q] = (size_t)(per_a * aoff);
    }
    if (!direct)
        displs_of(c->n, rc, rd);
}

/* S(a) -> S(b): all-to-all(v); rank q gets my chunk q along b, I get its
 * chunk me along b, which lands at its offset along a. */
static dt_status exec_alltoall(const step_ctx *c, dt_tensor *x, dt_tensor **out)
{
    const int64_t *L = c->st->logical_shape;
    int a = c->st->src.dim, b = c->st->dst.dim;
    size_t *sc = c->scratch, *sd = sc + c->n, *rc = sd + c->n, *rd = rc + c->n;
    int64_t ys[DT_MAX_DIMS], bsz, boff;
    dt_tensor *y = NULL, *sbuf = NULL, *rbuf = NULL;
    dt_status s;
    memcpy(ys, L, sizeof(int64_t) * (size_t)c->ndim);
    dt_shard_chunk(L[b], c->n, c->me, &bsz, &boff);
    ys[b] = bsz;
    DT_CHECK(new_like(c, ys, dt_tensor_device(x), &y));
    if (dt__shape_prod(L, 0, c->ndim) == 0) {
        *out = y;
        return DT_OK;
    }
    /* blocks along a are contiguous pieces of y: receive straight into it, and
     * move my own block with one local copy instead of through the comm */
    bool direct = dt__shape_prod(ys, 0, a) == 1;
    int self = direct ? c->me : -1;
    DT_CHECK_GOTO(alltoall_send(c, x, self, &sbuf), s, err_release);
    alltoall_recv_counts(c, ys, self, direct);
    if (direct) {
        dt_tensor *mine = NULL;
        DT_CHECK_GOTO(dt_tensor_narrow(x, b, boff, bsz, &mine), s, err_release);
        int64_t asz, aoff;
        dt_shard_chunk(L[a], c->n, c->me, &asz, &aoff);
        s = copy_into(y, a, aoff, asz, mine);
        dt_tensor_release(mine);
        if (s != DT_OK)
            goto err_release;
    } else {
        int64_t total = dt__shape_prod(ys, 0, c->ndim);
        DT_CHECK_GOTO(dt_tensor_empty(1, &total, c->dtype, dt_tensor_device(x), &rbuf), s,
                      err_release);
    }
    DT_CHECK_GOTO(dt_comm_alltoallv(c->comm, dt_tensor_data(sbuf), sc, sd,
                                    dt_tensor_data(direct ? y : rbuf), rc, rd, c->dtype, NULL),
                  s, err_release);
    if (!direct)
        DT_CHECK_GOTO(unpack_blocks(c, rbuf, ys, a, L[a], y), s, err_release);
    dt_tensor_release(sbuf);
    dt_tensor_release(rbuf);
    dt__mesh_count_coll(c->mesh, DT_COLL_ALLTOALL, c->st->bytes);
    *out = y;
    return DT_OK;
err_release:
    dt_tensor_release(sbuf);
    dt_tensor_release(rbuf);
    dt_tensor_release(y);
    return s;
}

/* Chunk q along @p d of a tensor of shape @p shape, as a 2-D block: one row
 * per index of the dims before d, each row the chunk's slab of the rest. */
static dt_comm_block chunk_block(const step_ctx *c, const int64_t *shape, int d, int q)
{
    int64_t sz, off, outer = dt__shape_prod(shape, 0, d);
    int64_t inner = dt__shape_prod(shape, d + 1, c->ndim);
    dt_shard_chunk(c->st->logical_shape[d], c->n, q, &sz, &off);
    return (dt_comm_block){(size_t)(off * inner), (size_t)outer, (size_t)(sz * inner),
                           (size_t)(shape[d] * inner)};
}

/* S(a) -> S(b) in host memory: one all-to-all of 2-D blocks straight from x
 * into y (no packing: same-host ranks copy across once; see
 * dt_comm_alltoallw). */
static dt_status exec_alltoall_blocks(const step_ctx *c, dt_tensor *x, dt_tensor **out)
{
    const int64_t *L = c->st->logical_shape;
    int a = c->st->src.dim, b = c->st->dst.dim;
    int64_t ys[DT_MAX_DIMS];
    dt_tensor *y = NULL;
    dt_status s = DT_OK;
    memcpy(ys, L, sizeof(int64_t) * (size_t)c->ndim);
    dt_shard_chunk(L[b], c->n, c->me, &ys[b], NULL);
    dt_comm_block *blk = malloc(2 * (size_t)c->n * sizeof(*blk));
    if (blk == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_redistribute: no memory for %d blocks", 2 * c->n);
    DT_CHECK_GOTO(new_like(c, ys, dt_tensor_device(x), &y), s, out_free);
    for (int q = 0; q < c->n; q++) {
        blk[q] = chunk_block(c, dt_tensor_shape(x), b, q);
        blk[c->n + q] = chunk_block(c, ys, a, q);
    }
    if (dt__shape_prod(L, 0, c->ndim) > 0) { /* else all shards are empty alike */
        DT_CHECK_GOTO(dt_comm_alltoallw(c->comm, dt_tensor_data(x), blk, dt_tensor_data(y),
                                        blk + c->n, c->dtype, NULL),
                      s, out_free);
        dt__mesh_count_coll(c->mesh, DT_COLL_ALLTOALL, c->st->bytes);
    }
    *out = y;
    y = NULL;
out_free:
    dt_tensor_release(y);
    free(blk);
    return s;
}

/* R -> S(d): keep my chunk (a copy, so the shard owns its memory). */
static dt_status exec_slice(const step_ctx *c, dt_tensor *x, dt_tensor **out)
{
    int d = c->st->dst.dim;
    int64_t sz, off;
    dt_tensor *v = NULL;
    dt_status s;
    if (c->st->dst.split_factor > 1) /* its sf runs (split_layout.c) */
        return dt__split_slice(x, d, c->n, c->me, c->st->dst.split_factor, out);
    dt_shard_chunk(c->st->logical_shape[d], c->n, c->me, &sz, &off);
    DT_CHECK(dt_tensor_narrow(x, d, off, sz, &v));
    s = dt_tensor_clone(v, out);
    dt_tensor_release(v);
    return s;
}

/* R -> P(op): sum keeps the value on coordinate 0 (zeros elsewhere), so the
 * reduction gives it back exactly; avg/max/min keep it everywhere. */
static dt_status exec_partition(const step_ctx *c, dt_tensor *x, dt_tensor **out)
{
    if (c->st->dst.op == DT_REDUCE_OP_SUM && c->me != 0)
        return dt_tensor_zeros(c->ndim, dt_tensor_shape(x), c->dtype, dt_tensor_device(x), out);
    *out = dt_tensor_retain(x);
    return DT_OK;
}

/* A reduction step in @p wire (dt__redist_wire_dtype): x converted, reduced,
 * converted back; the collective counted with the bytes it moved. */
static dt_status exec_reduce_in(const step_ctx *c, dt_dtype wire, dt_tensor *x, dt_tensor **out)
{
    dt__step st = *c->st;
    step_ctx w = *c;
    dt_tensor *xw = NULL, *yw = NULL;
    st.bytes = st.bytes / (int64_t)dt_dtype_size(c->dtype) * (int64_t)dt_dtype_size(wire);
    w.st = &st;
    w.dtype = wire;
    dt_status s = dt_tensor_to_dtype(x, wire, &xw);
    if (s == DT_OK)
        s = st.kind == DT__STEP_ALLREDUCE ? exec_allreduce(&w, xw, &yw)
                                          : exec_reduce_scatter(&w, xw, &yw);
    if (s == DT_OK)
        s = dt_tensor_to_dtype(yw, c->dtype, out);
    dt_tensor_release(xw);
    dt_tensor_release(yw);
    return s;
}

static dt_status exec_step(const step_ctx *c, dt_tensor *x, dt_tensor **out)
{
    if (c->st->kind == DT__STEP_PARTITION)
        return exec_partition(c, x, out);
    if (c->st->kind == DT__STEP_SLICE)
        return exec_slice(c, x, out);
    if (c->n == 1) { /* a group of one: every collective is the identity */
        *out = dt_tensor_retain(x);
        return DT_OK;
    }
    if (c->comm == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_redistribute: mesh dim %d has no comm (a virtual mesh can plan but not "
                      "communicate)",
                      c->st->mesh_dim);
    dt_tensor *xc = NULL;
    dt_status s;
    step_ctx cc = *c;
    cc.scratch = malloc(sizeof(size_t) * 4 * (size_t)c->n);
    if (cc.scratch == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_redistribute: no memory for %d counts", 4 * c->n);
    c = &cc;
    s = dt_tensor_contiguous(x, &xc);
    if (s != DT_OK) {
        free(cc.scratch);
        return s;
    }
    if (c->wire != c->dtype) {
        s = exec_reduce_in(c, c->wire, xc, out);
        dt_tensor_release(xc);
        free(cc.scratch);
        return s;
    }
    switch (c->st->kind) {
    case DT__STEP_ALLGATHER:
        s = exec_allgather(c, xc, out);
        if (s == DT_OK && c->st->src.split_factor > 1) { /* rank order -> global order */
            dt_tensor *g = *out;
            *out = NULL;
            s = dt__split_gathered(g, c->st->src.dim, c->n, c->st->src.split_factor, out);
            dt_tensor_release(g);
        }
        break;
    case DT__STEP_ALLREDUCE:
        s = exec_allreduce(c, xc, out);
        break;
    case DT__STEP_REDUCE_SCATTER:
        s = exec_reduce_scatter(c, xc, out);
        break;
    case DT__STEP_ALLTOALL: /* NCCL: pack + all-to-all(v) + unpack */
        s = dt__comm_has_alltoallw(c->comm) ? exec_alltoall_blocks(c, xc, out)
                                            : exec_alltoall(c, xc, out);
        break;
    default:
        s = DT_ERR(DT_ERR_INTERNAL, "dt_redistribute: bad step kind %d", (int)c->st->kind);
    }
    dt_tensor_release(xc);
    free(cc.scratch);
    return s;
}

/* The shard must have the shape the plan expects before step i. */
static dt_status check_input(const step_ctx *c, const dt_tensor *x)
{
    int64_t want[DT_MAX_DIMS];
    const int64_t *L = c->st->logical_shape;
    memcpy(want, L, sizeof(int64_t) * (size_t)c->ndim);
    if (c->st->src.kind == DT_PLACEMENT_SHARD)
        dt_shard_chunk(L[c->st->src.dim], c->n, c->me, &want[c->st->src.dim], NULL);
    if (dt_tensor_ndim(x) != c->ndim || dt_tensor_dtype(x) != c->dtype ||
        memcmp(dt_tensor_shape(x), want, sizeof(int64_t) * (size_t)c->ndim) != 0) {
        char a[128], b[128];
        dt__shape_str(dt_tensor_ndim(x), dt_tensor_shape(x), a, sizeof(a));
        dt__shape_str(c->ndim, want, b, sizeof(b));
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_redistribute: the local shard is %s %s but its spec gives %s %s on "
                      "mesh dim %d",
                      a, dt_dtype_name(dt_tensor_dtype(x)), b, dt_dtype_name(c->dtype),
                      c->st->mesh_dim);
    }
    return DT_OK;
}

/* The call every rank must agree on (placements before and after, global
 * shape, dtype) as the context of the plan's collectives (comm_check.h):
 * ranks redistributing to different placements fail at their first message. */
static dt__comm_ctx agree_on(const dt__plan *plan, const dt_spec *src, char *text, size_t n)
{
    const dt_placement *a = plan->states[0], *b = plan->states[plan->n_steps];
    int32_t v[2 + 6 * DT_MESH_MAX_DIMS] = {plan->mesh_ndim,
                                           (int32_t)src->dtype | (int32_t)src->wire << 8},
                      k = 2;
    for (int j = 0; j < plan->mesh_ndim; j++) {
        int32_t f[6] = {a[j].kind, a[j].dim, a[j].op, b[j].kind, b[j].dim, b[j].op};
        memcpy(v + k, f, sizeof(f));
        k += 6;
    }
    uint32_t h = dt__comm_hash(0, v, (size_t)k * sizeof(int32_t));
    h = dt__comm_hash(h, src->shape, (size_t)src->ndim * sizeof(int64_t)), text[0] = '\0';
    if (dt__comm_check_detail()) { /* words only for DT_DEBUG=detail */
        char pa[48], pb[48], sh[64];
        dt_placements_format(plan->mesh_ndim, a, ",", pa, sizeof(pa));
        dt_placements_format(plan->mesh_ndim, b, ",", pb, sizeof(pb));
        dt__shape_str(src->ndim, src->shape, sh, sizeof(sh));
        snprintf(text, n, "dt_redistribute [%s] -> [%s] of %s %s", pa, pb, sh,
                 dt_dtype_name(src->dtype));
    }
    return dt__comm_context_set(h, text);
}

dt_status dt__redist_exec(const dt__plan *plan, const dt_spec *src, dt_tensor *local,
                          dt_tensor **out)
{
    dt_tensor *x = dt_tensor_retain(local), *y = NULL;
    char text[256];
    dt__comm_ctx saved = agree_on(plan, src, text, sizeof(text));
    for (int i = 0; i < plan->n_steps; i++) {
        step_ctx c = {
            .st = &plan->steps[i], .mesh = src->mesh, .ndim = src->ndim, .dtype = src->dtype};
        int j = c.st->mesh_dim;
        c.wire = dt__redist_wire_dtype(c.st, src);
        c.comm = dt_mesh_dim_comm(src->mesh, j);
        c.n = src->mesh->shape[j];
        c.me = src->mesh->coord[j];
        dt_status s = check_input(&c, x);
        if (s == DT_OK)
            s = exec_step(&c, x, &y);
        dt_tensor_release(x);
        if (s != DT_OK) {
            dt__comm_context_restore(saved);
            return s;
        }
        x = y;
    }
    dt__comm_context_restore(saved);
    *out = x;
    return DT_OK;
}
