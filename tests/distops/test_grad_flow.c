/*
 * Pending Partial gradients through a node that accepts them: a sequence
 * all-gather (S(0) -> R) feeding three colwise linears. The three partial
 * gradients of the gathered input are added without communicating and the
 * gather's backward turns their sum into its S(0) gradient with ONE
 * reduce-scatter (no all-reduce), through dt__rl_grad_redistribute - and
 * the same through dt_redistribute's own node.
 */
#include "do_util.h"

#include "placement/rules/rules.h"

static dt_status gather_backward(dt_ag_node *node, dt_tensor *const *gy, dt_tensor **gx)
{
    const dt_spec *src = node->saved[0]->dist; /* x's layout */
    if (gy[0]->dist == NULL)
        return DT_ERR(DT_ERR_INTERNAL, "test: expected a pending distributed gradient");
    return dt__rl_grad_redistribute(gy[0], src, &gx[0]);
}

/* y = x gathered to Replicate; records a node that accepts distributed gradients. */
static dt_tensor *gather(dt_tensor *x)
{
    dt_placement r = dt_replicate();
    dt_tensor *y = NULL, *h = NULL, *yl = NULL;
    dt_ag_node *node = NULL;
    bool prev = dt_grad_set_enabled(false);
    DO_OK(dt_redistribute(x, 1, &r, &y));
    dt_grad_set_enabled(prev);
    DO_OK(dt__dist_wrap(x->dist, NULL, &h));
    DO_OK(dt__ag_node_create("test_gather", gather_backward, 1, &x->local, &node));
    node->saved[0] = h;
    node->n_saved = 1;
    node->accepts_dist_grad = true;
    DO_OK(dt__kt_alias(y->local, &yl));
    DO_OK(dt__ag_attach(node, 1, &yl));
    dt_tensor *out = NULL;
    DO_OK(dt__dist_wrap(y->dist, yl, &out));
    dt_tensor_release(yl);
    dt_tensor_release(y);
    return out;
}

static dt_tensor *qkv(dt_tensor *x, dt_tensor *const *w)
{
    dt_tensor *q = NULL, *k = NULL, *v = NULL, *a = NULL, *b = NULL, *l = NULL;
    DO_OK(dt_linear(x, w[0], NULL, &q));
    DO_OK(dt_linear(x, w[1], NULL, &k));
    DO_OK(dt_linear(x, w[2], NULL, &v));
    DO_OK(dt_mul(q, k, &a));
    DO_OK(dt_add(a, v, &b));
    DO_OK(dt_sum_all(b, &l));
    dt_tensor *all[] = {q, k, v, a, b};
    for (int i = 0; i < 5; i++)
        dt_tensor_release(all[i]);
    return l;
}

/* The same gather by dt_redistribute itself, whose node accepts pending
 * gradients and plans their reduction from their own spec. */
static dt_tensor *gather_redistribute(dt_tensor *x)
{
    dt_placement r = dt_replicate();
    dt_tensor *y = NULL;
    DO_OK(dt_redistribute(x, 1, &r, &y));
    return y;
}

static void check_reduce_scatters_once(dt_tensor *(*gather_fn)(dt_tensor *))
{
    dt_mesh *m = do_mesh1();
    int64_t sx[2] = {7, 8}, sw[2] = {6, 8};
    dt_placement s0 = dt_shard(0);
    dt_tensor *fx = do_randn(2, sx, 1), *rx = NULL, *x = NULL, *w[3], *rw[3];
    DO_OK(dt_tensor_clone(fx, &rx));
    DO_OK(dt_tensor_set_requires_grad(rx, true));
    DO_OK(dt_distribute(fx, m, 1, &s0, &x));
    DO_OK(dt_tensor_set_requires_grad(x, true));
    for (int i = 0; i < 3; i++) {
        dt_tensor *fw = do_randn(2, sw, 10 + (uint64_t)i);
        DO_OK(dt_tensor_clone(fw, &rw[i]));
        DO_OK(dt_distribute(fw, m, 1, &s0, &w[i]));
        dt_tensor_release(fw);
    }
    dt_tensor *xg = gather_fn(x), *l = qkv(xg, w), *lr = qkv(rx, rw);
    dt_coll_stats st;
    dt_mesh_coll_stats_reset(m);
    DO_OK(dt_backward(l, NULL));
    dt_mesh_coll_stats(m, &st);
    int w1 = do_world() > 1;
    assert_int_equal(st.count[DT_COLL_REDUCE_SCATTER], w1);
    assert_int_equal(dt_coll_stats_total(&st), w1);
    DO_OK(dt_backward(lr, NULL));
    dt_tensor *want = do_grad_local(dt_tensor_grad(rx), dt_tensor_spec(x));
    do_assert_close(dt_tensor_grad(x), want, 1e-5, "gathered input gradient");
    dt_tensor *all[] = {want, xg, l, lr, fx, rx, x, w[0], w[1], w[2], rw[0], rw[1], rw[2]};
    for (int i = 0; i < 13; i++)
        dt_tensor_release(all[i]);
    dt_mesh_release(m);
}

static void test_gather_backward_reduce_scatters_once(void **state)
{
    (void)state;
    check_reduce_scatters_once(gather);
}

static void test_redistribute_backward_reduce_scatters_once(void **state)
{
    (void)state;
    check_reduce_scatters_once(gather_redistribute);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gather_backward_reduce_scatters_once),
        cmocka_unit_test(test_redistribute_backward_reduce_scatters_once),
    };
    return cmocka_run_group_tests(tests, mr_setup, mr_teardown);
}
