/*
 * dt_fully_shard / dt_ddp_apply on 2 and 3 ranks (a 1-d "dp" mesh): bad
 * arguments fail by name and leave the model unchanged; ZeRO shards are
 * Shard(k) distributed tensors whose full_tensor is the exact full weight;
 * gradient clipping sees the global norm; gradients accumulate over two
 * backward passes and zero_grad drops them; forwards without grad (and with
 * grad but no backward) leave training intact; explicit units without
 * prefetch and the cpu_offload flag train like the single-rank run. The
 * reduce/param/output dtypes: test_api_mixed_precision.c.
 */
#include <unistd.h>

#include "dp_api_common.h"

/* rank 0's pid, the same on every rank: unique file names per run */
static long getpid_of_rank0(void)
{
    long pid = (long)getpid();
    if (dt_comm_broadcast(dt_runtime_world(mr_rt), &pid, 1, DT_DTYPE_I64, 0, NULL) != DT_OK)
        fail_msg("broadcast: %s", dt_last_error());
    return pid;
}

static void test_errors(void **state)
{
    (void)state;
    dt_mesh *mesh = mr_world_mesh("dp"), *virt = NULL;
    dt_module *m = NULL;
    DP_OK(dt_gpt_create(&cfg, 1234, &m));
    dt_tensor *w = mr_param_at(m, "output.weight");
    FAILS(dt_fully_shard(m, mesh, "data", NULL), DT_ERR_NOT_FOUND,
          "dt_fully_shard: the mesh has no dim named 'data' (dims: dp)");
    dt_fsdp_params bad = {.field_mask = DT_FSDP_PARAM_FIELD_STAGE, .stage = (dt_dp_stage)7};
    FAILS(dt_fully_shard(m, mesh, "dp", &bad), DT_ERR_INVALID_ARG, "stage 7");
    dt_fsdp_params f16 = {.field_mask = DT_FSDP_PARAM_FIELD_REDUCE_DTYPE,
                          .reduce_dtype = DT_DTYPE_F16};
    FAILS(dt_fully_shard(m, mesh, "dp", &f16), DT_ERR_INVALID_ARG,
          "reduce_dtype f16, expected f32 or bf16");
    dt_fsdp_params p16 = {.field_mask = DT_FSDP_PARAM_FIELD_PARAM_DTYPE,
                          .param_dtype = DT_DTYPE_F16};
    FAILS(dt_fully_shard(m, mesh, "dp", &p16), DT_ERR_INVALID_ARG,
          "param_dtype f16, expected f32 or bf16");
    dt_fsdp_params o16 = {.field_mask = DT_FSDP_PARAM_FIELD_OUTPUT_DTYPE,
                          .output_dtype = DT_DTYPE_F16};
    FAILS(dt_fully_shard(m, mesh, "dp", &o16), DT_ERR_INVALID_ARG,
          "output_dtype f16, expected f32 or bf16");
    dt_fsdp_params units = {.field_mask = DT_FSDP_PARAM_FIELD_UNITS, .units = "layers.*,blocks.*"};
    FAILS(dt_fully_shard(m, mesh, "dp", &units), DT_ERR_INVALID_ARG, "blocks.*");
    assert_ptr_equal(mr_param_at(m, "output.weight"), w); /* unchanged */
    assert_false(dt_tensor_is_distributed(w));
    int one = 2;
    const char *names[1] = {"dp"};
    DP_OK(dt_mesh_create_virtual(1, &one, names, 0, &virt));
    FAILS(dt_fully_shard(m, virt, "dp", NULL), DT_ERR_UNSUPPORTED, "virtual");
    dt_module *tied = NULL, *l1 = NULL, *l2 = NULL;
    DP_OK(dt_sequential_create(&tied));
    DP_OK(dt_linear_create(4, 4, false, &l1));
    DP_OK(dt_sequential_append(tied, l1));
    DP_OK(dt_linear_create(4, 4, false, &l2));
    DP_OK(dt_sequential_append(tied, l2));
    DP_OK(dt_module_param_set(l2, "weight", dt_module_param(l1, "weight")));
    FAILS(dt_fully_shard(tied, mesh, "dp", NULL), DT_ERR_UNSUPPORTED, "'1.weight' is the same");
    dt_module_destroy(tied);
    DP_OK(dt_fully_shard(m, mesh, "dp", NULL));
    FAILS(dt_ddp_apply(m, mesh, "dp", NULL), DT_ERR_INVALID_ARG, "already data parallel");
    dt_plan *plan = NULL; /* tensor parallelism after data parallelism: the order is named */
    DP_OK(dt_plan_gpt_default(false, &plan));
    FAILS(dt_parallelize_module(m, mesh, plan, "tp"), DT_ERR_NOT_FOUND,
          "dt_parallelize_module: the mesh has no dim named 'tp'");
    FAILS(dt_parallelize_module(m, mesh, plan, "dp"), DT_ERR_INVALID_ARG,
          "before data parallelism (dt_parallelize_module, then dt_fully_shard");
    dt_plan_destroy(plan);
    dt_dp_stage st;
    FAILS(dt_dp_stage_parse("zero4", &st), DT_ERR_INVALID_ARG, "zero4");
    for (int i = 0; i <= DT_DP_ZERO3; i++) {
        DP_OK(dt_dp_stage_parse(dt_dp_stage_name((dt_dp_stage)i), &st));
        assert_int_equal(st, i);
    }
    dt_module_destroy(m);
    dt_mesh_release(virt);
    dt_mesh_release(mesh);
}

/* ZeRO-3 slots: S(k) shards (k = 0 here: no tp), exact full weights. */
static void test_shards_full_tensor(void **state)
{
    (void)state;
    dt_mesh *mesh = mr_world_mesh("dp");
    dt_module *m = NULL, *ref = NULL;
    DP_OK(dt_gpt_create(&cfg, 1234, &m));
    DP_OK(dt_gpt_create(&cfg, 1234, &ref));
    DP_OK(dt_fully_shard(m, mesh, "dp", NULL));
    dt_tensor *w = mr_param_at(m, "layers.0.feed_forward.w1.weight");
    assert_true(dt_tensor_is_distributed(w));
    assert_true(dt_placement_is_shard(dt_tensor_placements(w)[0], 0));
    int64_t len = 0, off = 0;
    dt_shard_chunk(cfg.ffn_dim, dt_mesh_size(mesh), dt_mesh_rank(mesh), &len, &off);
    assert_int_equal(dt_tensor_dim(dt_to_local(w), 0), len);
    /* 1/dp of the bytes, up to the rounding up of torch.chunk (64 over 3: 22) */
    assert_true((double)dt_module_param_bytes_local(m) * dt_mesh_size(mesh) <=
                1.05 * (double)dt_module_param_numel(m) * 4);
    assert_true(mr_compare_weights(m, ref, 0.0).diff2 == 0.0);
    dt_module_destroy(m);
    dt_module_destroy(ref);
    dt_mesh_release(mesh);
}

/* checkpoint: a ZeRO-3 model saves the single-rank bytes and loads into its shards */
static void test_save_load_full(void **state)
{
    (void)state;
    dt_mesh *mesh = mr_world_mesh("dp");
    dt_module *m = NULL, *ref = NULL, *other = NULL;
    char a[64], b[64];
    snprintf(a, sizeof(a), "/tmp/dp_api_%d_single.safetensors", (int)getpid_of_rank0());
    snprintf(b, sizeof(b), "/tmp/dp_api_%d_zero3.safetensors", (int)getpid_of_rank0());
    DP_OK(dt_gpt_create(&cfg, 1234, &m));
    DP_OK(dt_gpt_create(&cfg, 1234, &ref));
    DP_OK(dt_fully_shard(m, mesh, "dp", NULL));
    if (dt_mesh_rank(mesh) == 0)
        DP_OK(dt_save_full(ref, a));
    DP_OK(dt_save_full(m, b));
    DP_OK(dt_comm_barrier(dt_runtime_world(mr_rt), NULL));
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    assert_non_null(fa);
    assert_non_null(fb);
    int ca = 0, cb = 0;
    long n = 0;
    while ((ca = fgetc(fa)) != EOF && (cb = fgetc(fb)) != EOF && ca == cb)
        n++;
    assert_int_equal(ca, EOF); /* identical bytes, same length */
    assert_int_equal(fgetc(fb), EOF);
    fclose(fa), fclose(fb);
    DP_OK(dt_gpt_create(&cfg, 99, &other)); /* other weights, then the file's */
    DP_OK(dt_fully_shard(other, mesh, "dp", NULL));
    DP_OK(dt_load_full(other, a));
    assert_true(mr_compare_weights(other, ref, 0.0).diff2 == 0.0);
    print_message("zero3 dt_save_full: %ld bytes identical to single-rank; dt_load_full exact\n",
                  n);
    DP_OK(dt_comm_barrier(dt_runtime_world(mr_rt), NULL));
    if (dt_mesh_rank(mesh) == 0)
        remove(a), remove(b);
    dt_module_destroy(m), dt_module_destroy(ref), dt_module_destroy(other);
    dt_mesh_release(mesh);
}

static void check_accumulate_clip(dt_dp_stage stage)
{
    dt_mesh *mesh = mr_world_mesh("dp");
    dt_module *m = NULL, *ref = NULL;
    DP_OK(dt_gpt_create(&cfg, 1234, &m));
    DP_OK(dt_gpt_create(&cfg, 1234, &ref));
    dt_fsdp_params fp = {.field_mask = DT_FSDP_PARAM_FIELD_STAGE | DT_FSDP_PARAM_FIELD_CPU_OFFLOAD |
                                       DT_FSDP_PARAM_FIELD_GRAD_SCALE,
                         .stage = stage,
                         .cpu_offload = true,
                         .grad_scale = share(mesh, BATCH)};
    DP_OK(dt_fully_shard(m, mesh, "dp", &fp));
    dt_optim *opt = NULL;
    DP_OK(dt_optim_sgd_create(m, NULL, &opt));
    /* a forward with grad but no backward, and one without grad: no effect */
    dt_tensor *x = NULL, *y = NULL, *o = NULL;
    DP_OK(dt_token_data_batch(data, 0, BATCH, SEQ, 0, 1, &x, &y));
    DP_OK(dt_module_call(m, x, &o));
    dt_tensor_release(o);
    bool prev = dt_grad_set_enabled(false);
    DP_OK(dt_module_call(m, x, &o));
    dt_grad_set_enabled(prev);
    dt_tensor_release(o), dt_tensor_release(x), dt_tensor_release(y);
    /* two backward passes accumulate, then clipping by the global norm */
    fwd_bwd(ref, NULL, 0, 0.0);
    double rn = fwd_bwd(ref, NULL, 1, 1e9);
    fwd_bwd(m, mesh, 0, 0.0);
    double n = fwd_bwd(m, mesh, 1, 1e9);
    print_message("%s: global grad norm %.9g (single %.9g)\n", dt_dp_stage_name(stage), n, rn);
    assert_true(fabs(n - rn) <= 1e-5 * rn);
    assert_true(grad_diff(m, ref, "layers.1.feed_forward.w2.weight") < 1e-5);
    assert_true(grad_diff(m, ref, "tok_embeddings.weight") < 1e-5);
    dt_optim_zero_grad(opt);
    assert_null(dt_tensor_grad(mr_param_at(m, "output.weight")));
    dt_optim_destroy(opt);
    dt_module_destroy(m);
    dt_module_destroy(ref);
    dt_mesh_release(mesh);
}

/* Two micro-batches, the first without sync: the gradients of one synced pass
 * over both (as the single-rank run accumulating both), none in between. */
static void check_no_sync(dt_dp_stage stage)
{
    dt_mesh *mesh = mr_world_mesh("dp");
    dt_module *m = NULL, *ref = NULL;
    dp_and_reference(mesh, stage, DT_DTYPE_F32, &m, &ref);
    FAILS(dt_dp_set_gradient_sync(dt_module_child(m, "output"), false), DT_ERR_INVALID_ARG,
          "is not the root of a data-parallel model");
    DP_OK(dt_dp_set_gradient_sync(m, false));
    fwd_bwd(m, mesh, 0, 0.0);
    assert_null(dt_tensor_grad(mr_param_at(m, "output.weight"))); /* kept back, not installed */
    DP_OK(dt_dp_set_gradient_sync(m, true));
    fwd_bwd(m, mesh, 1, 0.0);
    fwd_bwd(ref, NULL, 0, 0.0);
    fwd_bwd(ref, NULL, 1, 0.0);
    for (size_t i = 0; i < sizeof(fqns) / sizeof(fqns[0]); i++) {
        double d = grad_diff(m, ref, fqns[i]);
        if (!(d < 1e-5))
            fail_msg("%s, no_sync: %s differs from the accumulated single-rank gradient by %.3g",
                     dt_dp_stage_name(stage), fqns[i], d);
    }
    dt_module_destroy(m);
    dt_module_destroy(ref);
    dt_mesh_release(mesh);
}

static void test_no_sync(void **state)
{
    (void)state;
    for (int st = DT_DP_DDP; st <= DT_DP_ZERO3; st++)
        check_no_sync((dt_dp_stage)st);
}

static void test_accumulate_clip_ddp(void **state)
{
    (void)state;
    check_accumulate_clip(DT_DP_DDP);
}
static void test_accumulate_clip_zero1(void **state)
{
    (void)state;
    check_accumulate_clip(DT_DP_ZERO1);
}
static void test_accumulate_clip_zero2(void **state)
{
    (void)state;
    check_accumulate_clip(DT_DP_ZERO2);
}
static void test_accumulate_clip_zero3(void **state)
{
    (void)state;
    check_accumulate_clip(DT_DP_ZERO3);
}

/* ZeRO-1/3 AdamW state placed like the shards: full states equal single-rank's */
static void check_state(dt_dp_stage stage)
{
    dt_mesh *mesh = mr_world_mesh("dp");
    dt_module *m = NULL, *ref = NULL;
    dt_optim *o = NULL, *ro = NULL;
    DP_OK(dt_gpt_create(&cfg, 1234, &m));
    DP_OK(dt_gpt_create(&cfg, 1234, &ref));
    dt_fsdp_params fp = {.field_mask = DT_FSDP_PARAM_FIELD_STAGE | DT_FSDP_PARAM_FIELD_GRAD_SCALE,
                         .stage = stage,
                         .grad_scale = share(mesh, BATCH)};
    DP_OK(dt_fully_shard(m, mesh, "dp", &fp));
    DP_OK(dt_optim_adamw_create(m, NULL, &o));
    DP_OK(dt_optim_adamw_create(ref, NULL, &ro));
    dt_tensor *t = NULL;
    assert_int_equal(dt_optim_state_placed(o, 0, "exp_avg", &t), DT_ERR_NOT_FOUND);
    for (int s = 0; s < 2; s++) {
        dt_optim_zero_grad(o), dt_optim_zero_grad(ro);
        fwd_bwd(m, mesh, s, 0.0), fwd_bwd(ref, NULL, s, 0.0);
        DP_OK(dt_optim_step(o));
        DP_OK(dt_optim_step(ro));
    }
    assert_int_equal(dt_optim_num_params(o), dt_optim_num_params(ro));
    double d = 0.0, n = 0.0;
    for (int i = 0; i < dt_optim_num_params(o); i++) {
        dt_tensor *placed = NULL, *full = NULL, *r = dt_optim_param_state(ro, i, "exp_avg_sq");
        DP_OK(dt_optim_state_placed(o, i, "exp_avg_sq", &placed));
        if (stage != DT_DP_DDP && dt_tensor_numel(r) >= 64) /* sharded over dp */
            assert_true(dt_tensor_numel(dt_to_local(placed)) < dt_tensor_numel(r));
        DP_OK(dt_full_tensor(placed, &full));
        assert_int_equal(dt_tensor_numel(full), dt_tensor_numel(r));
        const float *a = dt_tensor_data(full), *b = dt_tensor_data(r);
        for (int64_t k = 0; k < dt_tensor_numel(r); k++)
            d += (a[k] - b[k]) * (double)(a[k] - b[k]), n += (double)b[k] * b[k];
        dt_tensor_release(full);
        dt_tensor_release(placed);
    }
    print_message("%s: exp_avg_sq full vs single rel %.3g\n", dt_dp_stage_name(stage), sqrt(d / n));
    assert_true(sqrt(d / n) < 1e-5);
    dt_optim_destroy(o), dt_optim_destroy(ro);
    dt_module_destroy(m), dt_module_destroy(ref);
    dt_mesh_release(mesh);
}

static void test_state_zero1(void **state)
{
    (void)state;
    check_state(DT_DP_ZERO1);
}
static void test_state_zero3(void **state)
{
    (void)state;
    check_state(DT_DP_ZERO3);
}

/* a module whose forward uses child "a" only ("b" gets no gradient) */
static dt_status only_a(dt_module *m, int n, dt_tensor *const *in, dt_tensor **out)
{
    return dt_module_forward(dt_module_child(m, "a"), n, in, out);
}
static const dt_module_ops only_a_ops = {.type_name = "OnlyA", .forward = only_a};

static void check_unused(dt_dp_stage stage)
{
    dt_mesh *mesh = mr_world_mesh("dp");
    dt_module *m = NULL, *a = NULL, *b = NULL;
    DP_OK(dt_module_create(&only_a_ops, NULL, &m));
    DP_OK(dt_linear_create(8, 4, true, &a));
    DP_OK(dt_module_add_child(m, "a", a));
    DP_OK(dt_linear_create(8, 4, true, &b));
    DP_OK(dt_module_add_child(m, "b", b));
    DP_OK(dt_param_init(dt_module_param(a, "weight"), "a.weight", 1, 0.5, 0.0));
    dt_fsdp_params fp = {.field_mask = DT_FSDP_PARAM_FIELD_STAGE, .stage = stage};
    DP_OK(dt_fully_shard(m, mesh, "dp", &fp));
    dt_optim *o = NULL;
    DP_OK(dt_optim_sgd_create(m, NULL, &o));
    int64_t xs[2] = {3, 8}, n = 3;
    dt_tensor *x = NULL, *y = NULL, *out = NULL, *loss = NULL;
    DP_OK(dt_tensor_empty(2, xs, DT_DTYPE_F32, dt_device_cpu(), &x));
    DP_OK(dt_tensor_fill_normal(x, 0.0, 1.0, 7 + (uint64_t)dt_mesh_rank(mesh), NULL, NULL));
    DP_OK(dt_tensor_zeros(1, &n, DT_DTYPE_I64, dt_device_cpu(), &y));
    for (int s = 0; s < 2; s++) {
        dt_optim_zero_grad(o);
        DP_OK(dt_module_call(m, x, &out));
        DP_OK(dt_nn_cross_entropy(out, y, &loss));
        DP_OK(dt_backward(loss, NULL)); /* must not wait for b's gradient */
        assert_non_null(dt_tensor_grad(dt_module_param(a, "weight")));
        if (stage == DT_DP_DDP) /* DDP: b's bucket entries are zeros */
            assert_non_null(dt_tensor_grad(dt_module_param(b, "weight")));
        else
            assert_null(dt_tensor_grad(dt_module_param(b, "weight")));
        DP_OK(dt_optim_step(o));
        dt_tensor_release(out), dt_tensor_release(loss);
    }
    dt_tensor_release(x), dt_tensor_release(y);
    dt_optim_destroy(o);
    dt_module_destroy(m);
    dt_mesh_release(mesh);
}

static void test_unused_ddp(void **state)
{
    (void)state;
    check_unused(DT_DP_DDP);
}
static void test_unused_zero2(void **state)
{
    (void)state;
    check_unused(DT_DP_ZERO2);
}
static void test_unused_zero3(void **state)
{
    (void)state;
    check_unused(DT_DP_ZERO3);
}

/* Linear(8 -> 1) then Linear(1 -> 3): dims of size 1 and 3 over dp=2 give
 * shards of 1 and 0 rows (an empty shard) and of 2 and 1 */
static dt_module *small_net(void)
{
    dt_module *seq = NULL, *a = NULL, *b = NULL;
    dt_nn_manual_seed(3); /* the same net (biases too) at every call */
    DP_OK(dt_sequential_create(&seq));
    DP_OK(dt_linear_create(8, 1, true, &a));
    DP_OK(dt_sequential_append(seq, a));
    DP_OK(dt_linear_create(1, 3, true, &b));
    DP_OK(dt_sequential_append(seq, b));
    DP_OK(dt_param_init(dt_module_param(a, "weight"), "0.weight", 3, 0.5, 0.0));
    DP_OK(dt_param_init(dt_module_param(b, "weight"), "1.weight", 3, 0.5, 0.0));
    return seq;
}

static void small_steps(dt_module *m, dt_optim *o, int64_t lo, int64_t hi)
{
    int64_t xs[2] = {4, 8}, n = 4;
    dt_tensor *x = NULL, *y = NULL, *xl = NULL, *yl = NULL, *out = NULL, *loss = NULL;
    DP_OK(dt_tensor_empty(2, xs, DT_DTYPE_F32, dt_device_cpu(), &x));
    DP_OK(dt_tensor_fill_normal(x, 0.0, 1.0, 11, NULL, NULL));
    DP_OK(dt_tensor_empty(1, &n, DT_DTYPE_I64, dt_device_cpu(), &y));
    for (int i = 0; i < 4; i++)
        ((int64_t *)dt_tensor_data(y))[i] = i % 3;
    DP_OK(dt_tensor_narrow(x, 0, lo, hi - lo, &xl));
    DP_OK(dt_tensor_narrow(y, 0, lo, hi - lo, &yl));
    for (int s = 0; s < 3; s++) {
        dt_optim_zero_grad(o);
        DP_OK(dt_module_call(m, xl, &out));
        DP_OK(dt_nn_cross_entropy(out, yl, &loss));
        DP_OK(dt_backward(loss, NULL));
        DP_OK(dt_optim_step(o));
        dt_tensor_release(out), dt_tensor_release(loss);
    }
    dt_tensor_release(x), dt_tensor_release(y), dt_tensor_release(xl), dt_tensor_release(yl);
}

static void check_empty_shards(dt_dp_stage stage)
{
    dt_mesh *mesh = mr_world_mesh("dp");
    int R = dt_mesh_size(mesh), r = dt_mesh_rank(mesh);
    dt_module *ref = small_net(), *m = small_net();
    dt_optim *ro = NULL, *o = NULL;
    dt_sgd_params sp = {.field_mask = DT_SGD_PARAM_FIELD_LR, .lr = 0.5};
    DP_OK(dt_optim_sgd_create(ref, &sp, &ro));
    small_steps(ref, ro, 0, 4);
    dt_fsdp_params fp = {.field_mask = DT_FSDP_PARAM_FIELD_STAGE | DT_FSDP_PARAM_FIELD_GRAD_SCALE,
                         .stage = stage,
                         .grad_scale = share(mesh, 4)};
    DP_OK(dt_fully_shard(m, mesh, "dp", &fp));
    DP_OK(dt_optim_sgd_create(m, &sp, &o));
    if (R == 2) /* rank 1 holds no row of 0.weight */
        assert_int_equal(dt_tensor_dim(dt_to_local(mr_param_at(m, "0.weight")), 0), 1 - r);
    small_steps(m, o, r * 4 / R, (r + 1) * 4 / R);
    mr_cmp c = mr_compare_weights(m, ref, 0.0);
    print_message("%s empty shards: weights rel %.3g\n", dt_dp_stage_name(stage), c.rel);
    assert_true(c.rel < 1e-6);
    dt_optim_destroy(o), dt_optim_destroy(ro);
    dt_module_destroy(m), dt_module_destroy(ref);
    dt_mesh_release(mesh);
}

static void test_empty_shards_zero1(void **state)
{
    (void)state;
    check_empty_shards(DT_DP_ZERO1);
}
static void test_empty_shards_zero2(void **state)
{
    (void)state;
    check_empty_shards(DT_DP_ZERO2);
}
static void test_empty_shards_zero3(void **state)
{
    (void)state;
    check_empty_shards(DT_DP_ZERO3);
}

/* units given by pattern (the rest stays with the root), no prefetch */
static void test_units_no_prefetch(void **state)
{
    (void)state;
    double rl[3], l[3];
    dt_module *ref = NULL, *m = NULL;
    dp_run r0 = {.stage = -1};
    DP_OK(dt_gpt_create(&cfg, 1234, &ref));
    dp_train(ref, &r0, MR_ADAMW, data, 3, BATCH, SEQ, rl);
    int w = dt_runtime_size(mr_rt), shape[2] = {w, 1}, r = dt_runtime_rank(mr_rt);
    const char *names[2] = {"dp", "tp"};
    dt_fsdp_params fp = {.field_mask = DT_FSDP_PARAM_FIELD_UNITS | DT_FSDP_PARAM_FIELD_PREFETCH |
                                       DT_FSDP_PARAM_FIELD_GRAD_SCALE,
                         .units = "layers.*",
                         .prefetch = false,
                         .grad_scale = (double)((r + 1) * BATCH / w - r * BATCH / w) / BATCH};
    dp_run run = {.stage = DT_DP_ZERO3, .fsdp = &fp};
    DP_OK(dt_mesh_create(mr_rt, 2, shape, names, &run.mesh));
    DP_OK(dt_gpt_create(&cfg, 1234, &m));
    dp_parallelize(m, &run);
    dp_train(m, &run, MR_ADAMW, data, 3, BATCH, SEQ, l);
    for (int s = 0; s < 3; s++)
        assert_true(fabs(l[s] - rl[s]) <= 1e-5 * rl[s]);
    dt_module_destroy(m);
    dt_module_destroy(ref);
    dt_mesh_release(run.mesh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_shards_full_tensor),
        cmocka_unit_test(test_save_load_full),
        cmocka_unit_test(test_no_sync),
        cmocka_unit_test(test_accumulate_clip_ddp),
        cmocka_unit_test(test_accumulate_clip_zero1),
        cmocka_unit_test(test_accumulate_clip_zero2),
        cmocka_unit_test(test_accumulate_clip_zero3),
        cmocka_unit_test(test_units_no_prefetch),
        cmocka_unit_test(test_state_zero1),
        cmocka_unit_test(test_state_zero3),
        cmocka_unit_test(test_unused_ddp),
        cmocka_unit_test(test_unused_zero2),
        cmocka_unit_test(test_empty_shards_zero1),
        cmocka_unit_test(test_empty_shards_zero2),
        cmocka_unit_test(test_empty_shards_zero3),
        cmocka_unit_test(test_unused_zero3),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
