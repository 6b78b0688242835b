/*
 * Moving the dp pieces of a tp-local tensor in and out of packed buffers. A
 * tensor [outer, K, inner] is split along K into pieces [outer, klen[r],
 * inner]; a packed buffer holds the pieces one after the other in rank order
 * (what allgatherv / reduce_scatterv exchange). The moves are tensor copies
 * between views, so they run on the tensors' device.
 */
#include "core/error.h"
#include "styles/data_parallel/dp_impl.h"

static int64_t piece_base(const dp_param *p, int r)
{
    int64_t base = 0;
    for (int q = 0; q < r; q++)
        base += p->outer * p->klen[q] * p->inner;
    return base;
}

/* Ranks holding a non-empty piece (the ones past them hold nothing). */
static int pieces(const dp_param *p)
{
    int n = 0;
    for (int64_t sum = 0; sum < p->lshape[p->k]; n++)
        sum += p->klen[n];
    return n;
}

/* View of @p t's elements [first, ...) as [outer, k, inner] rows @p kstride apart. */
static dt_status view3(dt_tensor *t, int64_t first, int64_t k, int64_t kstride, const dp_param *p,
                       dt_tensor **out)
{
    int64_t shape[3] = {p->outer, k, p->inner}, st[3] = {kstride * p->inner, p->inner, 1};
    return dt__tensor_make_view(t, 3, shape, st, t->offset + first, out);
}

/* Piece r of @p full (contiguous, p->lshape) <-> contiguous [outer, klen[r], inner] at
 * element @p at of @p other; to_full picks the direction. */
static dt_status move_piece(const dp_param *p, int r, dt_tensor *full, dt_tensor *other, int64_t at,
                            bool to_full)
{
    int64_t K = p->lshape[p->k];
    dt_tensor *vf = NULL, *vo = NULL;
    dt_status st = view3(full, p->koff[r] * p->inner, p->klen[r], K, p, &vf);
    if (st == DT_OK)
        st = view3(other, at, p->klen[r], p->klen[r], p, &vo);
    if (st == DT_OK)
        st = to_full ? dt_tensor_copy_(vf, vo) : dt_tensor_copy_(vo, vf);
    dt_tensor_release(vf);
    dt_tensor_release(vo);
    return st;
}

dt_status dt__dp_slice(const dp_param *p, int r, dt_tensor *full, dt_tensor *piece)
{
    return move_piece(p, r, full, piece, 0, false);
}

dt_status dt__dp_pack(const dp_param *p, dt_tensor *full, dt_tensor *packed)
{
    for (int r = 0, n = pieces(p); r < n; r++)
        DT_CHECK(move_piece(p, r, full, packed, piece_base(p, r), false));
    return DT_OK;
}

dt_status dt__dp_unpack(const dp_param *p, dt_tensor *packed, dt_tensor *full)
{
    for (int r = 0, n = pieces(p); r < n; r++)
        DT_CHECK(move_piece(p, r, full, packed, piece_base(p, r), true));
    return DT_OK;
}
