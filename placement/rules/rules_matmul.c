/*
 * matmul and linear rules (PyTorch's mm/bmm/addmm strategies), per mesh dim.
 *
 * matmul a [..., M, K] @ b [..., K, N] (after the transposes):
 *   S(M) x R -> S(-2);  R x S(N) -> S(-1);  S(K) x S(K) -> Partial(sum);
 *   S(batch) x S(batch) or R (b broadcast on that dim) -> S(batch);
 *   Partial(sum) x R or R x Partial(sum) -> Partial(sum).
 *   Otherwise a's placement leads and b is redistributed to fit it (a
 *   Replicate a follows b's); the remaining Partials are reduced first.
 *
 * linear x [..., in], w [out, in] (PyTorch layout), bias [out]:
 *   R x S(0) "colwise"        -> S(-1); the bias must be S(0) too;
 *   S(-1) x S(1) "rowwise"    -> Partial(sum);
 *   S(batch) x R              -> S(batch);
 *   Partial(sum) x R          -> Partial(sum);
 *   R x S(1) / S(-1) x R      -> x sliced / w sliced (no communication), Partial;
 *   S(batch or -1) x S(0) or Partial x S(0) -> x replicated first, S(-1).
 * A Replicate bias on a Partial(sum) output is added ONCE: by the ranks at
 * coordinate 0 of the Partial mesh dims (the others add 0 * bias, so every
 * rank records the same graph). This keeps the output Partial, so a following
 * reduce-scatter (sequence parallel) or all-reduce does the only
 * communication, and the bias gradient is all-reduced like any Replicate input.
 */
#include "placement/rules/rules.h"

enum { R_REP, R_PART, R_M, R_K, R_N, R_BATCH }; /* the role of a placement */

typedef struct mm_geo {
    int na, nb, n;
    int a_m, a_k, b_k, b_n;
    int64_t oshape[DT_MAX_DIMS];
} mm_geo;

static dt_status mm_geometry(dt_tensor *a, dt_tensor *b, bool ta, bool tb, mm_geo *g)
{
    g->na = a->ndim, g->nb = b->ndim;
    if (g->na < 2 || g->nb < 2)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_matmul: operands need >= 2 dims (have %d and %d)",
                      g->na, g->nb);
    g->a_m = ta ? g->na - 1 : g->na - 2, g->a_k = ta ? g->na - 2 : g->na - 1;
    g->b_k = tb ? g->nb - 1 : g->nb - 2, g->b_n = tb ? g->nb - 2 : g->nb - 1;
    int bnd = g->na > g->nb ? g->na - 2 : g->nb - 2;
    char sa[96], sb[96];
    bool ok = a->shape[g->a_k] == b->shape[g->b_k];
    g->n = bnd + 2;
    for (int i = 0; i < bnd; i++) {
        int ia = i - (bnd - (g->na - 2)), ib = i - (bnd - (g->nb - 2));
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        ok = ok && (da == db || da == 1 || db == 1);
        g->oshape[i] = da == 1 ? db : da;
    }
    if (!ok) /* checked on the global shapes, so every rank fails alike */
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_matmul: shapes %s and %s do not multiply",
                      dt__shape_str(a->ndim, a->shape, sa, sizeof(sa)),
                      dt__shape_str(b->ndim, b->shape, sb, sizeof(sb)));
    g->oshape[bnd] = a->shape[g->a_m];
    g->oshape[bnd + 1] = b->shape[g->b_n];
    return DT_OK;
}

/* Role of placement p of operand x (the a side when is_a); *od: output dim of a batch shard. */
static int mm_role(const mm_geo *g, const dt_tensor *x, bool is_a, dt_placement p, int *od)
{
    int nx = is_a ? g->na : g->nb;
    if (dt__rl_is_psum(p))
        return R_PART;
    if (p.kind != DT_PLACEMENT_SHARD)
        return R_REP;
    if (p.dim == (is_a ? g->a_m : g->b_n))
        return is_a ? R_M : R_N;
    if (p.dim == (is_a ? g->a_k : g->b_k))
        return R_K;
    *od = p.dim + (g->n - nx);
    return x->shape[p.dim] == g->oshape[*od] ? R_BATCH : R_REP; /* broadcast dim: gather */
}

/* The placement of operand x that shards output batch dim od (Replicate if x broadcasts it). */
static dt_placement mm_batch_like(const mm_geo *g, const dt_tensor *x, bool is_a, int od)
{
    int nx = is_a ? g->na : g->nb, d = od - (g->n - nx);
    if (d < 0 || d >= nx - 2 || x->shape[d] != g->oshape[od])
        return dt_replicate();
    return dt_shard(d);
}

static void mm_rule(const mm_geo *g, const dt_tensor *a, const dt_tensor *b, dt_placement pa,
                    dt_placement pb, dt_placement *wa, dt_placement *wb, dt_placement *wo)
{
    int oa = -1, ob = -1;
    int ra = mm_role(g, a, true, pa, &oa), rb = mm_role(g, b, false, pb, &ob);
    *wa = dt_replicate(), *wb = dt_replicate(), *wo = dt_replicate();
    switch (ra) {
    case R_M:
        *wa = pa, *wo = dt_shard(g->n - 2);
        return;
    case R_K:
        *wa = pa, *wb = dt_shard(g->b_k), *wo = dt__rl_psum();
        return;
    case R_BATCH:
        *wa = pa, *wb = mm_batch_like(g, b, false, oa), *wo = dt_shard(oa);
        return;
    case R_PART:
        *wa = pa, *wo = dt__rl_psum();
        return; /* b replicated */
    default:
        break;
    }
    switch (rb) { /* a is Replicate (or gathered): b leads */
    case R_N:
        *wb = pb, *wo = dt_shard(g->n - 1);
        return;
    case R_K:
        *wb = pb, *wa = dt_shard(g->a_k), *wo = dt__rl_psum();
        return;
    case R_BATCH:
        *wb = pb, *wa = mm_batch_like(g, a, true, ob), *wo = dt_shard(ob);
        return;
    case R_PART:
        *wb = pb, *wo = dt__rl_psum();
        return;
    default:
        return;
    }
}

dt_status dt__rl_matmul(dt_tensor *a, dt_tensor *b, bool ta, bool tb, dt_tensor **out)
{
    const char *name = "dt_matmul";
    dt_tensor *ins[2] = {a, b}, *la = NULL, *lb = NULL, *y = NULL;
    dt_placement pa[DT__RL_MAX_MESH], pb[DT__RL_MAX_MESH];
    dt_placement wa[DT__RL_MAX_MESH], wb[DT__RL_MAX_MESH], wo[DT__RL_MAX_MESH];
    dt_mesh *mesh = NULL;
    mm_geo g;
    dt_status s;
    DT_CHECK(dt__rl_mesh(name, 2, ins, &mesh));
    DT_CHECK(mm_geometry(a, b, ta, tb, &g));
    dt__rl_placements(a, mesh, pa);
    dt__rl_placements(b, mesh, pb);
    for (int k = 0; k < mesh->ndim; k++)
        mm_rule(&g, a, b, pa[k], pb[k], &wa[k], &wb[k], &wo[k]);
    DT_CHECK_GOTO(dt__rl_prepare(name, a, mesh, wa, wo, &la), s, out);
    DT_CHECK_GOTO(dt__rl_prepare(name, b, mesh, wb, wo, &lb), s, out);
    DT_CHECK_GOTO(dt_matmul(la, lb, ta, tb, &y), s, out);
    s = dt__rl_wrap_product(name, mesh, wo, g.n, g.oshape, y, out);
out:
    dt_tensor_release(y);
    dt_tensor_release(la);
    dt_tensor_release(lb);
    return s;
}

/* ------------------------------------------------------------ linear */

enum { L_REP, L_PART, L_IN, L_OUT, L_BATCH };

static int lin_role_x(const dt_tensor *x, dt_placement p)
{
    if (dt__rl_is_psum(p))
        return L_PART;
    if (p.kind != DT_PLACEMENT_SHARD)
        return L_REP;
    return p.dim == x->ndim - 1 ? L_IN : L_BATCH;
}

static int lin_role_w(dt_placement p)
{
    if (p.kind != DT_PLACEMENT_SHARD)
        return L_REP; /* a Partial weight is reduced first */
    return p.dim == 0 ? L_OUT : L_IN;
}

static void lin_rule(const dt_tensor *x, dt_placement px, dt_placement pw, dt_placement *wx,
                     dt_placement *ww, dt_placement *wb, dt_placement *wo)
{
    int rx = lin_role_x(x, px), rw = lin_role_w(pw);
    int last = x->ndim - 1;
    *wb = dt_replicate();
    if (rw == L_OUT) { /* colwise: x must be whole */
        *wx = dt_replicate(), *ww = pw, *wb = dt_shard(0), *wo = dt_shard(last);
        return;
    }
    if (rx == L_IN || rw == L_IN) { /* rowwise: both sharded on in */
        *wx = dt_shard(last), *ww = dt_shard(1), *wo = dt__rl_psum();
        return;
    }
    *ww = dt_replicate();
    if (rx == L_BATCH)
        *wx = px, *wo = px;
    else if (rx == L_PART)
        *wx = px, *wo = dt__rl_psum();
    else
        *wx = dt_replicate(), *wo = dt_replicate();
}

/* The bias shard each rank adds: 0 * bias off coordinate 0 of a Partial output's mesh dims. */
static dt_status bias_once(dt_mesh *mesh, const dt_placement *wo, dt_tensor *lb, dt_tensor **out)
{
    bool mine = true;
    for (int k = 0; k < mesh->ndim; k++)
        if (dt__rl_is_psum(wo[k]) && mesh->coord[k] != 0)
            mine = false;
    return dt_scale(lb, mine ? 1.0 : 0.0, out);
}

dt_status dt__rl_linear(dt_tensor *x, dt_tensor *w, dt_tensor *bias, dt_tensor **out)
{
    const char *name = "dt_linear";
    dt_tensor *ins[3] = {x, w, bias}, *lx = NULL, *lw = NULL, *lb = NULL, *lb1 = NULL, *y = NULL;
    dt_placement px[DT__RL_MAX_MESH], pw[DT__RL_MAX_MESH];
    dt_placement wx[DT__RL_MAX_MESH], ww[DT__RL_MAX_MESH], wb[DT__RL_MAX_MESH], wo[DT__RL_MAX_MESH];
    int64_t oshape[DT_MAX_DIMS];
    bool any_partial = false;
    dt_mesh *mesh = NULL;
    dt_status s;
    DT_CHECK(dt__rl_mesh(name, 3, ins, &mesh));
    dt__rl_placements(x, mesh, px);
    dt__rl_placements(w, mesh, pw);
    for (int k = 0; k < mesh->ndim; k++) {
        lin_rule(x, px[k], pw[k], &wx[k], &ww[k], &wb[k], &wo[k]);
        any_partial = any_partial || dt__rl_is_psum(wo[k]);
    }
    for (int i = 0; i < x->ndim - 1; i++)
        oshape[i] = x->shape[i];
    oshape[x->ndim - 1] = w->shape[0];
    DT_CHECK_GOTO(dt__rl_prepare(name, x, mesh, wx, wo, &lx), s, out);
    DT_CHECK_GOTO(dt__rl_prepare(name, w, mesh, ww, wo, &lw), s, out);
    DT_CHECK_GOTO(dt__rl_prepare(name, bias, mesh, wb, wo, &lb), s, out);
    if (lb != NULL && any_partial) {
        DT_CHECK_GOTO(bias_once(mesh, wo, lb, &lb1), s, out);
        dt_tensor_release(lb);
        lb = lb1;
    }
    DT_CHECK_GOTO(dt_linear(lx, lw, lb, &y), s, out);
    s = dt__rl_wrap_product(name, mesh, wo, x->ndim, oshape, y, out);
out:
    dt_tensor_release(y);
    dt_tensor_release(lx);
    dt_tensor_release(lw);
    dt_tensor_release(lb);
    return s;
}
