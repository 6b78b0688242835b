/*
 * Data parallelism on autograd's public hooks, with a parameter used twice in
 * the forward (z = w·gelu(w·x), as a tied embedding and output head use
 * one tensor twice): the gradient is reduced once per backward, from the full
 * gradient (both uses), and equals the single-rank gradient of the global
 * batch (DDP, ZeRO-2, ZeRO-3). Post-accumulate-grad hooks a user registers on
 * a DDP parameter, before and after dt_ddp_apply, run once per backward next
 * to DDP's and see this rank's local gradient (both uses, not yet reduced);
 * after dt_backward the parameter holds the reduced one; once the model is
 * destroyed they are the parameter's only hooks. A frozen parameter is refused.
 * DDP's buckets are launched from the hooks while backward goes on.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp_util.h"

enum { B = 6, D = 5 }; /* the global batch splits evenly over 2 and 3 ranks */

/* The module: one parameter "w" [D, D] used twice. */
static dt_status twice_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    (void)n_in;
    dt_tensor *w = dt_module_param(m, "w"), *h = NULL, *a = NULL;
    DT_TRY_RETURN(dt_linear(in[0], w, NULL, &h));
    dt_status s = dt_gelu_tanh(h, &a);
    if (s == DT_OK)
        s = dt_linear(a, w, NULL, out);
    dt_tensor_release(a);
    dt_tensor_release(h);
    return s;
}

static const dt_module_ops twice_ops = {.type_name = "Twice", .forward = twice_forward};

static dt_module *twice_create(void)
{
    dt_module *m = NULL;
    dt_tensor *w = NULL;
    int64_t shape[2] = {D, D};
    MR_OK(dt_module_create(&twice_ops, NULL, &m));
    MR_OK(dt_tensor_empty(2, shape, DT_DTYPE_F32, dt_device_cpu(), &w));
    MR_OK(dt_tensor_fill_normal(w, 0.0, 0.5, 7, NULL, NULL));
    MR_OK(dt_tensor_set_requires_grad(w, true));
    MR_OK(dt_module_param_add(m, "w", w));
    dt_tensor_release(w);
    return m;
}

/* Rows [first, first + n) of the global batch (the same on every rank). */
static dt_tensor *batch_rows(int64_t first, int64_t n)
{
    dt_tensor *x = NULL, *rows = NULL;
    int64_t shape[2] = {B, D};
    MR_OK(dt_tensor_empty(2, shape, DT_DTYPE_F32, dt_device_cpu(), &x));
    MR_OK(dt_tensor_fill_normal(x, 0.0, 1.0, 11, NULL, NULL));
    MR_OK(dt_tensor_narrow(x, 0, first, n, &rows));
    dt_tensor_release(x);
    return rows;
}

/* Forward and backward of sum(z * z) / (n * D) over rows [first, first + n):
 * the mean over those rows (the global mean once dp averages equal batches). */
static void fwd_bwd(dt_module *m, int64_t first, int64_t n)
{
    dt_tensor *x = batch_rows(first, n), *z = NULL, *zz = NULL, *sum = NULL, *loss = NULL;
    MR_OK(dt_module_call(m, x, &z));
    MR_OK(dt_mul(z, z, &zz));
    MR_OK(dt_sum_all(zz, &sum));
    MR_OK(dt_scale(sum, 1.0 / (double)(n * D), &loss));
    MR_OK(dt_backward(loss, NULL));
    dt_tensor *objs[] = {x, z, zz, sum, loss};
    for (int i = 0; i < 5; i++)
        dt_tensor_release(objs[i]);
}

/* The gradient of w by one process: rows [first, first + n). A new reference. */
static dt_tensor *reference_grad(int64_t first, int64_t n)
{
    dt_module *m = twice_create();
    fwd_bwd(m, first, n);
    dt_tensor *g = dt_tensor_retain(dt_tensor_grad(dt_module_param(m, "w")));
    dt_module_destroy(m);
    return g;
}

/* max |a - b| / max |b| */
static double rel_diff(const dt_tensor *a, const dt_tensor *b)
{
    assert_int_equal(dt_tensor_numel(a), dt_tensor_numel(b));
    double d = 0.0, n = 0.0;
    for (int64_t i = 0; i < dt_tensor_numel(b); i++) {
        d = fmax(d, fabs(dt_tensor_item_at(a, i) - dt_tensor_item_at(b, i)));
        n = fmax(n, fabs(dt_tensor_item_at(b, i)));
    }
    return d / n;
}

/* What a user hook saw. */
typedef struct seen {
    int calls;
    dt_tensor *grad; /* a copy of the gradient when it ran (the last call's) */
} seen;

static dt_status record(dt_tensor *t, void *user)
{
    seen *s = user;
    s->calls++;
    dt_tensor_release(s->grad);
    s->grad = NULL;
    return dt_tensor_grad(t) != NULL ? dt_tensor_clone(dt_tensor_grad(t), &s->grad) : DT_OK;
}

/* This rank's rows of the global batch. */
static void my_rows(int64_t *first, int64_t *n)
{
    int r = dt_runtime_rank(mr_rt), R = dt_runtime_size(mr_rt);
    *n = B / R;
    *first = r * *n;
}

static void test_ddp_hooks_coexist(void **state)
{
    (void)state;
    int64_t first = 0, n = 0;
    my_rows(&first, &n);
    dt_tensor *global = reference_grad(0, B), *local = reference_grad(first, n);
    dt_mesh *mesh = mr_world_mesh("dp");
    dt_module *m = twice_create();
    dt_tensor *w = dt_module_param(m, "w");
    seen before = {0}, after = {0};
    MR_OK(dt_tensor_register_post_accumulate_grad_hook(w, record, &before, NULL));
    MR_OK(dt_ddp_apply(m, mesh, "dp", NULL));
    MR_OK(dt_tensor_register_post_accumulate_grad_hook(w, record, &after, NULL));
    for (int step = 1; step <= 2; step++) {
        MR_OK(dt_tensor_set_grad(w, NULL)); /* zero_grad */
        fwd_bwd(m, first, n);
        /* once per backward, each with the full local gradient (both uses) */
        assert_int_equal(before.calls, step);
        assert_int_equal(after.calls, step);
        double db = rel_diff(before.grad, local), da = rel_diff(after.grad, local);
        double dr = rel_diff(dt_tensor_grad(w), global);
        print_message("step %d: hooks saw the local gradient to %.2g / %.2g, reduced = "
                      "single-rank to %.2g\n",
                      step, db, da, dr);
        assert_true(db < 1e-6 && da < 1e-6);
        assert_true(dr < 1e-5);
    }
    dt_tensor_retain(w);
    dt_module_destroy(m);
    /* the model is gone: w (still ours) keeps only the user's hooks, and its
     * gradient is its own again (sum(w * w): 2w, nothing scaled or reduced) */
    dt_tensor *ww = NULL, *sum = NULL, *twice = NULL;
    MR_OK(dt_tensor_set_grad(w, NULL));
    MR_OK(dt_mul(w, w, &ww));
    MR_OK(dt_sum_all(ww, &sum));
    MR_OK(dt_backward(sum, NULL));
    assert_int_equal(before.calls, 3);
    assert_int_equal(after.calls, 3);
    MR_OK(dt_scale(w, 2.0, &twice));
    assert_true(rel_diff(dt_tensor_grad(w), twice) < 1e-7);
    dt_tensor *objs[] = {ww, sum, twice, w, before.grad, after.grad};
    for (int i = 0; i < 6; i++)
        dt_tensor_release(objs[i]);
    dt_tensor_release(global);
    dt_tensor_release(local);
    dt_mesh_release(mesh);
}

/* DDP wants every parameter to take a gradient: a frozen one is refused, by name. */
static void test_frozen_refused(void **state)
{
    (void)state;
    dt_mesh *mesh = mr_world_mesh("dp");
    dt_module *m = twice_create();
    MR_OK(dt_tensor_set_requires_grad(dt_module_param(m, "w"), false));
    assert_int_equal(dt_ddp_apply(m, mesh, "dp", NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "parameter 'w' does not require grad"));
    dt_module_destroy(m);
    dt_mesh_release(mesh);
}

static void check_twice(dt_dp_stage stage)
{
    int64_t first = 0, n = 0;
    my_rows(&first, &n);
    dt_tensor *global = reference_grad(0, B);
    dt_mesh *mesh = mr_world_mesh("dp");
    dt_module *m = twice_create();
    dt_fsdp_params fp = {.field_mask = DT_FSDP_PARAM_FIELD_STAGE, .stage = stage};
    MR_OK(dt_fully_shard(m, mesh, "dp", &fp));
    for (int step = 0; step < 2; step++) {
        MR_OK(dt_tensor_set_grad(dt_module_param(m, "w"), NULL));
        fwd_bwd(m, first, n);
        dt_tensor *full = mr_full_grad(dt_module_param(m, "w"));
        double d = rel_diff(full, global);
        print_message("%s: w used twice, full gradient = single-rank to %.2g\n",
                      dt_dp_stage_name(stage), d);
        assert_true(d < 1e-5);
        dt_tensor_release(full);
    }
    dt_module_destroy(m);
    dt_tensor_release(global);
    dt_mesh_release(mesh);
}

static void test_twice_ddp(void **state)
{
    (void)state;
    check_twice(DT_DP_DDP);
}

static void test_twice_zero2(void **state)
{
    (void)state;
    check_twice(DT_DP_ZERO2);
}

static void test_twice_zero3(void **state)
{
    (void)state;
    check_twice(DT_DP_ZERO3);
}

/* ---------------------------------------------------------------- overlap */

/* The dp log lines of this rank, in order. */
typedef struct log_lines {
    int n;
    char line[4096][96];
} log_lines;

static void keep_line(dt_log_level level, const char *subsys, const char *line, void *user)
{
    (void)level;
    log_lines *l = user;
    if (strcmp(subsys, "dp") == 0 && l->n < 4096)
        snprintf(l->line[l->n++], sizeof(l->line[0]), "%s", line);
}

/* The index of the first (last: @p last) line containing @p what, or -1. */
static int find_line(const log_lines *l, const char *what, bool last)
{
    int at = -1;
    for (int i = 0; i < l->n && (last || at < 0); i++)
        if (strstr(l->line[i], what) != NULL)
            at = i;
    return at;
}

/* DDP's buckets are all-reduced from the gradient hooks as soon as each is
 * full, while backward still produces other gradients, not at its end. */
static void test_ddp_buckets_overlap(void **state)
{
    (void)state;
    dt_gpt_config cfg = {0};
    MR_OK(dt_gpt_config_preset("tiny", &cfg));
    dt_module *m = NULL;
    MR_OK(dt_gpt_create(&cfg, 1234, &m));
    dt_mesh *mesh = mr_world_mesh("dp");
    dt_fsdp_params fp = {.field_mask = DT_FSDP_PARAM_FIELD_BUCKET_BYTES, .bucket_bytes = 64 << 10};
    MR_OK(dt_ddp_apply(m, mesh, "dp", &fp));
    dt_token_data *data = mr_learnable_tokens();
    assert_non_null(data);
    dt_tensor *x = NULL, *y = NULL, *logits = NULL, *loss = NULL;
    MR_OK(dt_token_data_batch(data, 0, 2, 16, 0, 1, &x, &y));
    log_lines *l = calloc(1, sizeof(*l));
    assert_non_null(l);
    dt_log_set(keep_line, l);
    dt_log_set_level(DT_LOG_LEVEL_DEBUG);
    MR_OK(dt_module_call(m, x, &logits));
    MR_OK(dt_nn_cross_entropy(logits, y, &loss));
    MR_OK(dt_backward(loss, NULL));
    dt_log_set_level(DT_LOG_LEVEL_WARN);
    dt_log_set(NULL, NULL);
    int first_post = find_line(l, "bucket 0 ", false), last_post = find_line(l, "posted", true);
    int last_ready = find_line(l, "ready", true), end = find_line(l, "backward ended", false);
    print_message("dp log: %d lines; bucket 0 posted at %d, last bucket at %d, last gradient "
                  "ready at %d, backward ended at %d\n",
                  l->n, first_post, last_post, last_ready, end);
    assert_true(first_post >= 0 && end >= 0);
    assert_true(first_post < last_ready); /* launched while gradients were still to come */
    assert_true(last_post < end);         /* every bucket by the hooks, none by the end */
    assert_true(find_line(l, "bucket 2 ", false) >= 0);
    free(l);
    dt_tensor *objs[] = {x, y, logits, loss};
    for (int i = 0; i < 4; i++)
        dt_tensor_release(objs[i]);
    dt_token_data_close(data);
    dt_module_destroy(m);
    dt_mesh_release(mesh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ddp_hooks_coexist), cmocka_unit_test(test_frozen_refused),
        cmocka_unit_test(test_twice_ddp),         cmocka_unit_test(test_twice_zero2),
        cmocka_unit_test(test_twice_zero3),       cmocka_unit_test(test_ddp_buckets_overlap),
    };
    return cmocka_run_group_tests(tests, mr_setup, mr_teardown);
}
