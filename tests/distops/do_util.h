/*
 * Harness for the distributed-op tests: every rank builds the same full
 * inputs from a seed, runs an op once on distributed inputs and once locally
 * on the full tensors, and compares the full result and the gradients of the
 * inputs (each rank's shard of the reference gradient, Partial read as
 * Replicate) after backward through both from loss = sum(y * c). The
 * runtime (mr_rt, mr_setup) and the host/device copies are common/multirank.h's.
 */
#ifndef DT_TEST_DO_UTIL_H
#define DT_TEST_DO_UTIL_H

#include "common/multirank.h"

#define DO_OK(call) MR_OK(call)

#define DO_MAX_IN 6

static inline int do_world(void)
{
    return dt_runtime_size(mr_rt);
}

/* A 1-d mesh over the world. */
static inline dt_mesh *do_mesh1(void)
{
    dt_mesh *m = NULL;
    int w = do_world();
    DO_OK(dt_mesh_create(mr_rt, 1, &w, NULL, &m));
    return m;
}

/* A 2x2 mesh named dp x tp; skips the test unless the world is 4. */
static inline dt_mesh *do_mesh_2x2(void)
{
    if (do_world() != 4)
        skip();
    return mr_dp_tp_mesh(2, 2);
}

/* t[i] = v for a contiguous integer tensor on any device (through a host copy). */
static inline void do_set_int(dt_tensor *t, int64_t i, int64_t v)
{
    dt_tensor *h = mr_host(t);
    if (dt_tensor_dtype(h) == DT_DTYPE_U8)
        ((uint8_t *)dt_tensor_data(h))[i] = (uint8_t)v;
    else
        ((int64_t *)dt_tensor_data(h))[i] = v;
    DO_OK(dt_tensor_copy_(t, h));
    dt_tensor_release(h);
}

/* A full f32 tensor ~ N(0, std^2) from @p seed (the same on every rank), on the device. */
static inline dt_tensor *do_randn_std(int ndim, const int64_t *shape, double std, uint64_t seed)
{
    dt_tensor *t = NULL;
    DO_OK(dt_tensor_empty(ndim, shape, DT_DTYPE_F32, dt_device_cpu(), &t));
    DO_OK(dt_tensor_fill_normal(t, 0.0, std, seed, NULL, NULL));
    return mr_on_device(t);
}

/* A full f32 tensor ~ N(0, 1) from @p seed (the same on every rank). */
static inline dt_tensor *do_randn(int ndim, const int64_t *shape, uint64_t seed)
{
    return do_randn_std(ndim, shape, 1.0, seed);
}

/* Integer ids in [0, n) from @p seed, i64, on the device. */
static inline dt_tensor *do_ids(int ndim, const int64_t *shape, int64_t n, uint64_t seed)
{
    dt_tensor *u = NULL, *t = NULL;
    DO_OK(dt_tensor_empty(ndim, shape, DT_DTYPE_F32, dt_device_cpu(), &u));
    DO_OK(dt_tensor_fill_uniform(u, 0.0, (double)n, seed, NULL, NULL));
    DO_OK(dt_tensor_empty(ndim, shape, DT_DTYPE_I64, dt_device_cpu(), &t));
    const float *uf = dt_tensor_data(u);
    int64_t *tv = dt_tensor_data(t);
    for (int64_t i = 0; i < dt_tensor_numel(t); i++) {
        int64_t v = (int64_t)uf[i];
        tv[i] = v >= n ? n - 1 : v;
    }
    dt_tensor_release(u);
    return mr_on_device(t);
}

/* max |a - b| <= tol * max(max |b|, @p scale, 1e-3), the shapes equal. */
static inline void do_assert_close_scaled(dt_tensor *a, dt_tensor *b, double tol, double scale,
                                          const char *what)
{
    dt_tensor *ac = NULL, *bc = NULL;
    assert_int_equal(dt_tensor_ndim(a), dt_tensor_ndim(b));
    for (int d = 0; d < dt_tensor_ndim(a); d++)
        if (dt_tensor_shape(a)[d] != dt_tensor_shape(b)[d])
            fail_msg("%s: shape mismatch at dim %d: %lld vs %lld", what, d,
                     (long long)dt_tensor_shape(a)[d], (long long)dt_tensor_shape(b)[d]);
    ac = mr_host(a);
    bc = mr_host(b);
    const float *x = dt_tensor_data(ac), *y = dt_tensor_data(bc);
    double md = 0.0, mb = scale > 1e-3 ? scale : 1e-3;
    for (int64_t i = 0; i < dt_tensor_numel(ac); i++) {
        double dd = fabs((double)x[i] - (double)y[i]);
        if (!(dd <= md)) /* NaN-safe */
            md = dd;
        if (fabs((double)y[i]) > mb)
            mb = fabs((double)y[i]);
    }
    if (!(md <= tol * mb))
        fail_msg("%s: max abs diff %g exceeds %g (max |ref| %g)", what, md, tol * mb, mb);
    dt_tensor_release(ac);
    dt_tensor_release(bc);
}

/* max |a - b| <= tol * max(max |b|, 1e-3), the shapes equal. */
static inline void do_assert_close(dt_tensor *a, dt_tensor *b, double tol, const char *what)
{
    do_assert_close_scaled(a, b, tol, 0.0, what);
}

/* sum |a * b| of two f32 tensors of one shape: the scale of the rounding
 * error of sum(a * b), whatever its cancellation. */
static inline double do_sum_abs_product(dt_tensor *a, dt_tensor *b)
{
    dt_tensor *ac = mr_host(a), *bc = mr_host(b);
    const float *x = dt_tensor_data(ac), *y = dt_tensor_data(bc);
    double s = 0.0;
    for (int64_t i = 0; i < dt_tensor_numel(ac); i++)
        s += fabs((double)x[i] * (double)y[i]);
    dt_tensor_release(ac);
    dt_tensor_release(bc);
    return s;
}

/* This rank's slice of @p full under @p s with every Partial read as Replicate. */
static inline dt_tensor *do_grad_local(dt_tensor *full, const dt_spec *s)
{
    dt_placement pl[DT_MESH_MAX_DIMS];
    int mn = dt_mesh_ndim(dt_spec_mesh(s));
    int64_t ls[DT_MAX_DIMS], off[DT_MAX_DIMS];
    for (int k = 0; k < mn; k++) {
        pl[k] = dt_spec_placements(s)[k];
        if (pl[k].kind == DT_PLACEMENT_PARTIAL)
            pl[k] = dt_replicate();
    }
    int ms[DT_MESH_MAX_DIMS], coord[DT_MESH_MAX_DIMS];
    for (int k = 0; k < mn; k++)
        ms[k] = dt_mesh_dim_size(dt_spec_mesh(s), k);
    dt_mesh_coordinate(dt_spec_mesh(s), coord);
    DO_OK(dt_shard_local_shape(dt_spec_ndim(s), dt_spec_shape(s), mn, ms, pl, coord, ls, off));
    dt_tensor *cur = dt_tensor_retain(full), *next = NULL, *c = NULL;
    for (int d = 0; d < dt_spec_ndim(s); d++) {
        DO_OK(dt_tensor_narrow(cur, d, off[d], ls[d], &next));
        dt_tensor_release(cur);
        cur = next;
    }
    DO_OK(dt_tensor_clone(cur, &c));
    dt_tensor_release(cur);
    return c;
}

/* The op under test: on distributed inputs when @p dist (else local full ones). */
typedef dt_status (*do_op_fn)(dt_tensor *const *xs, bool dist, void *ctx, dt_tensor **out);

typedef struct do_case {
    const char *name;
    int n; /* float inputs */
    int ndim[DO_MAX_IN];
    int64_t shape[DO_MAX_IN][DT_MAX_DIMS];
    dt_placement pl[DO_MAX_IN][DT_MESH_MAX_DIMS];
    bool no_grad[DO_MAX_IN]; /* inputs that do not require grad */
    double std[DO_MAX_IN];   /* inputs ~ N(0, std^2); 0 means 1 */
    do_op_fn op;
    void *ctx;
    /* expected output placements (n_out_pl = 0: not checked) */
    int n_out_pl;
    dt_placement out_pl[DT_MESH_MAX_DIMS];
} do_case;

/*
 * Run @p c on @p mesh: forward distributed and local, compare full outputs,
 * backward from sum(y * c) both ways, compare every input's gradient shard.
 */
static inline void do_run(dt_mesh *mesh, const do_case *c, uint64_t seed)
{
    dt_tensor *ref[DO_MAX_IN] = {0}, *dx[DO_MAX_IN] = {0}, *yr = NULL, *yd = NULL, *yf = NULL;
    dt_tensor *w = NULL, *wd = NULL, *t = NULL, *lr = NULL, *ld = NULL, *lf = NULL;
    dt_placement r[DT_MESH_MAX_DIMS];
    int mn = dt_mesh_ndim(mesh);
    char msg[160];
    for (int k = 0; k < mn; k++)
        r[k] = dt_replicate();
    for (int i = 0; i < c->n; i++) {
        double std = c->std[i] > 0.0 ? c->std[i] : 1.0;
        dt_tensor *full = do_randn_std(c->ndim[i], c->shape[i], std, seed + (uint64_t)i * 7919);
        DO_OK(dt_tensor_clone(full, &ref[i]));
        DO_OK(dt_distribute(full, mesh, mn, c->pl[i], &dx[i]));
        dt_tensor_release(full);
        if (!c->no_grad[i]) {
            DO_OK(dt_tensor_set_requires_grad(ref[i], true));
            DO_OK(dt_tensor_set_requires_grad(dx[i], true));
        }
    }
    DO_OK(c->op(ref, false, c->ctx, &yr));
    DO_OK(c->op(dx, true, c->ctx, &yd));
    assert_non_null(dt_tensor_spec(yd));
    if (c->n_out_pl > 0) {
        for (int k = 0; k < mn; k++) {
            dt_placement want = c->out_pl[k], got = dt_tensor_placements(yd)[k];
            DO_OK(dt_placement_normalize(want, dt_tensor_ndim(yd), &want));
            if (!dt_placement_equal(want, got)) {
                char a[32], b[32];
                dt_placement_format(got, a, sizeof(a));
                dt_placement_format(want, b, sizeof(b));
                fail_msg("%s: output placement on mesh dim %d is %s, expected %s", c->name, k, a,
                         b);
            }
        }
    }
    DO_OK(dt_full_tensor(yd, &yf));
    snprintf(msg, sizeof(msg), "%s: forward", c->name);
    do_assert_close(yf, yr, 1e-5, msg);
    /* loss = sum(y * w) with a fixed random w; w's random signs make the sum
     * cancel, so its error is measured against sum |y * w|, not |loss| */
    w = do_randn(dt_tensor_ndim(yr), dt_tensor_shape(yr), seed + 424242);
    DO_OK(dt_distribute(w, mesh, mn, r, &wd));
    DO_OK(dt_mul(yr, w, &t));
    DO_OK(dt_sum_all(t, &lr));
    dt_tensor_release(t);
    DO_OK(dt_mul(yd, wd, &t));
    DO_OK(dt_sum_all(t, &ld));
    dt_tensor_release(t);
    DO_OK(dt_full_tensor(ld, &lf));
    snprintf(msg, sizeof(msg), "%s: loss", c->name);
    do_assert_close_scaled(lf, lr, 1e-5, do_sum_abs_product(yr, w), msg);
    if (dt_tensor_requires_grad(lr)) {
        DO_OK(dt_backward(lr, NULL));
        DO_OK(dt_backward(ld, NULL));
        for (int i = 0; i < c->n; i++) {
            if (c->no_grad[i])
                continue;
            dt_tensor *gr = dt_tensor_grad(ref[i]), *gd = dt_tensor_grad(dx[i]);
            snprintf(msg, sizeof(msg), "%s: grad of input %d", c->name, i);
            if (gr == NULL || gd == NULL)
                fail_msg("%s: missing (%p %p)", msg, (void *)gr, (void *)gd);
            dt_tensor *want = do_grad_local(gr, dt_tensor_spec(dx[i]));
            do_assert_close(gd, want, 1e-5, msg);
            dt_tensor_release(want);
        }
    }
    dt_tensor_release(lf);
    dt_tensor_release(ld);
    dt_tensor_release(lr);
    dt_tensor_release(wd);
    dt_tensor_release(w);
    dt_tensor_release(yf);
    dt_tensor_release(yd);
    dt_tensor_release(yr);
    for (int i = 0; i < c->n; i++) {
        dt_tensor_release(ref[i]);
        dt_tensor_release(dx[i]);
    }
}

/* Placement shorthands. */
#define S(d) dt_shard(d)
#define R    dt_replicate()
#define P    dt_partial(DT_REDUCE_OP_SUM)

#endif
