/*
 * Element-wise rules (PyTorch's pointwise strategies), per mesh dim:
 *   - Partial(sum) + Partial(sum) (add, sub) -> Partial(sum);
 *     Partial(sum) * Replicate (mul, either side), Partial(sum) / Replicate
 *     -> Partial(sum): the op is linear in the Partial operand;
 *   - any other Partial is reduced first (all-reduce to Replicate);
 *   - Shard(d) with Shard on the same broadcast dim, or with Replicate ->
 *     Shard: the other operand is sliced to match (no communication), unless
 *     its dim is a broadcast one (size 1 or missing), where it stays Replicate;
 *     two different Shards: the second follows the first;
 *   - a Shard on a dim the operand broadcasts along is gathered first.
 * Unary ops: scale keeps Partial(sum) (linear); add_scalar, gelu, relu and
 * rounding to bf16 reduce a Partial first; Shard and Replicate pass through.
 * masked_fill has no rule: it takes the fallback (replicate, with a warning).
 */
#include "placement/rules/rules.h"

/* The output dim a Shard(d) of @p x maps to, or -1 when d is broadcast. */
static int out_dim_of(const dt_tensor *x, int d, int n, const int64_t *oshape)
{
    int od = d + (n - x->ndim);
    return x->shape[d] == oshape[od] ? od : -1;
}

/* The placement @p x needs to be sharded like output dim @p od (Replicate when it broadcasts). */
static dt_placement shard_like(const dt_tensor *x, int od, int n, const int64_t *oshape)
{
    int d = od - (n - x->ndim);
    if (d < 0 || x->shape[d] != oshape[od])
        return dt_replicate();
    return dt_shard(d);
}

/* The rule for one mesh dim: wanted placements of a and b, and the output's. */
static void binary_rule(dt_binary_op op, const dt_tensor *a, const dt_tensor *b, dt_placement pa,
                        dt_placement pb, int n, const int64_t *oshape, dt_placement *wa,
                        dt_placement *wb, dt_placement *wo)
{
    bool add = op == DT_BINARY_ADD || op == DT_BINARY_SUB;
    if (add && dt__rl_is_psum(pa) && dt__rl_is_psum(pb)) {
        *wa = pa, *wb = pb, *wo = dt__rl_psum();
        return;
    }
    if ((op == DT_BINARY_MUL || op == DT_BINARY_DIV) && dt__rl_is_psum(pa) && dt__rl_is_r(pb)) {
        *wa = pa, *wb = pb, *wo = dt__rl_psum();
        return;
    }
    if (op == DT_BINARY_MUL && dt__rl_is_r(pa) && dt__rl_is_psum(pb)) {
        *wa = pa, *wb = pb, *wo = dt__rl_psum();
        return;
    }
    if (pa.kind == DT_PLACEMENT_PARTIAL) /* not linear here: reduce first */
        pa = dt_replicate();
    if (pb.kind == DT_PLACEMENT_PARTIAL)
        pb = dt_replicate();
    int ia = pa.kind == DT_PLACEMENT_SHARD ? out_dim_of(a, pa.dim, n, oshape) : -1;
    int ib = pb.kind == DT_PLACEMENT_SHARD ? out_dim_of(b, pb.dim, n, oshape) : -1;
    if (ia >= 0) {
        *wa = pa, *wb = shard_like(b, ia, n, oshape), *wo = dt_shard(ia);
    } else if (ib >= 0) {
        *wb = pb, *wa = shard_like(a, ib, n, oshape), *wo = dt_shard(ib);
    } else {
        *wa = dt_replicate(), *wb = dt_replicate(), *wo = dt_replicate();
    }
}

static dt_status binary_local(dt_binary_op op, dt_tensor *a, dt_tensor *b, dt_tensor **out)
{
    switch (op) {
    case DT_BINARY_ADD:
        return dt_add(a, b, out);
    case DT_BINARY_SUB:
        return dt_sub(a, b, out);
    case DT_BINARY_MUL:
        return dt_mul(a, b, out);
    case DT_BINARY_DIV:
        return dt_div(a, b, out);
    }
    return DT_ERR(DT_ERR_INTERNAL, "binary rule: bad op %d", (int)op);
}

dt_status dt__rl_binary(dt_binary_op op, dt_tensor *a, dt_tensor *b, dt_tensor **out)
{
    static const char *const names[] = {"dt_add", "dt_sub", "dt_mul", "dt_div"};
    const char *name = names[op];
    dt_tensor *ins[2] = {a, b}, *la = NULL, *lb = NULL, *y = NULL;
    dt_placement pa[DT__RL_MAX_MESH], pb[DT__RL_MAX_MESH];
    dt_placement wa[DT__RL_MAX_MESH], wb[DT__RL_MAX_MESH], wo[DT__RL_MAX_MESH];
    int64_t oshape[DT_MAX_DIMS];
    int n = 0;
    dt_mesh *mesh = NULL;
    dt_status s;
    DT_CHECK(dt__rl_mesh(name, 2, ins, &mesh));
    DT_CHECK(dt__kt_broadcast_shape(name, a, b, &n, oshape));
    dt__rl_placements(a, mesh, pa);
    dt__rl_placements(b, mesh, pb);
    for (int k = 0; k < mesh->ndim; k++)
        binary_rule(op, a, b, pa[k], pb[k], n, oshape, &wa[k], &wb[k], &wo[k]);
    DT_CHECK_GOTO(dt__rl_prepare(name, a, mesh, wa, wo, &la), s, out);
    DT_CHECK_GOTO(dt__rl_prepare(name, b, mesh, wb, wo, &lb), s, out);
    DT_CHECK_GOTO(binary_local(op, la, lb, &y), s, out);
    s = dt__rl_wrap(name, mesh, wo, n, oshape, DT_DTYPE_F32, y, out);
out:
    dt_tensor_release(y);
    dt_tensor_release(la);
    dt_tensor_release(lb);
    return s;
}

/* ------------------------------------------------------------ unary */

static dt_status unary_local(dt_unary_op op, dt_tensor *x, double alpha, dt_tensor **out)
{
    switch (op) {
    case DT_UNARY_SCALE:
        return dt_scale(x, alpha, out);
    case DT_UNARY_ADD_SCALAR:
        return dt_add_scalar(x, alpha, out);
    case DT_UNARY_GELU_TANH:
        return dt_gelu_tanh(x, out);
    case DT_UNARY_RELU:
        return dt_relu(x, out);
    case DT_UNARY_ROUND_BF16:
        return dt_round_to_dtype(x, DT_DTYPE_BF16, out);
    default:
        break;
    }
    return DT_ERR(DT_ERR_UNSUPPORTED, "unary rule: op %d has no public entry", (int)op);
}

dt_status dt__rl_unary(dt_unary_op op, dt_tensor *x, double alpha, dt_tensor **out)
{
    const char *name = op == DT_UNARY_SCALE ? "dt_scale" : "dt_unary";
    dt_placement w[DT__RL_MAX_MESH];
    dt_tensor *lx = NULL, *y = NULL;
    dt_mesh *mesh = NULL;
    dt_status s;
    DT_CHECK(dt__rl_mesh(name, 1, &x, &mesh));
    dt__rl_placements(x, mesh, w);
    for (int k = 0; k < mesh->ndim; k++) {
        bool keep =
            w[k].kind != DT_PLACEMENT_PARTIAL || (op == DT_UNARY_SCALE && dt__rl_is_psum(w[k]));
        if (!keep)
            w[k] = dt_replicate();
    }
    DT_CHECK(dt__rl_prepare(name, x, mesh, w, w, &lx));
    DT_CHECK_GOTO(unary_local(op, lx, alpha, &y), s, out);
    s = dt__rl_wrap(name, mesh, w, x->ndim, x->shape, DT_DTYPE_F32, y, out);
out:
    dt_tensor_release(y);
    dt_tensor_release(lx);
    return s;
}

/* ------------------------------------------------------------ masked_fill: the fallback */

static dt_status masked_fill_local(void *ctx, dt_tensor *const *l, dt_tensor **out)
{
    return dt_masked_fill(l[0], l[1], *(const double *)ctx, out);
}

dt_status dt__rl_masked_fill(dt_tensor *x, dt_tensor *mask, double value, dt_tensor **out)
{
    dt_tensor *ins[2] = {x, mask};
    return dt__rl_fallback("dt_masked_fill", 2, ins, masked_fill_local, &value, out);
}
