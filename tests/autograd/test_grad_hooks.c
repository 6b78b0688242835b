/*
 * dt_tensor_register_post_accumulate_grad_hook: each hook runs once per
 * backward, when its leaf's gradient is complete (every edge delivered) and
 * before the rest of backward; in registration order; its error fails
 * dt_backward; bad registrations are refused; free_user runs with the tensor.
 * Gradient hooks on op outputs run once, before the op's backward, and go
 * with the graph; end-of-pass callbacks run after every leaf's gradient.
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

/* ---------------------------------------------------------------- gradient hooks on op outputs */

typedef struct out_record {
    int calls, freed;
    double grad_sum;  /* of the gradient it got */
    dt_tensor *below; /* a leaf behind the hooked tensor */
    bool below_had;   /* whether it had a gradient already */
} out_record;

static dt_status out_hook(dt_tensor *grad, void *user)
{
    out_record *r = user;
    r->calls++;
    r->grad_sum = sum_of(grad);
    r->below_had = dt_tensor_grad(r->below) != NULL;
    return DT_OK;
}

static void out_free(void *user)
{
    ((out_record *)user)->freed++;
}

/* loss = sum(c * (a * b)): the hook on t = a * b runs once with dloss/dt = c,
 * before mul's backward gives a its gradient, also after t's handle went. */
static void test_tensor_hook(void **state)
{
    (void)state;
    int64_t s[1] = {4};
    dt_tensor *a = ag_rand_tensor(1, s, -1, 1), *b = ag_rand_tensor(1, s, -1, 1);
    dt_tensor *c = ag_rand_tensor(1, s, -1, 1), *t = NULL, *y = NULL, *loss = NULL;
    assert_int_equal(dt_tensor_set_requires_grad(a, true), DT_OK);
    assert_int_equal(dt_tensor_register_hook(a, out_hook, NULL, NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "a leaf"));
    assert_int_equal(dt_tensor_register_hook(b, out_hook, NULL, NULL), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_mul(a, b, &t), DT_OK);
    out_record r = {.below = a};
    assert_int_equal(dt_tensor_register_hook(t, out_hook, &r, out_free), DT_OK);
    assert_int_equal(dt_mul(c, t, &y), DT_OK);
    assert_int_equal(dt_sum_all(y, &loss), DT_OK);
    dt_tensor_release(t); /* the hook stays with the graph */
    assert_int_equal(dt_backward(loss, NULL), DT_OK);
    assert_int_equal(r.calls, 1);
    assert_false(r.below_had);
    assert_true(fabs(r.grad_sum - sum_of(c)) < 1e-6);
    assert_int_equal(r.freed, 1); /* it ran: gone with its node */
    assert_int_equal(dt_tensor_register_hook(loss, out_hook, &r, NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "consumed"));
    dt_tensor *objs[] = {a, b, c, y, loss};
    ag_release_all(5, objs);
    /* a graph freed without backward frees its hooks without running them */
    out_record q = {.below = a};
    a = ag_rand_tensor(1, s, -1, 1);
    q.below = a;
    assert_int_equal(dt_tensor_set_requires_grad(a, true), DT_OK);
    assert_int_equal(dt_scale(a, 3.0, &t), DT_OK);
    assert_int_equal(dt_tensor_register_hook(t, out_hook, &q, out_free), DT_OK);
    dt_tensor_release(t);
    assert_int_equal(q.calls, 0);
    assert_int_equal(q.freed, 1);
    dt_tensor_release(a);
}

/* ---------------------------------------------------------------- end-of-pass callbacks */

typedef struct pass_record {
    int calls, freed, clock_then;
    int *clock;
    dt_tensor *leaves[2];
    bool all_had; /* every leaf had its gradient when the callback ran */
    bool fail;
} pass_record;

static dt_status at_end(void *user)
{
    pass_record *p = user;
    p->calls++;
    p->clock_then = *p->clock;
    p->all_had = dt_tensor_grad(p->leaves[0]) != NULL && dt_tensor_grad(p->leaves[1]) != NULL;
    return p->fail ? dt_set_error(DT_ERR_INVALID_ARG, "the callback refused") : DT_OK;
}

static void pass_free(void *user)
{
    ((pass_record *)user)->freed++;
}

/* a post-accumulate-grad hook that queues at_end */
static dt_status queue_hook(dt_tensor *t, void *user)
{
    (void)t;
    pass_record *p = user;
    ++*p->clock;
    return dt_backward_queue_callback(at_end, p, pass_free);
}

/* Queued from the hook of the leaf completed first (c), the callback runs
 * once, after every leaf's gradient and every hook; its error fails the pass. */
static void test_queue_callback(void **state)
{
    (void)state;
    assert_int_equal(dt_backward_queue_callback(at_end, NULL, NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "no backward pass"));
    int64_t s[1] = {3};
    for (int fail = 0; fail <= 1; fail++) {
        dt_tensor *a = ag_rand_tensor(1, s, -1, 1), *c = ag_rand_tensor(1, s, -1, 1);
        dt_tensor *t = NULL, *y = NULL, *loss = NULL;
        assert_int_equal(dt_tensor_set_requires_grad(a, true), DT_OK);
        assert_int_equal(dt_tensor_set_requires_grad(c, true), DT_OK);
        int clock = 0;
        record ra = {.clock = &clock};
        pass_record p = {.clock = &clock, .leaves = {a, c}, .fail = fail};
        assert_int_equal(dt_tensor_register_post_accumulate_grad_hook(c, queue_hook, &p, NULL),
                         DT_OK);
        assert_int_equal(dt_tensor_register_post_accumulate_grad_hook(a, hook, &ra, NULL), DT_OK);
        assert_int_equal(dt_mul(a, a, &t), DT_OK);
        assert_int_equal(dt_mul(c, t, &y), DT_OK);
        assert_int_equal(dt_sum_all(y, &loss), DT_OK);
        assert_int_equal(dt_backward(loss, NULL), fail ? DT_ERR_INVALID_ARG : DT_OK);
        assert_int_equal(p.calls, 1);
        assert_int_equal(p.freed, 1);
        assert_true(p.all_had);
        assert_int_equal(p.clock_then, 2); /* c's hook, then a's, then the callback */
        assert_int_equal(ra.calls, 1);     /* a is used twice: one call, the sum */
        assert_int_equal(ra.order, 2);
        if (fail)
            assert_non_null(strstr(dt_last_error(), "the callback refused"));
        dt_tensor *objs[] = {a, c, t, y, loss};
        ag_release_all(5, objs);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_complete_and_early), cmocka_unit_test(test_errors_and_free),
        cmocka_unit_test(test_leaf_root),          cmocka_unit_test(test_tensor_hook),
        cmocka_unit_test(test_queue_callback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
