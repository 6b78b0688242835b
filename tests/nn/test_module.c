/*
 * The module tree: user-defined types, children and FQN lookup, the stable
 * parameter order, replaceable slots, hooks, bad input, and the GPT's
 * construction and seeded initialisation.
 */
#include "nn_test_util.h"

/* ---------------------------------------------------------------- a user-defined type */

/* "Scale": y = x * s, one parameter "s" of shape [1] (broadcast). */
static dt_status scale_forward(dt_module *m, int n_in, dt_tensor *const *in, dt_tensor **out)
{
    if (n_in != 1)
        return DT_ERR_INVALID_ARG;
    return dt_mul(in[0], dt_module_param(m, "s"), out);
}

static int scale_impl_freed;
static void scale_free(void *impl)
{
    scale_impl_freed++;
    free(impl);
}

static const dt_module_ops scale_ops = {
    .type_name = "Scale", .forward = scale_forward, .destroy_impl = scale_free};

static dt_module *make_scale(double s)
{
    dt_module *m = NULL;
    NN_OK(dt_module_create(&scale_ops, malloc(16), &m));
    int64_t one = 1;
    dt_tensor *t = NULL;
    NN_OK(dt_tensor_full(1, &one, DT_DTYPE_F32, dt_device_cpu(), s, &t));
    NN_OK(dt_module_param_add(m, "s", t));
    dt_tensor_release(t);
    return m;
}

static void test_user_module_and_tree(void **state)
{
    (void)state;
    scale_impl_freed = 0;
    dt_module *root = NULL, *seq = NULL;
    NN_OK(dt_sequential_create(&root));
    NN_OK(dt_sequential_create(&seq));
    NN_OK(dt_sequential_append(seq, make_scale(2.0)));
    NN_OK(dt_sequential_append(seq, make_scale(3.0)));
    NN_OK(dt_module_add_child(root, "body", seq));
    NN_OK(dt_sequential_append(root, make_scale(5.0))); /* named by its index: "1" */

    assert_int_equal(dt_module_num_children(root), 2);
    assert_string_equal(dt_module_name(dt_module_child_at(root, 1)), "1");
    dt_module *found = NULL;
    NN_OK(dt_module_find(root, "body.1", &found));
    assert_string_equal(dt_module_type_name(found), "Scale");
    assert_ptr_equal(dt_module_parent(found), seq);
    NN_OK(dt_module_find(root, "", &found));
    assert_ptr_equal(found, root);
    char fqn[64];
    NN_OK(dt_module_find(root, "body.0", &found));
    NN_OK(dt_module_fqn(found, fqn, sizeof(fqn)));
    assert_string_equal(fqn, "body.0");
    NN_OK(dt_module_fqn(root, fqn, sizeof(fqn)));
    assert_string_equal(fqn, "");
    NN_FAILS(dt_module_fqn(found, fqn, 5), DT_ERR_INVALID_ARG, "need 7");
    NN_FAILS(dt_module_find(root, "body.7", &found), DT_ERR_NOT_FOUND, "'7'");
    NN_FAILS(dt_module_find(root, "body.", &found), DT_ERR_NOT_FOUND, "body.");

    /* forward through the tree: 1.5 * 2 * 3 * 5 */
    int64_t shape[1] = {3};
    dt_tensor *x = NULL, *y = NULL;
    NN_OK(dt_tensor_full(1, shape, DT_DTYPE_F32, dt_device_cpu(), 1.5, &x));
    NN_OK(dt_module_call(root, x, &y));
    for (int i = 0; i < 3; i++)
        assert_float_equal(dt_tensor_item_at(y, i), 45.0, 1e-6);
    dt_tensor_release(y);
    dt_tensor_release(x);

    /* a child is owned: destroying it directly does nothing */
    dt_module_destroy(found);
    NN_OK(dt_module_find(root, "body.0", &found));
    dt_module_destroy(root);
    assert_int_equal(scale_impl_freed, 3);
}

static void test_tree_bad_input(void **state)
{
    (void)state;
    dt_module *a = NULL, *b = NULL, *c = make_scale(1.0);
    NN_OK(dt_sequential_create(&a));
    NN_OK(dt_sequential_create(&b));
    NN_FAILS(dt_module_add_child(a, "x.y", b), DT_ERR_INVALID_ARG, "x.y");
    NN_FAILS(dt_module_add_child(a, "", b), DT_ERR_INVALID_ARG, "empty");
    NN_FAILS(dt_module_add_child(a, "l*", b), DT_ERR_INVALID_ARG, "l*");
    NN_OK(dt_module_add_child(a, "b", b));
    NN_FAILS(dt_module_add_child(a, "b", c), DT_ERR_INVALID_ARG, "already has a child 'b'");
    NN_FAILS(dt_module_add_child(c, "again", b), DT_ERR_INVALID_ARG, "already has a parent");
    NN_FAILS(dt_module_add_child(b, "loop", a), DT_ERR_INVALID_ARG, "ancestor");
    NN_FAILS(dt_sequential_append(c, b), DT_ERR_INVALID_ARG, "not a Sequential");

    int64_t one = 1;
    dt_tensor *t = NULL, *ids = NULL;
    NN_OK(dt_tensor_zeros(1, &one, DT_DTYPE_F32, dt_device_cpu(), &t));
    NN_OK(dt_tensor_zeros(1, &one, DT_DTYPE_I64, dt_device_cpu(), &ids));
    NN_FAILS(dt_module_param_add(c, "s", t), DT_ERR_INVALID_ARG, "already has a parameter 's'");
    NN_FAILS(dt_module_param_add(c, "ids", ids), DT_ERR_INVALID_ARG, "floats only");
    NN_FAILS(dt_module_param_set(c, "nope", t), DT_ERR_NOT_FOUND, "'nope'");
    NN_FAILS(dt_module_forward(c, DT_MODULE_MAX_INPUTS + 1, &t, &ids), DT_ERR_INVALID_ARG,
             "inputs");

    dt_module_ops no_forward = {.type_name = "Broken"};
    dt_module *broken = NULL;
    NN_FAILS(dt_module_create(&no_forward, NULL, &broken), DT_ERR_INVALID_ARG, "forward");
    NN_FAILS(dt_linear_create(0, 3, true, &broken), DT_ERR_INVALID_ARG, "in 0");
    NN_FAILS(dt_attention_create(10, 3, &broken), DT_ERR_INVALID_ARG, "n_heads 3");
    NN_FAILS(dt_layer_norm_create(4, 0.0, &broken), DT_ERR_INVALID_ARG, "eps");
    dt_tensor_release(t);
    dt_tensor_release(ids);
    dt_module_destroy(c);
    dt_module_destroy(a);
}

/* ---------------------------------------------------------------- GPT structure */

static const dt_gpt_config small_cfg = {
    .vocab_size = 11, .max_seq_len = 7, .dim = 12, .n_layers = 1, .n_heads = 3, .ffn_dim = 20};

typedef struct names_ctx {
    char names[64][64];
    int n;
    bool all_params_ok;
} names_ctx;

static dt_status collect(const char *fqn, dt_module *owner, const char *name, dt_tensor *p,
                         void *user)
{
    names_ctx *c = user;
    snprintf(c->names[c->n++], 64, "%s", fqn);
    /* every parameter: requires grad, f32, accounted as a parameter */
    if (!dt_tensor_requires_grad(p) || dt_tensor_mem_category(p) != DT_MEM_PARAMETER ||
        dt_tensor_dtype(p) != DT_DTYPE_F32)
        c->all_params_ok = false;
    return DT_OK;
}

static void test_gpt_param_order(void **state)
{
    (void)state;
    static const char *const want[] = {"tok_embeddings.weight",
                                       "pos_embeddings.weight",
                                       "layers.0.attention_norm.weight",
                                       "layers.0.attention_norm.bias",
                                       "layers.0.attention.wq.weight",
                                       "layers.0.attention.wq.bias",
                                       "layers.0.attention.wk.weight",
                                       "layers.0.attention.wk.bias",
                                       "layers.0.attention.wv.weight",
                                       "layers.0.attention.wv.bias",
                                       "layers.0.attention.wo.weight",
                                       "layers.0.attention.wo.bias",
                                       "layers.0.ffn_norm.weight",
                                       "layers.0.ffn_norm.bias",
                                       "layers.0.feed_forward.w1.weight",
                                       "layers.0.feed_forward.w1.bias",
                                       "layers.0.feed_forward.w2.weight",
                                       "layers.0.feed_forward.w2.bias",
                                       "norm.weight",
                                       "norm.bias",
                                       "output.weight"};
    dt_module *m = NULL;
    NN_OK(dt_gpt_create(&small_cfg, 1, &m));
    names_ctx c = {.n = 0, .all_params_ok = true};
    NN_OK(dt_module_foreach_param(m, collect, &c));
    assert_int_equal(c.n, (int)(sizeof(want) / sizeof(want[0])));
    for (int i = 0; i < c.n; i++)
        assert_string_equal(c.names[i], want[i]);
    assert_true(c.all_params_ok);
    assert_int_equal(dt_module_param_count(m), c.n);
    int64_t d = 12, v = 11, s = 7, f = 20;
    int64_t numel =
        v * d + s * d + 4 * d + 4 * (d * d + d) + (f * d + f) + (d * f + d) + 2 * d + v * d;
    assert_int_equal(dt_module_param_numel(m), numel);

    /* types along a path, and the attention's configuration */
    dt_module *x = NULL;
    NN_OK(dt_module_find(m, "layers.0.attention.wq", &x));
    assert_string_equal(dt_module_type_name(x), "Linear");
    NN_OK(dt_module_find(m, "layers.0.attention", &x));
    assert_string_equal(dt_module_type_name(x), "Attention");
    int64_t nh = 0, hd = 0;
    NN_OK(dt_attention_config(x, &nh, &hd));
    assert_int_equal(nh, 3);
    assert_int_equal(hd, 4);
    NN_OK(dt_module_find(m, "layers.0", &x));
    assert_string_equal(dt_module_type_name(x), "Block");
    NN_FAILS(dt_attention_config(x, &nh, &hd), DT_ERR_INVALID_ARG, "not an Attention");
    NN_FAILS(dt_module_find(m, "layers.1.attention", &x), DT_ERR_NOT_FOUND, "'1'");
    assert_null(dt_module_param(m, "weight"));
    NN_OK(dt_module_find(m, "output", &x));
    assert_null(dt_module_param(x, "bias"));
    assert_int_equal(dt_module_num_params(x), 1);
    assert_string_equal(dt_module_param_name_at(x, 0), "weight");
    assert_non_null(dt_gpt_get_config(m));
    assert_null(dt_gpt_get_config(x));
    dt_module_destroy(m);
}

typedef struct visit_ctx {
    char fqns[64][64];
    int n;
} visit_ctx;

static dt_status visit(const char *fqn, dt_module *m, void *user)
{
    visit_ctx *c = user;
    snprintf(c->fqns[c->n++], 64, "%s", fqn);
    return DT_OK;
}

static void test_module_foreach(void **state)
{
    (void)state;
    dt_module *m = NULL;
    NN_OK(dt_gpt_create(&small_cfg, 1, &m));
    visit_ctx c = {.n = 0};
    NN_OK(dt_module_foreach(m, visit, &c));
    static const char *const want[] = {"",
                                       "tok_embeddings",
                                       "pos_embeddings",
                                       "layers",
                                       "layers.0",
                                       "layers.0.attention_norm",
                                       "layers.0.attention",
                                       "layers.0.attention.wq",
                                       "layers.0.attention.wk",
                                       "layers.0.attention.wv",
                                       "layers.0.attention.wo",
                                       "layers.0.ffn_norm",
                                       "layers.0.feed_forward",
                                       "layers.0.feed_forward.w1",
                                       "layers.0.feed_forward.w2",
                                       "norm",
                                       "output"};
    assert_int_equal(c.n, (int)(sizeof(want) / sizeof(want[0])));
    for (int i = 0; i < c.n; i++) {
        assert_string_equal(c.fqns[i], want[i]);
        dt_module *x = NULL;
        char back[64];
        NN_OK(dt_module_find(m, want[i], &x));
        NN_OK(dt_module_fqn(x, back, sizeof(back)));
        assert_string_equal(back, want[i]);
    }
    dt_module_destroy(m);
}

/* ---------------------------------------------------------------- init */

/* The documented per-parameter seed, written independently of the library. */
static uint64_t doc_param_seed(uint64_t seed, const char *fqn)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)fqn; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    uint64_t z = (seed ^ h) + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double std_of(const dt_tensor *t)
{
    double s = 0, s2 = 0;
    int64_t n = dt_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double v = dt_tensor_item_at(t, i);
        s += v;
        s2 += v * v;
    }
    return sqrt(s2 / n - (s / n) * (s / n));
}

static dt_tensor *param_at(dt_module *m, const char *fqn_module, const char *name)
{
    dt_module *x = NULL;
    NN_OK(dt_module_find(m, fqn_module, &x));
    dt_tensor *t = dt_module_param(x, name);
    assert_non_null(t);
    return t;
}

static void test_gpt_init(void **state)
{
    (void)state;
    dt_gpt_config cfg;
    NN_OK(dt_gpt_config_preset("tiny", &cfg));
    assert_int_equal(cfg.vocab_size, 256);
    assert_int_equal(cfg.ffn_dim, 256);
    NN_FAILS(dt_gpt_config_preset("huge", &cfg), DT_ERR_NOT_FOUND, "huge");
    NN_OK(dt_gpt_config_preset("small", &cfg));
    assert_int_equal(cfg.dim, 512);
    NN_OK(dt_gpt_config_preset("tiny", &cfg));

    dt_module *a = NULL, *b = NULL, *c = NULL;
    NN_OK(dt_gpt_create(&cfg, 42, &a));
    NN_OK(dt_gpt_create(&cfg, 42, &b));
    NN_OK(dt_gpt_create(&cfg, 43, &c));
    dt_tensor *ta = param_at(a, "tok_embeddings", "weight");
    assert_true(dt_tensor_equal(ta, param_at(b, "tok_embeddings", "weight")));
    assert_false(dt_tensor_equal(ta, param_at(c, "tok_embeddings", "weight")));
    /* same shape, another FQN: other values */
    assert_false(dt_tensor_equal(param_at(a, "layers.0.attention.wq", "weight"),
                                 param_at(a, "layers.0.attention.wk", "weight")));
    /* value = fill_normal under the documented seed, by index */
    dt_tensor *ref = NULL;
    NN_OK(dt_tensor_zeros(2, dt_tensor_shape(ta), DT_DTYPE_F32, dt_device_cpu(), &ref));
    assert_int_equal(dt_param_seed(42, "tok_embeddings.weight"),
                     doc_param_seed(42, "tok_embeddings.weight"));
    NN_OK(dt_tensor_fill_normal(ref, 0.0, 0.02, doc_param_seed(42, "tok_embeddings.weight"), NULL,
                                NULL));
    assert_true(dt_tensor_equal(ta, ref));
    dt_tensor_release(ref);

    /* the spec's scales */
    assert_float_equal(std_of(ta), 0.02, 0.002);
    double proj = 0.02 / sqrt(2.0 * (double)cfg.n_layers);
    assert_float_equal(std_of(param_at(a, "layers.1.attention.wo", "weight")), proj, 0.1 * proj);
    assert_float_equal(std_of(param_at(a, "layers.0.feed_forward.w2", "weight")), proj, 0.1 * proj);
    assert_float_equal(std_of(param_at(a, "layers.0.feed_forward.w1", "weight")), 0.02, 0.002);
    dt_tensor *lnw = param_at(a, "layers.1.ffn_norm", "weight");
    dt_tensor *lnb = param_at(a, "norm", "bias");
    dt_tensor *bias = param_at(a, "layers.0.attention.wq", "bias");
    for (int64_t i = 0; i < cfg.dim; i++) {
        assert_true(dt_tensor_item_at(lnw, i) == 1.0);
        assert_true(dt_tensor_item_at(lnb, i) == 0.0);
        assert_true(dt_tensor_item_at(bias, i) == 0.0);
    }
    /* re-initialising restores the same values after they changed */
    NN_OK(dt_tensor_fill(ta, 3.0));
    NN_OK(dt_gpt_init(a, 42));
    assert_true(dt_tensor_equal(ta, param_at(b, "tok_embeddings", "weight")));
    NN_FAILS(dt_gpt_init(dt_module_child(a, "norm"), 1), DT_ERR_INVALID_ARG, "not a GPT");

    dt_gpt_config bad = cfg;
    bad.n_heads = 5;
    NN_FAILS(dt_gpt_create(&bad, 1, &c), DT_ERR_INVALID_ARG, "n_heads 5");
    bad = cfg;
    bad.ffn_dim = 0;
    NN_FAILS(dt_gpt_create(&bad, 1, &c), DT_ERR_INVALID_ARG, "ffn_dim");
    dt_module_destroy(a);
    dt_module_destroy(b);
    dt_module_destroy(c);
}

static void test_gpt_forward_shapes(void **state)
{
    (void)state;
    dt_module *m = NULL;
    NN_OK(dt_gpt_create(&small_cfg, 3, &m));
    int64_t shape[2] = {2, 7}, v[14];
    for (int i = 0; i < 14; i++)
        v[i] = (i * 5) % 11;
    dt_tensor *ids = nn_ids(2, shape, v), *logits = NULL;
    NN_OK(dt_module_call(m, ids, &logits));
    assert_int_equal(dt_tensor_ndim(logits), 3);
    assert_int_equal(dt_tensor_dim(logits, 0), 2);
    assert_int_equal(dt_tensor_dim(logits, 1), 7);
    assert_int_equal(dt_tensor_dim(logits, 2), 11);
    dt_tensor_release(logits);
    dt_tensor_release(ids);
    int64_t long_shape[2] = {1, 8}, lv[8] = {0};
    ids = nn_ids(2, long_shape, lv);
    NN_FAILS(dt_module_call(m, ids, &logits), DT_ERR_INVALID_ARG, "max_seq_len 7");
    dt_tensor_release(ids);
    dt_module_destroy(m);
}

/* ---------------------------------------------------------------- slots and hooks */

static dt_status double_input(dt_module *m, int n_in, dt_tensor **in, void *user)
{
    dt_tensor *y = NULL;
    dt_status s = dt_scale(in[0], 2.0, &y);
    if (s != DT_OK)
        return s;
    dt_tensor_release(in[0]);
    in[0] = y;
    (*(int *)user)++;
    return DT_OK;
}

static dt_status add_one_output(dt_module *m, dt_tensor **out, void *user)
{
    dt_tensor *y = NULL;
    dt_status s = dt_add_scalar(*out, 1.0, &y);
    if (s != DT_OK)
        return s;
    dt_tensor_release(*out);
    *out = y;
    (*(int *)user)++;
    return DT_OK;
}

static dt_status failing_hook(dt_module *m, dt_tensor **out, void *user)
{
    return DT_ERR_UNSUPPORTED;
}

static int freed_users;
static void count_free(void *p)
{
    freed_users++;
}

static void test_param_set_and_hooks(void **state)
{
    (void)state;
    dt_module *lin = NULL;
    NN_OK(dt_linear_create(3, 2, true, &lin));
    int64_t ws[2] = {2, 3}, xs[2] = {1, 3};
    dt_tensor *w = nn_rand_tensor(2, ws, -1, 1), *x = nn_rand_tensor(2, xs, -1, 1), *y = NULL;
    NN_OK(dt_module_param_set(lin, "weight", w));
    assert_ptr_equal(dt_module_param(lin, "weight"), w);
    assert_true(dt_tensor_requires_grad(w));
    assert_int_equal(dt_tensor_mem_category(w), DT_MEM_PARAMETER);
    /* the bias keeps its (nonzero) default init */
    double *wv = nn_vals(w), *xv = nn_vals(x), *bv = nn_vals(dt_module_param(lin, "bias"));
    double wx[2], want[2];
    for (int o = 0; o < 2; o++) {
        wx[o] = xv[0] * wv[o * 3] + xv[1] * wv[o * 3 + 1] + xv[2] * wv[o * 3 + 2];
        want[o] = wx[o] + bv[o];
    }
    NN_OK(dt_module_call(lin, x, &y));
    nn_expect_close("linear with a replaced weight", want, y, 1e-5, 1e-6);
    dt_tensor_release(y);

    int pre_calls = 0, post_calls = 0;
    freed_users = 0;
    NN_OK(dt_module_add_pre_hook(lin, double_input, &pre_calls, NULL));
    NN_OK(dt_module_add_post_hook(lin, add_one_output, &post_calls, NULL));
    NN_OK(dt_module_add_post_hook(lin, add_one_output, &post_calls, count_free));
    NN_OK(dt_module_call(lin, x, &y));
    double want2[2] = {2 * wx[0] + bv[0] + 2, 2 * wx[1] + bv[1] + 2}; /* W (2x) + b, +1 twice */
    nn_expect_close("linear with hooks", want2, y, 1e-5, 1e-6);
    assert_int_equal(pre_calls, 1);
    assert_int_equal(post_calls, 2);
    dt_tensor_release(y);
    /* the caller's input was not modified by the pre-hook's replacement */
    double *xv2 = nn_vals(x);
    assert_memory_equal(xv, xv2, 3 * sizeof(double));
    free(xv2);

    dt_module_clear_hooks(lin);
    assert_int_equal(freed_users, 1);
    NN_OK(dt_module_add_post_hook(lin, failing_hook, NULL, count_free));
    assert_int_equal(dt_module_call(lin, x, &y), DT_ERR_UNSUPPORTED);
    dt_module_destroy(lin); /* frees the remaining hook's user data */
    assert_int_equal(freed_users, 2);
    free(wv);
    free(xv);
    free(bv);
    dt_tensor_release(w);
    dt_tensor_release(x);
}

/*
 * dt_param_init on a distributed parameter fills its shard with exactly its
 * slice of the full tensor: every rank of 1-d and 2-d virtual meshes (no
 * communication), even and uneven shards, nested sharding, Replicate.
 */
static void check_dist_init(int ndim, const int *mesh_shape, const dt_placement *pl)
{
    int64_t shape[2] = {5, 7};
    dt_tensor *full = NULL;
    NN_OK(dt_tensor_zeros(2, shape, DT_DTYPE_F32, dt_device_cpu(), &full));
    NN_OK(dt_param_init(full, "layers.3.attention.wq.weight", 99, 0.02, 0.0));
    int world = 1;
    for (int d = 0; d < ndim; d++)
        world *= mesh_shape[d];
    for (int r = 0; r < world; r++) {
        dt_mesh *mesh = NULL;
        dt_tensor *want = NULL, *got = NULL;
        NN_OK(dt_mesh_create_virtual(ndim, mesh_shape, NULL, r, &mesh));
        NN_OK(dt_distribute(full, mesh, ndim, pl, &want));
        NN_OK(dt_distribute(full, mesh, ndim, pl, &got));
        NN_OK(dt_tensor_fill(dt_to_local(got), -1.0));
        NN_OK(dt_param_init(got, "layers.3.attention.wq.weight", 99, 0.02, 0.0));
        assert_true(dt_tensor_equal(dt_to_local(got), dt_to_local(want)));
        NN_OK(dt_param_init(got, "x.bias", 99, 0.0, 0.5)); /* constants fill the shard */
        for (int64_t i = 0; i < dt_tensor_numel(dt_to_local(got)); i++)
            assert_true(dt_tensor_item_at(dt_to_local(got), i) == 0.5);
        dt_tensor_release(got);
        dt_tensor_release(want);
        dt_mesh_release(mesh);
    }
    dt_tensor_release(full);
}

static void test_distributed_param_init(void **state)
{
    (void)state;
    int m1[1] = {3}, m4[1] = {4}, m22[2] = {2, 2};
    dt_placement s0[1] = {dt_shard(0)}, s1[1] = {dt_shard(1)}, r[1] = {dt_replicate()};
    check_dist_init(1, m1, s0); /* 5 rows over 3: 2, 2, 1 */
    check_dist_init(1, m4, s1); /* 7 cols over 4: 2, 2, 2, 1 */
    check_dist_init(1, m4, s0); /* 5 rows over 4 */
    check_dist_init(1, m1, r);
    dt_placement nested[2] = {dt_shard(0), dt_shard(0)}, both[2] = {dt_shard(1), dt_shard(0)};
    dt_placement mixed[2] = {dt_replicate(), dt_shard(1)};
    check_dist_init(2, m22, nested);
    check_dist_init(2, m22, both);
    check_dist_init(2, m22, mixed);

    /* a Partial "parameter" is refused */
    int64_t shape[1] = {4};
    dt_tensor *full = NULL, *d = NULL;
    dt_mesh *mesh = NULL;
    dt_placement p[1] = {dt_partial(DT_REDUCE_OP_SUM)};
    NN_OK(dt_tensor_zeros(1, shape, DT_DTYPE_F32, dt_device_cpu(), &full));
    NN_OK(dt_mesh_create_virtual(1, m1, NULL, 1, &mesh));
    NN_OK(dt_distribute(full, mesh, 1, p, &d));
    NN_FAILS(dt_param_init(d, "w", 1, 0.02, 0.0), DT_ERR_INVALID_ARG, "Partial on mesh dim 0");
    dt_tensor_release(d);
    dt_tensor_release(full);
    dt_mesh_release(mesh);
}

static void test_module_print(void **state)
{
    (void)state;
    dt_module *m = NULL;
    NN_OK(dt_gpt_create(&small_cfg, 1, &m));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    NN_OK(dt_module_print(m, f));
    fclose(f);
    assert_non_null(strstr(text, "<root> (GPT)\n"));
    /* indented by depth: wq is 4 levels down, its parameters one more */
    assert_non_null(strstr(text, "\n        layers.0.attention.wq (Linear)\n"
                                 "          weight [12, 12] f32\n"
                                 "          bias [12] f32\n"));
    assert_non_null(strstr(text, "\n  output (Linear)\n    weight [11, 12] f32\n"));
    char total[96];
    snprintf(total, sizeof(total), "%lld parameter elements (%lld on this rank)\n",
             (long long)dt_module_param_numel(m), (long long)dt_module_param_numel(m));
    assert_non_null(strstr(text, total));
    free(text);
    NN_FAILS(dt_module_print(m, NULL), DT_ERR_INVALID_ARG, "'f'");
    dt_module_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_user_module_and_tree),
        cmocka_unit_test(test_tree_bad_input),
        cmocka_unit_test(test_gpt_param_order),
        cmocka_unit_test(test_module_foreach),
        cmocka_unit_test(test_gpt_init),
        cmocka_unit_test(test_gpt_forward_shapes),
        cmocka_unit_test(test_param_set_and_hooks),
        cmocka_unit_test(test_distributed_param_init),
        cmocka_unit_test(test_module_print),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
