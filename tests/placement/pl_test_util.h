/* Helpers for the multi-rank placement tests: the meshes each world size is
 * tested on, integer-valued tensors (sums, averages and maxima stay exact, so
 * results compare bit for bit). The runtime (mr_rt, mr_setup) is
 * common/multirank.h's. */
#ifndef DT_TEST_PL_UTIL_H
#define DT_TEST_PL_UTIL_H

#include "common/multirank.h"

#define PT_OK(call) MR_OK(call)

/* Meshes for a world of @p w ranks: up to 4, each up to 3 dims; returns the count. */
static inline int pt_meshes(int w, int shapes[4][3], int *ndims)
{
    int n = 0;
    shapes[n][0] = w;
    ndims[n++] = 1;
    if (w == 3) {
        shapes[n][0] = 1;
        shapes[n][1] = 3;
        ndims[n++] = 2;
        shapes[n][0] = 3;
        shapes[n][1] = 1;
        ndims[n++] = 2;
    }
    if (w == 4) {
        shapes[n][0] = 2;
        shapes[n][1] = 2;
        ndims[n++] = 2;
        shapes[n][0] = 2;
        shapes[n][1] = 1;
        shapes[n][2] = 2;
        ndims[n++] = 3;
    }
    if (w == 2) {
        shapes[n][0] = 1;
        shapes[n][1] = 2;
        ndims[n++] = 2;
    }
    return n;
}

/* A tensor of @p shape with integer values depending on @p seed and the index. */
static inline dt_tensor *pt_tensor(int ndim, const int64_t *shape, dt_dtype dt, int seed)
{
    dt_tensor *t = NULL;
    PT_OK(dt_tensor_empty(ndim, shape, dt, dt_runtime_device(mr_rt), &t)); /* DT_DEVICE */
    int64_t n = dt_tensor_numel(t);
    dt_tensor *f = NULL;
    float *v = malloc(sizeof(float) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)((int)((i * 7 + seed * 5) % 23) - 11);
    PT_OK(dt_tensor_from_buffer(ndim, shape, DT_DTYPE_F32, v, &f));
    PT_OK(dt_tensor_copy_(t, f));
    dt_tensor_release(f);
    free(v);
    return t;
}

/* The slice of @p full that spec @p s gives this rank (a new tensor),
 * computed here rather than by the library: for each tensor dim, the mesh
 * dims with a plain Shard of it split it in mesh order, then those with a
 * strided shard, each splitting the previous piece (torch.chunk). */
/* The pieces c, c+n, ..., c+(sf-1)n of the sf*n equal pieces of @p x along
 * @p d, concatenated: PyTorch's _StridedShard._split_tensor, written out. */
static inline dt_tensor *pt_split_pieces(dt_tensor *x, int d, int n, int c, int sf)
{
    int64_t r = dt_tensor_dim(x, d) / ((int64_t)n * sf);
    dt_tensor *parts[DT_PLACEMENT_MAX_SPLIT], *out = NULL;
    for (int j = 0; j < sf; j++)
        PT_OK(dt_tensor_narrow(x, d, (int64_t)(c + j * n) * r, r, &parts[j]));
    bool prev = dt_grad_set_enabled(false);
    PT_OK(dt_concat(sf, parts, d, &out));
    dt_grad_set_enabled(prev);
    for (int j = 0; j < sf; j++)
        dt_tensor_release(parts[j]);
    return out;
}

static inline dt_tensor *pt_expected_local(dt_tensor *full, const dt_spec *s)
{
    int64_t ls[DT_MAX_DIMS], off[DT_MAX_DIMS];
    const dt_placement *pl = dt_spec_placements(s);
    dt_mesh *m = dt_spec_mesh(s);
    int coord[DT_MESH_MAX_DIMS], split = -1;
    PT_OK(dt_mesh_rank_to_coord(m, dt_mesh_rank(m), coord));
    for (int d = 0; d < dt_spec_ndim(s); d++) {
        ls[d] = dt_tensor_dim(full, d), off[d] = 0;
        for (int strided = 0; strided < 2; strided++)
            for (int k = 0; k < dt_mesh_ndim(m); k++) {
                int64_t n, o;
                if (!dt_placement_is_shard(pl[k], d) || pl[k].strided != strided)
                    continue;
                if (pl[k].split_factor > 1) { /* alone on its dim: done below */
                    split = k;
                    continue;
                }
                dt_shard_chunk(ls[d], dt_mesh_dim_size(m, k), coord[k], &n, &o);
                ls[d] = n, off[d] += o;
            }
    }
    dt_tensor *cur = dt_tensor_retain(full), *next = NULL;
    for (int d = 0; d < dt_spec_ndim(s); d++) {
        PT_OK(dt_tensor_narrow(cur, d, off[d], ls[d], &next));
        dt_tensor_release(cur);
        cur = next;
    }
    if (split >= 0) {
        next = pt_split_pieces(cur, pl[split].dim, dt_mesh_dim_size(m, split), coord[split],
                               pl[split].split_factor);
        dt_tensor_release(cur);
        cur = next;
    }
    dt_tensor *c = NULL;
    PT_OK(dt_tensor_clone(cur, &c));
    dt_tensor_release(cur);
    return c;
}

static inline bool pt_has_partial(int n, const dt_placement *pl)
{
    for (int k = 0; k < n; k++)
        if (pl[k].kind == DT_PLACEMENT_PARTIAL)
            return true;
    return false;
}

/* Every placement list over @p mesh_ndim dims for a tensor of @p ndim dims
 * from @p opts, without mixed Partial ops; returns the count. */
static inline int pt_lists(int mesh_ndim, int nopts, const dt_placement *opts,
                           dt_placement (*out)[3])
{
    int total = 1, n = 0;
    for (int k = 0; k < mesh_ndim; k++)
        total *= nopts;
    for (int i = 0; i < total; i++) {
        int v = i, pop = -1;
        bool ok = true;
        for (int k = mesh_ndim - 1; k >= 0; k--) {
            out[n][k] = opts[v % nopts];
            v /= nopts;
            if (out[n][k].kind == DT_PLACEMENT_PARTIAL) {
                ok = ok && (pop < 0 || pop == (int)out[n][k].op);
                pop = (int)out[n][k].op;
            }
        }
        n += ok;
    }
    return n;
}

#endif
