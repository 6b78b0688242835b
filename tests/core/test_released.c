/*
 * Use after release is detected (issue 16 item 7): every public entry point
 * that returns a dt_status and takes a tensor or a mesh refuses a released
 * one with DT_ERR_INVALID_ARG naming the argument, and a second release or a
 * retain of a released handle does nothing. The handle's memory stays valid
 * (quarantined), so none of this reads freed memory (the sanitizer build runs
 * it too).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dtensor.h"

#define OK(call) assert_int_equal((call), DT_OK)

static dt_runtime *rt;
static dt_tensor *dead, *live, *ids, *out, *outs[2];
static dt_mesh *mesh, *dead_mesh;
static int failures; /* every refusal checked, then the count */

/* @p st must be DT_ERR_INVALID_ARG with a message naming argument @p arg as released. */
static void expect_refused(const char *call, dt_status st, const char *arg, const char *type)
{
    char want[96];
    snprintf(want, sizeof(want), "argument '%s' is a released %s", arg, type);
    if (st != DT_ERR_INVALID_ARG || strstr(dt_last_error(), want) == NULL || out != NULL) {
        print_error("%s: %s '%s', want DT_ERR_INVALID_ARG naming \"%s\"\n", call, dt_status_str(st),
                    dt_last_error(), want);
        failures++;
    }
}

#define DEAD(call, arg) (out = NULL, expect_refused(#call, (call), arg, "tensor"))

static int setup(void **state)
{
    (void)state;
    if (dt_init(NULL, &rt) != DT_OK)
        return -1;
    int64_t shape[2] = {4, 3}, n = 4;
    int one = 1;
    const char *names[1] = {"tp"};
    if (dt_tensor_zeros(2, shape, DT_DTYPE_F32, dt_device_cpu(), &dead) != DT_OK ||
        dt_tensor_zeros(2, shape, DT_DTYPE_F32, dt_device_cpu(), &live) != DT_OK ||
        dt_tensor_zeros(1, &n, DT_DTYPE_I64, dt_device_cpu(), &ids) != DT_OK ||
        dt_mesh_create(rt, 1, &one, names, &mesh) != DT_OK ||
        dt_mesh_create(rt, 1, &one, names, &dead_mesh) != DT_OK)
        return -1;
    dt_tensor_release(dead);
    dt_mesh_release(dead_mesh);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dt_tensor_release(live);
    dt_tensor_release(ids);
    dt_mesh_release(mesh);
    dt_runtime_destroy(rt);
    return 0;
}

static void test_tensor_calls(void **state)
{
    (void)state;
    int64_t shape[2] = {3, 4};
    int perm[2] = {1, 0};
    double v = 0.0;
    DEAD(dt_tensor_fill(dead, 1.0), "t");
    DEAD(dt_tensor_fill_normal(dead, 0.0, 1.0, 1, NULL, NULL), "t");
    DEAD(dt_tensor_fill_uniform(dead, 0.0, 1.0, 1, NULL, NULL), "t");
    DEAD(dt_tensor_item(dead, &v), "t");
    DEAD(dt_tensor_view(dead, 2, shape, &out), "t");
    DEAD(dt_tensor_reshape(dead, 2, shape, &out), "t");
    DEAD(dt_tensor_permute(dead, perm, &out), "t");
    DEAD(dt_tensor_transpose(dead, 0, 1, &out), "t");
    DEAD(dt_tensor_narrow(dead, 0, 0, 1, &out), "t");
    DEAD(dt_tensor_unsqueeze(dead, 0, &out), "t");
    DEAD(dt_tensor_squeeze(dead, 0, &out), "t");
    DEAD(dt_tensor_contiguous(dead, &out), "t");
    DEAD(dt_tensor_clone(dead, &out), "t");
    DEAD(dt_tensor_copy_(live, dead), "src");
    DEAD(dt_tensor_copy_(dead, live), "dst");
    DEAD(dt_tensor_to_dtype(dead, DT_DTYPE_F64, &out), "t");
    DEAD(dt_tensor_to_device(dead, dt_device_cpu(), &out), "t");
    DEAD(dt_tensor_set_requires_grad(dead, true), "t");
    DEAD(dt_tensor_set_grad(dead, NULL), "t");
    DEAD(dt_tensor_detach(dead, &out), "t");
    DEAD(dt_backward(dead, NULL), "root");
    assert_false(dt_tensor_equal(dead, live));
    /* a second release and a retain change nothing */
    dt_tensor_release(dead);
    assert_null(dt_tensor_retain(dead));
    assert_int_equal(failures, 0);
}

static void test_op_calls(void **state)
{
    (void)state;
    failures = 0;
    int64_t shape[2] = {3, 4};
    int perm[2] = {1, 0};
    dt_tensor *pair[2] = {live, dead};
    DEAD(dt_add(live, dead, &out), "b");
    DEAD(dt_sub(dead, live, &out), "a");
    DEAD(dt_mul(live, dead, &out), "b");
    DEAD(dt_div(dead, live, &out), "a");
    DEAD(dt_scale(dead, 2.0, &out), "x");
    DEAD(dt_add_scalar(dead, 2.0, &out), "x");
    DEAD(dt_gelu_tanh(dead, &out), "x");
    DEAD(dt_relu(dead, &out), "x");
    DEAD(dt_matmul(dead, live, false, true, &out), "a");
    DEAD(dt_linear(live, dead, NULL, &out), "w");
    DEAD(dt_softmax(dead, -1, &out), "x");
    DEAD(dt_causal_softmax(dead, 1.0, &out), "x");
    DEAD(dt_log_softmax(dead, -1, &out), "x");
    DEAD(dt_layer_norm(dead, NULL, NULL, 1e-5, &out), "x");
    DEAD(dt_embedding(dead, ids, &out), "weight");
    DEAD(dt_cross_entropy(dead, ids, -100, &out), "logits");
    DEAD(dt_sum(dead, 0, false, &out), "x");
    DEAD(dt_mean(dead, 0, false, &out), "x");
    DEAD(dt_max(dead, 0, false, &out), "x");
    DEAD(dt_sum_all(dead, &out), "x");
    DEAD(dt_reshape(dead, 2, shape, &out), "x");
    DEAD(dt_permute(dead, perm, &out), "x");
    DEAD(dt_transpose(dead, 0, 1, &out), "x");
    DEAD(dt_narrow(dead, 0, 0, 1, &out), "x");
    DEAD(dt_contiguous(dead, &out), "x");
    DEAD(dt_concat(2, pair, 0, &out), "xs[1]");
    DEAD(dt_split(dead, 0, 2, NULL, outs), "x");
    DEAD(dt_nn_cross_entropy(dead, ids, &out), "logits");
    assert_int_equal(failures, 0);
}

static void test_placement_calls(void **state)
{
    (void)state;
    failures = 0;
    dt_placement r = dt_replicate();
    double v = 0.0;
    DEAD(dt_distribute(dead, mesh, 1, &r, &out), "full");
    DEAD(dt_from_local(dead, mesh, 1, &r, (int64_t[]){4, 3}, &out), "local");
    DEAD(dt_redistribute(dead, 1, &r, &out), "t");
    DEAD(dt_full_tensor(dead, &out), "t");
    DEAD(dt_distribute_from(dead, 0, mesh, 1, &r, &out), "full");
    DEAD(dt_item(dead, &v), "t");
    expect_refused("dt_distribute(live, dead_mesh)", dt_distribute(live, dead_mesh, 1, &r, &out),
                   "mesh", "mesh");
    int d = -1;
    expect_refused("dt_mesh_dim_index", dt_mesh_dim_index(dead_mesh, "tp", &d), "mesh", "mesh");
    dt_mesh_release(dead_mesh); /* a second release: nothing */
    assert_null(dt_mesh_retain(dead_mesh));
    assert_int_equal(failures, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tensor_calls),
        cmocka_unit_test(test_op_calls),
        cmocka_unit_test(test_placement_calls),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
