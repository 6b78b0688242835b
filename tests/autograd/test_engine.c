/*
 * The autograd engine: accumulation over backward passes, consumed graphs,
 * no-grad scope (per thread), detach, freeing of activations (memory stats),
 * diamond graphs, and bad input on every public call.
 */
#include <pthread.h>

#include "ag_test_util.h"
#include "core/tensor_impl.h"
#include "ops/dist_dispatch.h"

static int64_t s23[2] = {2, 3};

static dt_tensor *leaf(int nd, const int64_t *s)
{
    dt_tensor *t = ag_rand_tensor(nd, s, -1, 1);
    AG_OK(dt_tensor_set_requires_grad(t, true));
    return t;
}

/* loss = sum(x * 3) */
static dt_tensor *loss_of(dt_tensor *x)
{
    dt_tensor *y = NULL, *l = NULL;
    AG_OK(dt_scale(x, 3.0, &y));
    AG_OK(dt_sum_all(y, &l));
    dt_tensor_release(y);
    return l;
}

static void expect_grad_all(dt_tensor *x, double v)
{
    dt_tensor *g = dt_tensor_grad(x);
    assert_non_null(g);
    for (int64_t i = 0; i < dt_tensor_numel(x); i++)
        assert_true(fabs(dt_tensor_item_at(g, i) - v) < 1e-6);
}

static void test_accumulates_over_two_backwards(void **state)
{
    (void)state;
    dt_tensor *x = leaf(2, s23);
    dt_memory_stats st;
    for (int pass = 1; pass <= 2; pass++) {
        dt_tensor *l = loss_of(x);
        AG_OK(dt_backward(l, NULL));
        expect_grad_all(x, 3.0 * pass);
        dt_tensor_release(l);
    }
    AG_OK(dt_memory_stats_get(dt_device_cpu(), &st));
    assert_true(st.current[DT_MEM_GRADIENT] >= (int64_t)(6 * sizeof(float)));
    assert_int_equal(dt_tensor_mem_category(dt_tensor_grad(x)), DT_MEM_GRADIENT);
    dt_tensor *y = NULL;
    AG_OK(dt_scale(x, 2.0, &y));
    assert_int_equal(dt_tensor_mem_category(y), DT_MEM_ACTIVATION);
    dt_tensor_release(y);
    AG_OK(dt_tensor_set_grad(x, NULL)); /* zero_grad */
    assert_null(dt_tensor_grad(x));
    dt_tensor_release(x);
}

static void test_second_backward_is_an_error(void **state)
{
    (void)state;
    dt_tensor *x = leaf(2, s23), *l = loss_of(x);
    AG_OK(dt_backward(l, NULL));
    assert_int_equal(dt_backward(l, NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "consumed"));
    expect_grad_all(x, 3.0); /* the failed call changed nothing */
    dt_tensor_release(l);
    dt_tensor_release(x);
}

static void test_diamond(void **state)
{
    (void)state;
    /* h = relu(x); y = sum(2h + 3h): dy/dx = 5 where x > 0 */
    dt_tensor *x = leaf(2, s23), *h = NULL, *u = NULL, *v = NULL, *w = NULL, *l = NULL;
    AG_OK(dt_relu(x, &h));
    AG_OK(dt_scale(h, 2.0, &u));
    AG_OK(dt_scale(h, 3.0, &v));
    AG_OK(dt_add(u, v, &w));
    AG_OK(dt_sum_all(w, &l));
    AG_OK(dt_backward(l, NULL));
    dt_tensor *g = dt_tensor_grad(x);
    for (int i = 0; i < 6; i++)
        assert_true(fabs(dt_tensor_item_at(g, i) - (dt_tensor_item_at(x, i) > 0 ? 5.0 : 0.0)) <
                    1e-6);
    dt_tensor *ts[6] = {x, h, u, v, w, l};
    ag_release_all(6, ts);
}

static void test_no_grad_records_nothing(void **state)
{
    (void)state;
    dt_tensor *x = leaf(2, s23), *y = NULL;
    assert_true(dt_grad_is_enabled());
    assert_true(dt_grad_set_enabled(false));
    assert_false(dt_grad_is_enabled());
    AG_OK(dt_mul(x, x, &y));
    assert_false(dt_tensor_requires_grad(y));
    assert_int_equal(dt_backward(y, NULL), DT_ERR_INVALID_ARG);
    assert_false(dt_grad_set_enabled(true));
    dt_tensor_release(y);
    AG_OK(dt_mul(x, x, &y));
    assert_true(dt_tensor_requires_grad(y));
    dt_tensor_release(y);
    dt_tensor_release(x);
}

static void *thread_grad_mode(void *arg)
{
    *(bool *)arg = dt_grad_is_enabled();
    return NULL;
}

static void test_grad_mode_is_per_thread(void **state)
{
    (void)state;
    bool seen = false;
    pthread_t th;
    dt_grad_set_enabled(false);
    assert_int_equal(pthread_create(&th, NULL, thread_grad_mode, &seen), 0);
    pthread_join(th, NULL);
    dt_grad_set_enabled(true);
    assert_true(seen);
}

static void test_detach(void **state)
{
    (void)state;
    dt_tensor *x = leaf(2, s23), *y = NULL, *d = NULL, *z = NULL;
    AG_OK(dt_scale(x, 2.0, &y));
    AG_OK(dt_tensor_detach(y, &d));
    assert_false(dt_tensor_requires_grad(d));
    assert_ptr_equal(dt_tensor_data(d), dt_tensor_data(y)); /* same data */
    AG_OK(dt_mul(d, d, &z));
    assert_false(dt_tensor_requires_grad(z));
    assert_int_equal(dt_tensor_set_requires_grad(y, false), DT_ERR_INVALID_ARG); /* non-leaf */
    dt_tensor *ts[4] = {x, y, d, z};
    ag_release_all(4, ts);
}

static void test_backward_on_leaf_and_with_grad(void **state)
{
    (void)state;
    dt_tensor *x = leaf(2, s23), *g = ag_rand_tensor(2, s23, -1, 1), *y = NULL;
    AG_OK(dt_backward(x, g)); /* a leaf root: its grad is the seed */
    for (int i = 0; i < 6; i++)
        assert_true(dt_tensor_item_at(dt_tensor_grad(x), i) == dt_tensor_item_at(g, i));
    AG_OK(dt_tensor_set_grad(x, NULL));
    AG_OK(dt_scale(x, -1.0, &y));
    AG_OK(dt_backward(y, g)); /* non-scalar root with an explicit gradient */
    for (int i = 0; i < 6; i++)
        assert_true(dt_tensor_item_at(dt_tensor_grad(x), i) == -dt_tensor_item_at(g, i));
    dt_tensor *ts[3] = {x, g, y};
    ag_release_all(3, ts);
}

/* A small transformer-ish block: every saved activation must be gone after backward. */
static void test_activations_freed(void **state)
{
    (void)state;
    int64_t sx[3] = {4, 8, 32}, sw[2] = {32, 32}, sb[1] = {32}, si[2] = {4, 8};
    int64_t tv[32];
    for (int i = 0; i < 32; i++)
        tv[i] = i % 7 == 0 ? -100 : i % 32;
    dt_tensor *w = leaf(2, sw), *b = leaf(1, sb), *lw = leaf(1, sb);
    dt_tensor *tg = ag_ids(2, si, DT_DTYPE_I64, tv);
    dt_memory_stats st0, st1, st2, st3;
    dt_memory_empty_cache();
    AG_OK(dt_memory_stats_get(dt_device_cpu(), &st0));
    dt_tensor *x = ag_rand_tensor(3, sx, -1, 1);
    dt_tensor *h = NULL, *g = NULL, *n = NULL, *a = NULL, *sm = NULL, *c = NULL, *l = NULL;
    dt_tensor *xt = NULL;
    AG_OK(dt_linear(x, w, b, &h));
    AG_OK(dt_gelu_tanh(h, &g));
    AG_OK(dt_layer_norm(g, lw, NULL, 1e-5, &n));
    AG_OK(dt_transpose(n, 1, 2, &xt));
    AG_OK(dt_matmul(n, xt, false, false, &a));
    AG_OK(dt_causal_softmax(a, 0.125, &sm));
    AG_OK(dt_matmul(sm, n, false, false, &c));
    AG_OK(dt_cross_entropy(c, tg, -100, &l));
    dt_tensor *mid[8] = {x, h, g, n, xt, a, sm, c}; /* only the graph holds them now */
    ag_release_all(8, mid);
    AG_OK(dt_memory_stats_get(dt_device_cpu(), &st1));
    assert_true(st1.current[DT_MEM_ACTIVATION] - st0.current[DT_MEM_ACTIVATION] > 10000);
    AG_OK(dt_backward(l, NULL));
    AG_OK(dt_memory_stats_get(dt_device_cpu(), &st2));
    /* only the loss scalar is left */
    assert_true(st2.current[DT_MEM_ACTIVATION] - st0.current[DT_MEM_ACTIVATION] <= 64);
    assert_true(st2.current[DT_MEM_GRADIENT] - st0.current[DT_MEM_GRADIENT] >=
                (int64_t)(sizeof(float) * (32 * 32 + 32 + 32)));
    dt_tensor_release(l);
    AG_OK(dt_memory_stats_get(dt_device_cpu(), &st3));
    assert_int_equal(st3.current[DT_MEM_ACTIVATION], st0.current[DT_MEM_ACTIVATION]);
    assert_non_null(dt_tensor_grad(w));
    assert_non_null(dt_tensor_grad(b));
    assert_non_null(dt_tensor_grad(lw));
    dt_tensor *ts[4] = {w, b, lw, tg};
    ag_release_all(4, ts);
}

static void test_graph_released_without_backward(void **state)
{
    (void)state;
    dt_memory_stats st0, st1;
    AG_OK(dt_memory_stats_get(dt_device_cpu(), &st0));
    dt_tensor *x = leaf(2, s23), *y = NULL, *l = NULL;
    AG_OK(dt_gelu_tanh(x, &y));
    AG_OK(dt_sum_all(y, &l));
    dt_tensor_release(y);
    dt_tensor_release(l); /* drops the whole graph */
    AG_OK(dt_memory_stats_get(dt_device_cpu(), &st1));
    assert_int_equal(st1.current[DT_MEM_ACTIVATION], st0.current[DT_MEM_ACTIVATION]);
    dt_tensor_release(x);
}

/* Long chains: neither backward nor dropping an unused graph may recurse per node. */
static void test_long_chain(void **state)
{
    (void)state;
    int64_t one = 1;
    dt_tensor *x = leaf(1, &one);
    for (int pass = 0; pass < 2; pass++) {
        dt_tensor *y = dt_tensor_retain(x), *z = NULL;
        for (int i = 0; i < 200000; i++) {
            AG_OK(dt_add_scalar(y, 1e-3, &z));
            dt_tensor_release(y);
            y = z;
        }
        if (pass == 0) {
            AG_OK(dt_backward(y, NULL));
            assert_true(fabs(dt_tensor_item_at(dt_tensor_grad(x), 0) - 1.0) < 1e-6);
        }
        dt_tensor_release(y); /* pass 1: the whole unused chain goes here */
    }
    dt_tensor_release(x);
}

/* Empty tensors flow through forward and backward without touching memory. */
static void test_empty_tensors(void **state)
{
    (void)state;
    int64_t s03[2] = {0, 3}, s20[2] = {2, 0}, s43[2] = {4, 3}, s0[1] = {0};
    dt_tensor *a = NULL, *b = NULL, *w = leaf(2, s43), *ids = NULL, *y = NULL, *l = NULL;
    AG_OK(dt_tensor_zeros(2, s03, DT_DTYPE_F32, dt_device_cpu(), &a));
    AG_OK(dt_tensor_zeros(2, s20, DT_DTYPE_F32, dt_device_cpu(), &b));
    AG_OK(dt_tensor_zeros(1, s0, DT_DTYPE_I64, dt_device_cpu(), &ids));
    AG_OK(dt_tensor_set_requires_grad(a, true));
    AG_OK(dt_tensor_set_requires_grad(b, true));
    AG_OK(dt_matmul(b, a, false, false, &y)); /* K = 0: zeros [2, 3] */
    for (int i = 0; i < 6; i++)
        assert_true(dt_tensor_item_at(y, i) == 0.0);
    AG_OK(dt_sum_all(y, &l));
    AG_OK(dt_backward(l, NULL));
    assert_int_equal(dt_tensor_numel(dt_tensor_grad(a)), 0);
    dt_tensor_release(l);
    dt_tensor_release(y);
    AG_OK(dt_linear(a, w, NULL, &y));
    AG_OK(dt_sum_all(y, &l));
    AG_OK(dt_backward(l, NULL));
    assert_true(dt_tensor_item_at(dt_tensor_grad(w), 0) == 0.0);
    dt_tensor_release(l);
    dt_tensor_release(y);
    AG_OK(dt_embedding(w, ids, &y));
    assert_int_equal(dt_tensor_numel(y), 0);
    dt_tensor_release(y);
    AG_OK(dt_layer_norm(a, NULL, NULL, 1e-5, &y));
    dt_tensor_release(y);
    AG_OK(dt_softmax(b, -1, &y));
    dt_tensor_release(y);
    dt_tensor *ts[4] = {a, b, w, ids};
    ag_release_all(4, ts);
}

/* ------------------------------------------------------------ bad input */

#define EXPECT_INVALID(call, needle)                                                               \
    do {                                                                                           \
        dt_clear_error();                                                                          \
        dt_status s_ = (call);                                                                     \
        if (s_ != DT_ERR_INVALID_ARG)                                                              \
            fail_msg("%s returned %s, expected invalid argument", #call, dt_status_str(s_));       \
        if (strstr(dt_last_error(), (needle)) == NULL)                                             \
            fail_msg("%s: message '%s' lacks '%s'", #call, dt_last_error(), (needle));             \
    } while (0)

static void test_bad_input(void **state)
{
    (void)state;
    int64_t s4[1] = {4}, s34[2] = {3, 4}, s22[2] = {2, 2}, sz[3] = {2, 1, 3};
    int64_t ids_bad[2] = {1, 9}, sizes[2] = {1, 1}, tv[2] = {0, 7};
    dt_tensor *a = ag_rand_tensor(2, s23, -1, 1), *b = ag_rand_tensor(1, s4, -1, 1);
    dt_tensor *w = ag_rand_tensor(2, s34, -1, 1), *y = NULL, *outs[2] = {NULL, NULL};
    dt_tensor *ii = ag_ids(1, s22, DT_DTYPE_I64, ids_bad), *tg = ag_ids(1, s22, DT_DTYPE_I64, tv);
    dt_tensor *ai = NULL, *z3 = ag_rand_tensor(3, sz, -1, 1);
    AG_OK(dt_tensor_zeros(2, s23, DT_DTYPE_I64, dt_device_cpu(), &ai));
    EXPECT_INVALID(dt_add(NULL, a, &y), "dt_add");
    EXPECT_INVALID(dt_add(a, NULL, &y), "'b' is NULL");
    EXPECT_INVALID(dt_mul(a, a, NULL), "'out' is NULL");
    EXPECT_INVALID(dt_add(a, b, &y), "do not broadcast");
    EXPECT_INVALID(dt_sub(a, ai, &y), "dtype i64");
    EXPECT_INVALID(dt_relu(ai, &y), "dt_relu");
    dt_tensor *bf = NULL;
    AG_OK(dt_tensor_zeros(2, s23, DT_DTYPE_BF16, dt_device_cpu(), &bf));
    EXPECT_INVALID(dt_gelu_tanh(bf, &y), "dtype bf16, expected f32");
    EXPECT_INVALID(dt_matmul(a, bf, false, true, &y), "dtype bf16");
    dt_tensor_release(bf);
    EXPECT_INVALID(dt_scale(NULL, 2.0, &y), "dt_scale");
    EXPECT_INVALID(dt_masked_fill(a, a, 0.0, &y), "mask has dtype f32");
    EXPECT_INVALID(dt_matmul(a, a, false, false, &y), "inner dims differ");
    EXPECT_INVALID(dt_matmul(b, a, false, false, &y), ">= 2 dims");
    EXPECT_INVALID(dt_linear(a, w, NULL, &y), "do not fit");
    EXPECT_INVALID(dt_linear(b, w, w, &y), "bias shape");
    EXPECT_INVALID(dt_softmax(a, 2, &y), "dim 2 out of range");
    EXPECT_INVALID(dt_causal_softmax(b, 1.0, &y), ">= 2 dims");
    EXPECT_INVALID(dt_layer_norm(a, b, NULL, 1e-5, &y), "weight shape");
    EXPECT_INVALID(dt_embedding(w, ii, &y), "ids[1] = 9");
    EXPECT_INVALID(dt_embedding(w, a, &y), "expected i32, i64 or u16");
    EXPECT_INVALID(dt_cross_entropy(z3, tg, -100, &y), "do not match");
    EXPECT_INVALID(dt_cross_entropy(w, tg, -100, &y), "do not match");
    EXPECT_INVALID(dt_sum(a, -3, false, &y), "dim -3");
    EXPECT_INVALID(dt_max(NULL, 0, false, &y), "dt_max");
    EXPECT_INVALID(dt_sum_all(a, NULL), "'out' is NULL");
    EXPECT_INVALID(dt_reshape(a, 2, s34, &y), "dt_tensor_reshape");
    EXPECT_INVALID(dt_transpose(a, 0, 5, &y), "dim 5");
    EXPECT_INVALID(dt_narrow(a, 1, 2, 5, &y), "dt_tensor_narrow");
    EXPECT_INVALID(dt_concat(0, NULL, 0, &y), "dt_concat");
    dt_tensor *pair[2] = {a, w};
    EXPECT_INVALID(dt_concat(2, pair, 0, &y), "does not match");
    EXPECT_INVALID(dt_split(a, 1, 2, sizes, outs), "sum to 2");
    EXPECT_INVALID(dt_tensor_set_requires_grad(ai, true), "floats only");
    EXPECT_INVALID(dt_tensor_set_requires_grad(NULL, true), "NULL");
    EXPECT_INVALID(dt_tensor_set_grad(a, b), "grad shape");
    EXPECT_INVALID(dt_backward(NULL, NULL), "NULL");
    EXPECT_INVALID(dt_backward(a, NULL), "does not require grad");
    AG_OK(dt_tensor_set_requires_grad(a, true));
    EXPECT_INVALID(dt_backward(a, NULL), "pass a gradient");
    EXPECT_INVALID(dt_backward(a, b), "differs from root shape");
    EXPECT_INVALID(dt_tensor_detach(NULL, &y), "NULL");
    assert_null(y);
    assert_null(outs[0]);
    AG_OK(dt_tensor_set_requires_grad(a, false));
    /* targets out of range name the value; ignore_index is skipped */
    int64_t sl[2] = {2, 5};
    dt_tensor *lg = ag_rand_tensor(2, sl, -1, 1);
    EXPECT_INVALID(dt_cross_entropy(lg, tg, -100, &y), "targets[1] = 7");
    dt_tensor *ts[8] = {a, b, w, ii, tg, ai, z3, lg};
    ag_release_all(8, ts);
}

static void test_distributed_inputs_go_through_one_hook(void **state)
{
    (void)state;
    dt_tensor *a = ag_rand_tensor(2, s23, -1, 1), *y = NULL;
    int dummy = 0;
    /* a rules table without entries: every op must consult it and fail by name */
    static const dt_dist_op_table empty = {0};
    dt__ops_set_dist_table(&empty);
    a->dist = (struct dt_spec *)&dummy; /* only the pointer is looked at */
    assert_int_equal(dt_add(a, a, &y), DT_ERR_UNSUPPORTED);
    assert_non_null(strstr(dt_last_error(), "dt_add"));
    assert_int_equal(dt_softmax(a, -1, &y), DT_ERR_UNSUPPORTED);
    assert_non_null(strstr(dt_last_error(), "dt_softmax"));
    assert_int_equal(dt_linear(a, a, NULL, &y), DT_ERR_UNSUPPORTED);
    assert_non_null(strstr(dt_last_error(), "dt_linear"));
    /* no table at all (placement installs it with its first distributed
     * tensor): the op still fails by name instead of running on the handle */
    dt__ops_set_dist_table(NULL);
    assert_int_equal(dt_add(a, a, &y), DT_ERR_UNSUPPORTED);
    assert_non_null(strstr(dt_last_error(), "dt_add: a distributed input and no sharding rules"));
    a->dist = NULL;
    assert_null(y);
    dt_tensor_release(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accumulates_over_two_backwards),
        cmocka_unit_test(test_second_backward_is_an_error),
        cmocka_unit_test(test_diamond),
        cmocka_unit_test(test_no_grad_records_nothing),
        cmocka_unit_test(test_grad_mode_is_per_thread),
        cmocka_unit_test(test_detach),
        cmocka_unit_test(test_backward_on_leaf_and_with_grad),
        cmocka_unit_test(test_activations_freed),
        cmocka_unit_test(test_graph_released_without_backward),
        cmocka_unit_test(test_long_chain),
        cmocka_unit_test(test_empty_tensors),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_distributed_inputs_go_through_one_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
