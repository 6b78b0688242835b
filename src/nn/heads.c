/* Heads of attention: split, scaled dot product, merge (see heads.h). */
#include <inttypes.h>
#include <math.h>

#include "core/error.h"
#include "dtensor/ops.h"
#include "nn/heads.h"
#include "nn/module_impl.h"

dt_status dt__heads_split(const dt_module *m, const char *what, dt_tensor *x, int64_t head_dim,
                          dt_tensor **out)
{
    if (dt_tensor_ndim(x) != 3 || dt_tensor_dim(x, 2) % head_dim != 0)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s '%s': %s must be [B, T, heads*%" PRId64 "], got %d dims, last %" PRId64,
                      m->ops->type_name, m->name, what, head_dim, dt_tensor_ndim(x),
                      dt_tensor_dim(x, -1));
    int64_t shape[4] = {dt_tensor_dim(x, 0), dt_tensor_dim(x, 1), dt_tensor_dim(x, 2) / head_dim,
                        head_dim};
    static const int perm[4] = {0, 2, 1, 3};
    dt_tensor *r = NULL;
    DT_CHECK(dt_reshape(x, 4, shape, &r));
    dt_status s = dt_permute(r, perm, out);
    dt_tensor_release(r);
    return s;
}

dt_status dt__heads_merge(dt_tensor *o, dt_tensor **out)
{
    static const int perm[4] = {0, 2, 1, 3};
    int64_t shape[3] = {dt_tensor_dim(o, 0), dt_tensor_dim(o, 2),
                        dt_tensor_dim(o, 1) * dt_tensor_dim(o, 3)};
    dt_tensor *p = NULL, *c = NULL;
    dt_status s;
    DT_CHECK(dt_permute(o, perm, &p));
    DT_CHECK_GOTO(dt_contiguous(p, &c), s, out_release);
    s = dt_reshape(c, 3, shape, out);
out_release:
    dt_tensor_release(c);
    dt_tensor_release(p);
    return s;
}

dt_status dt__heads_attend(dt_tensor *qh, dt_tensor *kh, dt_tensor *vh, bool causal,
                           dt_tensor **out)
{
    dt_tensor *sc = NULL, *ss = NULL, *p = NULL;
    double scale = 1.0 / sqrt((double)dt_tensor_dim(qh, 3));
    dt_status s;
    DT_CHECK(dt_matmul(qh, kh, false, true, &sc));
    if (causal) {
        DT_CHECK_GOTO(dt_causal_softmax(sc, scale, &p), s, out_release);
    } else {
        DT_CHECK_GOTO(dt_scale(sc, scale, &ss), s, out_release);
        DT_CHECK_GOTO(dt_softmax(ss, -1, &p), s, out_release);
    }
    s = dt_matmul(p, vh, false, false, out);
out_release:
    dt_tensor_release(p);
    dt_tensor_release(ss);
    dt_tensor_release(sc);
    return s;
}
