/*
 * Embedding rule, per mesh dim (weight [V, D], ids [...] -> out [..., D]):
 *   weight Shard(0) (vocabulary-parallel, RowwiseParallel on an Embedding):
 *     ids replicated; each rank looks up the ids of its vocabulary range
 *     [start, start + rows) and gives zero rows for the others, so the result
 *     is Partial(sum); the weight gradient lands only on the rank owning the id;
 *   weight Shard(1): ids replicated, out Shard(-1);
 *   weight Replicate: ids' Shard(d) passes to out Shard(d);
 *   a Partial weight is reduced first.
 */
#include "placement/rules/rules.h"

static void emb_rule(const dt_tensor *ids, dt_placement pw, dt_placement pi, dt_placement *ww,
                     dt_placement *wi, dt_placement *wo)
{
    if (pw.kind == DT_PLACEMENT_PARTIAL)
        pw = dt_replicate();
    if (pi.kind == DT_PLACEMENT_PARTIAL) /* ids are never Partial; be safe */
        pi = dt_replicate();
    if (pw.kind == DT_PLACEMENT_SHARD) {
        *ww = pw, *wi = dt_replicate();
        *wo = pw.dim == 0 ? dt__rl_psum() : dt_shard(ids->ndim);
        return;
    }
    *ww = dt_replicate(), *wi = pi, *wo = pi;
}

dt_status dt__rl_embedding(dt_tensor *weight, dt_tensor *ids, dt_tensor **out)
{
    const char *name = "dt_embedding";
    dt_tensor *ins[2] = {weight, ids}, *lw = NULL, *li = NULL, *y = NULL;
    dt_placement pw[DT__RL_MAX_MESH], pi[DT__RL_MAX_MESH];
    dt_placement ww[DT__RL_MAX_MESH], wi[DT__RL_MAX_MESH], wo[DT__RL_MAX_MESH];
    int64_t oshape[DT_MAX_DIMS], off[DT_MAX_DIMS];
    bool vocab = false;
    dt_spec *wspec = NULL;
    dt_mesh *mesh = NULL;
    dt_status s;
    DT_CHECK(dt__rl_mesh(name, 2, ins, &mesh));
    if (weight->ndim != 2)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: weight must be 2-d [rows, dim], has %d dims", name,
                      weight->ndim);
    dt__rl_placements(weight, mesh, pw);
    dt__rl_placements(ids, mesh, pi);
    for (int k = 0; k < mesh->ndim; k++) {
        emb_rule(ids, pw[k], pi[k], &ww[k], &wi[k], &wo[k]);
        vocab = vocab || dt_placement_is_shard(ww[k], 0);
    }
    for (int i = 0; i < ids->ndim; i++)
        oshape[i] = ids->shape[i];
    oshape[ids->ndim] = weight->shape[1];
    DT_CHECK_GOTO(dt__rl_prepare(name, weight, mesh, ww, wo, &lw), s, out);
    DT_CHECK_GOTO(dt__rl_prepare(name, ids, mesh, wi, wo, &li), s, out);
    if (vocab) {             /* this rank's vocabulary range starts at its shard's offset */
        int64_t n_valid = 0; /* ids are whole here: every rank checks the same ones */
        DT_CHECK_GOTO(
            dt__ops_check_id_range(name, "ids", li, weight->shape[0], INT64_MIN, &n_valid), s, out);
        DT_CHECK_GOTO(dt_spec_create(mesh, mesh->ndim, ww, 2, weight->shape, weight->dtype, &wspec),
                      s, out);
        DT_CHECK_GOTO(dt_spec_local_shape(wspec, NULL, NULL, off), s, out);
        DT_CHECK_GOTO(dt__ops_embedding_shard(lw, li, off[0], &y), s, out);
    } else {
        DT_CHECK_GOTO(dt_embedding(lw, li, &y), s, out);
    }
    s = dt__rl_wrap(name, mesh, wo, ids->ndim + 1, oshape, DT_DTYPE_F32, y, out);
out:
    dt_spec_release(wspec);
    dt_tensor_release(y);
    dt_tensor_release(lw);
    dt_tensor_release(li);
    return s;
}
