/* Views: new geometry over the same storage, never a copy (reshape excepted). */
#include <inttypes.h>
#include <string.h>

#include "core/error.h"
#include "core/tensor_impl.h"

/* Resolve one -1 in @p shape against t's numel into @p out. */
static dt_status infer_shape(const char *fn, const dt_tensor *t, int ndim, const int64_t *shape,
                             int64_t *out)
{
    char b1[256], b2[256];
    if (ndim < 0 || ndim > DT_MAX_DIMS)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: ndim %d is outside [0, %d]", fn, ndim, DT_MAX_DIMS);
    if (ndim > 0 && shape == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: shape is NULL for ndim %d", fn, ndim);
    int infer = -1;
    int64_t known = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == -1) {
            if (infer >= 0)
                return DT_ERR(DT_ERR_INVALID_ARG, "%s: dims %d and %d are both -1", fn, infer, d);
            infer = d;
        } else if (shape[d] < 0) {
            return DT_ERR(DT_ERR_INVALID_ARG, "%s: dim %d has negative size %" PRId64, fn, d,
                          shape[d]);
        } else if (__builtin_mul_overflow(known, shape[d], &known)) {
            return DT_ERR(DT_ERR_INVALID_ARG, "%s: shape %s has more than INT64_MAX elements", fn,
                          dt__shape_str(ndim, shape, b1, sizeof(b1)));
        }
    }
    int64_t numel = dt_tensor_numel(t);
    if (ndim > 0)
        memcpy(out, shape, (size_t)ndim * sizeof(int64_t));
    if (infer >= 0) {
        if (known == 0 || numel % known != 0)
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "%s: cannot infer dim %d of %s from %" PRId64 " elements", fn, infer,
                          dt__shape_str(ndim, shape, b1, sizeof(b1)), numel);
        out[infer] = numel / known;
        known = numel;
    }
    if (known != numel)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: shape %s (%" PRId64 " elements) does not match %s "
                      "(%" PRId64 " elements)",
                      fn, dt__shape_str(ndim, out, b1, sizeof(b1)), known,
                      dt__shape_str(t->ndim, t->shape, b2, sizeof(b2)), numel);
    return DT_OK;
}

/*
 * Strides that view t's layout as @p shape (same numel), false when the
 * layout cannot be viewed: each run of old dims that is contiguous in memory
 * may be re-split freely; runs may not be merged (PyTorch's computeStride).
 */
static bool view_strides(const dt_tensor *t, int ndim, const int64_t *shape, int64_t *strides)
{
    if (t->ndim == 0 || dt_tensor_numel(t) == 0) {
        dt__contiguous_strides(ndim, shape, strides);
        return true;
    }
    int view_d = ndim - 1;
    int64_t chunk_stride = t->strides[t->ndim - 1];
    int64_t tensor_numel = 1, view_numel = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        tensor_numel *= t->shape[d];
        if (d == 0 || (t->shape[d - 1] != 1 && t->strides[d - 1] != tensor_numel * chunk_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
                strides[view_d] = view_numel * chunk_stride;
                view_numel *= shape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel)
                return false;
            if (d > 0) {
                chunk_stride = t->strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

dt_status dt_tensor_view(dt_tensor *t, int ndim, const int64_t *shape, dt_tensor **out)
{
    DT_ARG_NOT_NULL(out);
    DT_CHECK(dt__check_local_tensor(__func__, "t", t));
    int64_t s[DT_MAX_DIMS], st[DT_MAX_DIMS];
    DT_CHECK(infer_shape(__func__, t, ndim, shape, s));
    if (!view_strides(t, ndim, s, st)) {
        char b1[256], b2[256], b3[256];
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_tensor_view: a tensor of shape %s and strides %s "
                      "cannot be viewed as %s; use dt_tensor_reshape",
                      dt__shape_str(t->ndim, t->shape, b1, sizeof(b1)),
                      dt__shape_str(t->ndim, t->strides, b2, sizeof(b2)),
                      dt__shape_str(ndim, s, b3, sizeof(b3)));
    }
    return dt__tensor_make_view(t, ndim, s, st, t->offset, out);
}

dt_status dt_tensor_reshape(dt_tensor *t, int ndim, const int64_t *shape, dt_tensor **out)
{
    DT_ARG_NOT_NULL(out);
    DT_CHECK(dt__check_local_tensor(__func__, "t", t));
    int64_t s[DT_MAX_DIMS], st[DT_MAX_DIMS];
    DT_CHECK(infer_shape(__func__, t, ndim, shape, s));
    if (view_strides(t, ndim, s, st))
        return dt__tensor_make_view(t, ndim, s, st, t->offset, out);
    dt_tensor *c = NULL;
    DT_CHECK(dt_tensor_clone(t, &c));
    dt__contiguous_strides(ndim, s, st);
    dt_status status = dt__tensor_make_view(c, ndim, s, st, 0, out);
    dt_tensor_release(c);
    return status;
}

dt_status dt_tensor_permute(dt_tensor *t, const int *perm, dt_tensor **out)
{
    DT_ARG_NOT_NULL(out);
    DT_CHECK(dt__check_local_tensor(__func__, "t", t));
    if (t->ndim > 0 && perm == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_tensor_permute: perm is NULL for a %d-dim tensor",
                      t->ndim);
    int64_t s[DT_MAX_DIMS], st[DT_MAX_DIMS];
    bool seen[DT_MAX_DIMS] = {false};
    for (int i = 0; i < t->ndim; i++) {
        int d = 0;
        DT_CHECK(dt__wrap_dim(__func__, perm[i], t->ndim, &d));
        if (seen[d])
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_tensor_permute: dim %d appears twice in perm "
                          "(at position %d)",
                          perm[i], i);
        seen[d] = true;
        s[i] = t->shape[d];
        st[i] = t->strides[d];
    }
    return dt__tensor_make_view(t, t->ndim, s, st, t->offset, out);
}

dt_status dt_tensor_transpose(dt_tensor *t, int d0, int d1, dt_tensor **out)
{
    DT_ARG_NOT_NULL(out);
    DT_CHECK(dt__check_local_tensor(__func__, "t", t));
    int a = 0, b = 0;
    DT_CHECK(dt__wrap_dim(__func__, d0, t->ndim, &a));
    DT_CHECK(dt__wrap_dim(__func__, d1, t->ndim, &b));
    int perm[DT_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++)
        perm[i] = i;
    perm[a] = b;
    perm[b] = a;
    return dt_tensor_permute(t, perm, out);
}

dt_status dt_tensor_narrow(dt_tensor *t, int dim, int64_t start, int64_t length, dt_tensor **out)
{
    DT_ARG_NOT_NULL(out);
    DT_CHECK(dt__check_local_tensor(__func__, "t", t));
    int d = 0;
    DT_CHECK(dt__wrap_dim(__func__, dim, t->ndim, &d));
    int64_t size = t->shape[d];
    if (start < 0 || length < 0 || start > size || length > size - start)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_tensor_narrow: [%" PRId64 ", %" PRId64 " + %" PRId64
                      ") is out of range for dim %d of size %" PRId64,
                      start, start, length, dim, size);
    int64_t s[DT_MAX_DIMS];
    memcpy(s, t->shape, sizeof(s));
    s[d] = length;
    /* an empty result keeps the offset in range of the storage */
    int64_t offset = t->offset + (length > 0 ? start * t->strides[d] : 0);
    return dt__tensor_make_view(t, t->ndim, s, t->strides, offset, out);
}

dt_status dt_tensor_expand(dt_tensor *t, int ndim, const int64_t *shape, dt_tensor **out)
{
    DT_ARG_NOT_NULL(out);
    DT_CHECK(dt__check_local_tensor(__func__, "t", t));
    char b1[256], b2[256];
    if (ndim < t->ndim || ndim > DT_MAX_DIMS || (ndim > 0 && shape == NULL))
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_tensor_expand: cannot expand a %d-dim tensor to "
                      "ndim %d%s",
                      t->ndim, ndim, shape == NULL ? " (shape is NULL)" : "");
    int64_t s[DT_MAX_DIMS], st[DT_MAX_DIMS];
    int lead = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        int64_t want = shape[i];
        if (i < lead) {
            if (want < 0)
                return DT_ERR(DT_ERR_INVALID_ARG,
                              "dt_tensor_expand: new leading dim %d has "
                              "size %" PRId64,
                              i, want);
            s[i] = want;
            st[i] = 0;
            continue;
        }
        int64_t have = t->shape[i - lead];
        if (want == -1 || want == have) {
            s[i] = have;
            st[i] = t->strides[i - lead];
        } else if (have == 1 && want >= 0) {
            s[i] = want;
            st[i] = 0;
        } else {
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_tensor_expand: dim %d of size %" PRId64 " cannot expand to %" PRId64
                          " (shape %s to %s)",
                          i - lead, have, want, dt__shape_str(t->ndim, t->shape, b1, sizeof(b1)),
                          dt__shape_str(ndim, shape, b2, sizeof(b2)));
        }
    }
    DT_CHECK(dt__check_shape(__func__, ndim, s));
    return dt__tensor_make_view(t, ndim, s, st, t->offset, out);
}

dt_status dt_tensor_unsqueeze(dt_tensor *t, int dim, dt_tensor **out)
{
    DT_ARG_NOT_NULL(out);
    DT_CHECK(dt__check_local_tensor(__func__, "t", t));
    if (t->ndim >= DT_MAX_DIMS)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_tensor_unsqueeze: a %d-dim tensor has no room for "
                      "another dim",
                      t->ndim);
    int d = 0;
    DT_CHECK(dt__wrap_dim(__func__, dim, t->ndim + 1, &d));
    int64_t s[DT_MAX_DIMS], st[DT_MAX_DIMS];
    for (int i = 0, j = 0; i <= t->ndim; i++) {
        if (i == d) {
            s[i] = 1;
            st[i] = d < t->ndim ? t->shape[d] * t->strides[d] : 1;
        } else {
            s[i] = t->shape[j];
            st[i] = t->strides[j];
            j++;
        }
    }
    return dt__tensor_make_view(t, t->ndim + 1, s, st, t->offset, out);
}

dt_status dt_tensor_squeeze(dt_tensor *t, int dim, dt_tensor **out)
{
    DT_ARG_NOT_NULL(out);
    DT_CHECK(dt__check_local_tensor(__func__, "t", t));
    int d = 0;
    DT_CHECK(dt__wrap_dim(__func__, dim, t->ndim, &d));
    if (t->shape[d] != 1)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_tensor_squeeze: dim %d has size %" PRId64 ", not 1",
                      dim, t->shape[d]);
    int64_t s[DT_MAX_DIMS], st[DT_MAX_DIMS];
    for (int i = 0, j = 0; i < t->ndim; i++) {
        if (i == d)
            continue;
        s[j] = t->shape[i];
        st[j] = t->strides[i];
        j++;
    }
    return dt__tensor_make_view(t, t->ndim - 1, s, st, t->offset, out);
}
