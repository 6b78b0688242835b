/*
 * dt_tensor_register_post_accumulate_grad_hook: each hook runs once per
 * backward, when its leaf's gradient is complete (every edge delivered) and
 * before the rest of backward; in registration order; its error fails
 * dt_backward; bad registrations are refused; free_user runs with the tensor.
 */
#include "ag_test_util.h"

typedef struct record {
    int calls;
    double grad_sum;   /* of the gradient when the hook ran */
    dt_tensor *other;  /* a leaf deeper in the graph */
    bool other_had;    /* whether it had a gradient already then */
    int order, *clock; /* when it ran, on a shared counter */
} record;

static double sum_of(const dt_tensor *t)
{
    double s = 0;
    for (int64_t i = 0; i < dt_tensor_numel(t); i++)
        s += dt_tensor_item_at(t, i);
    return s;
}

static dt_status hook(dt_tensor *t, void *user)
{
    record *r = user;
    r->calls++;
    r->grad_sum = sum_of(dt_tensor_grad(t));
    r->other_had = r->other != NULL && dt_tensor_grad(r->other) != NULL;
    r->order = ++*r->clock;
    return DT_OK;
}

static dt_status failing_hook(dt_tensor *t, void *user)
{
    (void)t, (void)user;
    return dt_set_error(DT_ERR_INVALID_ARG, "the hook refused");
}

static int freed;
static void count_free(void *user)
{
    (void)user;
    freed++;
}

/* loss = sum(c * (a * b + a)): a has two edges, c is next to the root. */
static void test_complete_and_early(void **state)
{
    (void)state;
    int64_t s[1] = {5};
    dt_tensor *a = ag_rand_tensor(1, s, -1, 1), *b = ag_rand_tensor(1, s, -1, 1);
    dt_tensor *c = ag_rand_tensor(1, s, -1, 1);
    dt_tensor *leaves[3] = {a, b, c};
    for (int i = 0; i < 3; i++)
        assert_int_equal(dt_tensor_set_requires_grad(leaves[i], true), DT_OK);
    int clock = 0;
    record ra = {.clock = &clock}, ra2 = {.clock = &clock}, rb = {.clock = &clock};
    record rc = {.other = a, .clock = &clock};
    assert_int_equal(dt_tensor_register_post_accumulate_grad_hook(a, hook, &ra, NULL), DT_OK);
    assert_int_equal(dt_tensor_register_post_accumulate_grad_hook(a, hook, &ra2, NULL), DT_OK);
    assert_int_equal(dt_tensor_register_post_accumulate_grad_hook(b, hook, &rb, NULL), DT_OK);
    assert_int_equal(dt_tensor_register_post_accumulate_grad_hook(c, hook, &rc, NULL), DT_OK);
    dt_tensor *ab = NULL, *t = NULL, *y = NULL, *loss = NULL;
    assert_int_equal(dt_mul(a, b, &ab), DT_OK);
    assert_int_equal(dt_add(ab, a, &t), DT_OK);
    assert_int_equal(dt_mul(c, t, &y), DT_OK);
    assert_int_equal(dt_sum_all(y, &loss), DT_OK);
    assert_int_equal(dt_backward(loss, NULL), DT_OK);
    assert_int_equal(ra.calls, 1);
    assert_int_equal(ra2.calls, 1);
    assert_int_equal(rb.calls, 1);
    assert_int_equal(rc.calls, 1);
    /* each hook saw its final gradient: a's is the sum of both edges */
    assert_true(fabs(ra.grad_sum - sum_of(dt_tensor_grad(a))) < 1e-6);
    assert_true(fabs(rb.grad_sum - sum_of(dt_tensor_grad(b))) < 1e-6);
    /* c's gradient was complete first: its hook ran before a had any */
    assert_false(rc.other_had);
    assert_true(rc.order < ra.order);
    assert_int_equal(ra2.order, ra.order + 1); /* registration order */
    dt_tensor *objs[] = {a, b, c, ab, t, y, loss};
    ag_release_all(7, objs);
}

static void test_errors_and_free(void **state)
{
    (void)state;
    int64_t s[1] = {3};
    dt_tensor *a = ag_rand_tensor(1, s, -1, 1), *plain = ag_rand_tensor(1, s, -1, 1);
    dt_tensor *y = NULL, *loss = NULL;
    assert_int_equal(dt_tensor_register_post_accumulate_grad_hook(plain, hook, NULL, NULL),
                     DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "a leaf that does not require grad"));
    assert_int_equal(dt_tensor_set_requires_grad(a, true), DT_OK);
    assert_int_equal(dt_scale(a, 2.0, &y), DT_OK);
    assert_int_equal(dt_tensor_register_post_accumulate_grad_hook(y, hook, NULL, NULL),
                     DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "not a leaf"));
    assert_int_equal(dt_tensor_register_post_accumulate_grad_hook(a, NULL, NULL, NULL),
                     DT_ERR_INVALID_ARG);
    freed = 0;
    assert_int_equal(
        dt_tensor_register_post_accumulate_grad_hook(a, failing_hook, NULL, count_free), DT_OK);
    assert_int_equal(dt_sum_all(y, &loss), DT_OK);
    assert_int_equal(dt_backward(loss, NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "the hook refused"));
    dt_tensor *objs[] = {plain, y, loss};
    ag_release_all(3, objs);
    assert_int_equal(freed, 0);
    dt_tensor_release(a); /* the last reference: the hook's user data goes with it */
    assert_int_equal(freed, 1);
}

/* Backward from a leaf itself: its hook runs too. */
static void test_leaf_root(void **state)
{
    (void)state;
    int64_t s[1] = {1};
    dt_tensor *a = ag_rand_tensor(1, s, -1, 1);
    assert_int_equal(dt_tensor_set_requires_grad(a, true), DT_OK);
    int clock = 0;
    record r = {.clock = &clock};
    assert_int_equal(dt_tensor_register_post_accumulate_grad_hook(a, hook, &r, NULL), DT_OK);
    assert_int_equal(dt_backward(a, NULL), DT_OK);
    assert_int_equal(r.calls, 1);
    assert_true(fabs(r.grad_sum - 1.0) < 1e-12);
    dt_tensor_release(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_complete_and_early),
        cmocka_unit_test(test_errors_and_free),
        cmocka_unit_test(test_leaf_root),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
