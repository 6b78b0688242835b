/*
 * Sharded checkpoints on one process: hostile index.json files (every class
 * with its exact error), checkpoints whose index and rank files disagree, and
 * the model left untouched by every failed load.
 */
#include <cjson/cJSON.h>

#include "checkpoint/ck_index.h"
#include "ck_gpt_util.h"

static void expect_parse(const char *text, const char *want)
{
    dt_ck_index *x = NULL;
    dt_status st = dt__ck_index_parse(text, strlen(text), "idx", &x);
    if (st != DT_ERR_FORMAT || strstr(dt_last_error(), want) == NULL)
        fail_msg("index %.100s: got %s '%s', want FORMAT with '%s'", text, dt_status_str(st),
                 dt_last_error(), want);
    assert_null(x);
}

#define HEAD                                                                                       \
    "{\"format\":\"dtensor-sharded\",\"version\":1,\"save_id\":\"x\",\"world_size\":2,"            \
    "\"tensors\":"
#define SH(file, off, shape)                                                                       \
    "{\"file\":\"" file "\",\"key\":\"w\",\"offset\":" off ",\"shape\":" shape "}"
#define W(shards) HEAD "{\"w\":{\"dtype\":\"F32\",\"shape\":[4,6],\"shards\":[" shards "]}}}"

static void test_parse(void **state)
{
    (void)state;
    dt_ck_index *x = NULL;
    const char *ok = W(SH("a", "[0,0]", "[2,6]") "," SH("b", "[2,0]", "[2,6]"));
    CK_OK(dt__ck_index_parse(ok, strlen(ok), "idx", &x));
    assert_int_equal(x->n, 1);
    assert_int_equal(x->world_size, 2);
    assert_int_equal(x->entries[0].n_shards, 2);
    assert_int_equal(x->entries[0].shards[1].offset[0], 2);
    assert_non_null(dt__ck_index_find(x, "w"));
    assert_null(dt__ck_index_find(x, "v"));
    dt__ck_index_free(x);

    expect_parse("[1]", "idx: not a JSON object");
    expect_parse("{", "idx: not valid JSON");
    expect_parse("{} x", "bytes after the JSON at 3");
    expect_parse("{\"a\xff\":1}", "not valid UTF-8 (byte 3)");
    expect_parse("{\"format\":\"other\",\"version\":1}", "not a dtensor-sharded version 1 index");
    expect_parse("{\"format\":\"dtensor-sharded\",\"version\":2}",
                 "not a dtensor-sharded version 1");
    expect_parse("{\"format\":\"dtensor-sharded\",\"version\":1,\"world_size\":0}",
                 "world_size is not");
    expect_parse("{\"format\":\"dtensor-sharded\",\"version\":1,\"world_size\":1}",
                 "save_id missing");
    expect_parse(HEAD "[]}", "tensors is not an object");
    expect_parse(HEAD "{\"w\":1}}", "tensor 'w' is not an object");
    expect_parse(HEAD "{\"w\":{\"dtype\":\"BOOL\",\"shape\":[1],\"shards\":[]}}}",
                 "tensor 'w': dtype missing or not one of dtensor's");
    expect_parse(HEAD "{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"shards\":[]}}}",
                 "tensor 'w': shape is not up to 8 non-negative integers");
    expect_parse(HEAD "{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"shards\":[]}}}", "shape is not");
    expect_parse(HEAD "{\"w\":{\"dtype\":\"F32\",\"shape\":[0,4294967296,4294967296],"
                      "\"shards\":[]}}}",
                 "tensor 'w': shape [0, 4294967296, 4294967296] is too large");
    expect_parse(HEAD "{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}}",
                 "tensor 'w': shards is not an array");
    expect_parse(W("5"), "tensor 'w' shard 0 is not an object");
    expect_parse(W(SH("../etc/passwd", "[0,0]", "[1,1]")),
                 "shard 0: file is not a plain file name");
    expect_parse(W(SH("d/x", "[0,0]", "[1,1]")), "file is not a plain file name");
    expect_parse(W(SH(".hidden", "[0,0]", "[1,1]")), "file is not a plain file name");
    expect_parse(W(SH("a", "[0]", "[1,1]")),
                 "shard 0: offset and shape must be 2 non-negative integers");
    expect_parse(W(SH("a", "[0,-1]", "[1,1]")), "offset and shape must be");
    expect_parse(W(SH("a", "[3,0]", "[2,6]")), "shard 0: dim 0 [3, +2) is outside size 4");
    expect_parse(W(SH("a", "[0,0]", "[1,9007199254740992]")),
                 "dim 1 [0, +9007199254740992) is outside");
    expect_parse(W(SH("a", "[0,0]", "[2,6]") "," SH("b", "[1,5]", "[2,1]")),
                 "tensor 'w': shards 0 and 1 overlap");
    /* overlaps found by the sweep even when the pair is not adjacent in it */
    expect_parse(W(SH("a", "[0,0]", "[4,2]") "," SH("b", "[0,2]", "[2,2]") "," SH(
                     "c", "[2,2]", "[2,2]") "," SH("d", "[1,3]", "[1,1]")),
                 "tensor 'w': shards 1 and 3 overlap");
    expect_parse(W(SH("a", "[0,0]", "[4,2]") "," SH("b", "[0,2]", "[2,4]") "," SH(
                     "c", "[2,2]", "[2,4]") "," SH("d", "[3,1]", "[1,2]")),
                 "tensor 'w': shards 0 and 3 overlap");
    expect_parse(HEAD "{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"shards\":[" SH(
                     "a", "[]", "[]") "," SH("b", "[]", "[]") "]}}}",
                 "tensor 's': shards 0 and 1 overlap");
    /* empty shards overlap nothing */
    const char *empties = W(SH("a", "[0,0]", "[4,6]") "," SH("b", "[2,3]", "[0,2]"));
    CK_OK(dt__ck_index_parse(empties, strlen(empties), "idx", &x));
    dt__ck_index_free(x);
    /* the optional optimizer section */
    const char *with_optim =
        "{\"format\":\"dtensor-sharded\",\"version\":1,\"save_id\":\"x\","
        "\"world_size\":1,\"optim\":{\"name\":\"adamw\",\"step\":7,\"lr\":0.1},"
        "\"tensors\":{}}";
    CK_OK(dt__ck_index_parse(with_optim, strlen(with_optim), "idx", &x));
    assert_string_equal(x->optim_name, "adamw");
    assert_int_equal(x->optim_step, 7);
    dt__ck_index_free(x);
    CK_OK(dt__ck_index_parse(ok, strlen(ok), "idx", &x));
    assert_null(x->optim_name);
    dt__ck_index_free(x);
#define OPT(o)                                                                                     \
    "{\"format\":\"dtensor-sharded\",\"version\":1,\"save_id\":\"x\",\"world_size\":1,"            \
    "\"optim\":" o ",\"tensors\":{}}"
    const char *want_optim = "idx: optim is not an object with a string name and an integer step";
    expect_parse(OPT("[1]"), want_optim);
    expect_parse(OPT("{\"name\":1,\"step\":1}"), want_optim);
    expect_parse(OPT("{\"name\":\"sgd\"}"), want_optim);
    expect_parse(OPT("{\"name\":\"sgd\",\"step\":-1}"), want_optim);
    expect_parse(OPT("{\"name\":\"sgd\",\"step\":1.5}"), want_optim);
    expect_parse(W("{\"file\":\"a\",\"offset\":[0,0],\"shape\":[1,1]}"),
                 "key missing or not a string");
    expect_parse(HEAD "{\"w\":{\"dtype\":\"F32\",\"shape\":[],\"shards\":[]},"
                      "\"w\":{\"dtype\":\"F32\",\"shape\":[],\"shards\":[]}}}",
                 "duplicate tensor 'w'");
}

/* Rewrite <dir>/index.json through @p edit_root (the whole object) or @p edit (its tensors). */
static void rewrite_index(const char *dir, void (*edit_root)(cJSON *root),
                          void (*edit)(cJSON *tensors))
{
    char path[600];
    snprintf(path, sizeof(path), "%s/index.json", dir);
    size_t len = 0;
    char *text = (char *)ck_read_all(path, &len);
    text[len] = '\0';
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (edit_root != NULL)
        edit_root(root);
    if (edit != NULL)
        edit(cJSON_GetObjectItem(root, "tensors"));
    char *out = cJSON_Print(root);
    ck_write_all(path, out, strlen(out));
    free(out);
    cJSON_Delete(root);
}

static void edit_index(const char *dir, void (*edit)(cJSON *tensors))
{
    rewrite_index(dir, NULL, edit);
}

/* index.json claims another optimizer step than the rank files hold */
static void e_step(cJSON *root)
{
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "optim"), "step", cJSON_CreateNumber(9));
}
static void e_optim_name(cJSON *root)
{
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "optim"), "name",
                              cJSON_CreateString("sgd"));
}
/* index.json of another save naming this save's files */
static void e_save_id(cJSON *root)
{
    cJSON_ReplaceItemInObject(root, "save_id", cJSON_CreateString("00000000000000ff"));
}

static cJSON *shard0(cJSON *ts, const char *fqn)
{
    return cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(ts, fqn), "shards"), 0);
}

static void e_drop_shards(cJSON *ts)
{
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(ts, "norm.bias"), "shards");
    cJSON_AddArrayToObject(cJSON_GetObjectItem(ts, "norm.bias"), "shards");
}
static void e_wrong_key(cJSON *ts)
{
    cJSON_ReplaceItemInObject(shard0(ts, "norm.bias"), "key", cJSON_CreateString("output.weight"));
}
static void e_missing_key(cJSON *ts)
{
    cJSON_ReplaceItemInObject(shard0(ts, "norm.bias"), "key", cJSON_CreateString("nope"));
}
static void e_missing_file(cJSON *ts)
{
    cJSON_ReplaceItemInObject(shard0(ts, "norm.bias"), "file",
                              cJSON_CreateString("rank-9.x.safetensors"));
}
static void e_extra(cJSON *ts)
{
    cJSON_AddItemReferenceToObject(ts, "extra.weight", cJSON_GetObjectItem(ts, "norm.bias"));
}
static void e_drop_param(cJSON *ts)
{
    cJSON_DeleteItemFromObject(ts, "norm.weight");
}

static void test_inconsistent(void **state)
{
    (void)state;
    char dir[256], ck[300];
    ck_tmpdir(dir, sizeof(dir), "idx");
    snprintf(ck, sizeof(ck), "%s/ck", dir);
    dt_module *src = ck_gpt("tiny", 11), *dst = ck_gpt("tiny", 12);
    static dt_tensor *snap[CK_MAX_PARAMS];
    int n = 0;
    ck_snapshot(dst, snap, &n);
    CK_OK(dt_checkpoint_save(src, NULL, ck));
    CK_OK(dt_checkpoint_load(dst, NULL, ck));
    ck_assert_same_weights(dst, src, "round trip");
    dt_module_destroy(dst);
    dst = ck_gpt("tiny", 12);

    struct {
        void (*edit)(cJSON *);
        dt_status st;
        const char *msg;
    } cases[] = {
        {e_drop_shards, DT_ERR_FORMAT, "the shards of 'norm.bias' in"},
        {e_wrong_key, DT_ERR_FORMAT,
         "holds 'output.weight' as F32 [256, 64], index.json says f32 [64]"},
        {e_missing_key, DT_ERR_FORMAT, "has no tensor 'nope' (a shard of 'norm.bias')"},
        {e_missing_file, DT_ERR_SYSTEM, "rank-9.x.safetensors"},
        {e_extra, DT_ERR_INVALID_ARG,
         "the checkpoint holds 'extra.weight', which the model does not have"},
        {e_drop_param, DT_ERR_INVALID_ARG, "parameter 'norm.weight' is missing from"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        CK_OK(dt_checkpoint_save(src, NULL, ck));
        edit_index(ck, cases[k].edit);
        CK_FAILS(dt_checkpoint_load(dst, NULL, ck), cases[k].st, cases[k].msg);
        ck_assert_params(dst, snap, n, cases[k].msg);
    }
    /* with an optimizer: a failed load leaves the weights, the state and the step alone */
    dt_optim *so = NULL, *dopt = NULL;
    dt_adamw_params ap = {0};
    CK_OK(dt_optim_adamw_create(src, &ap, &so));
    CK_OK(dt_optim_adamw_create(dst, &ap, &dopt));
    CK_OK(dt_optim_set_step_count(so, 5));
    CK_OK(dt_checkpoint_save(src, so, ck));
    edit_index(ck, e_missing_key);
    CK_FAILS(dt_checkpoint_load(dst, dopt, ck), DT_ERR_FORMAT, "has no tensor 'nope'");
    ck_assert_params(dst, snap, n, "failed load with an optimizer");
    assert_int_equal(dt_optim_step_count(dopt), 0);
    dt_tensor *ea = dt_optim_param_state(dopt, 0, "exp_avg");
    if (ea != NULL) { /* allocated zero by the load (what the first step uses), never filled */
        dt_tensor *z = NULL;
        CK_OK(dt_tensor_zeros(dt_tensor_ndim(ea), dt_tensor_shape(ea), DT_DTYPE_F32,
                              dt_device_cpu(), &z));
        assert_true(dt_tensor_equal(ea, z));
        dt_tensor_release(z);
    }
    /* the step training resumes from is checked against the rank files, both named */
    CK_OK(dt_checkpoint_save(src, so, ck));
    rewrite_index(ck, e_step, NULL);
    CK_FAILS(dt_checkpoint_load(dst, dopt, ck), DT_ERR_FORMAT,
             "/index.json records optimizer step 9, but ");
    CK_FAILS(dt_checkpoint_load(dst, dopt, ck), DT_ERR_FORMAT, ".safetensors holds step 5");
    assert_int_equal(dt_optim_step_count(dopt), 0);
    ck_assert_params(dst, snap, n, "load with a step index.json and the rank files disagree on");
    CK_OK(dt_checkpoint_load(dst, NULL, ck)); /* the step does not matter without the optimizer */
    dt_optim_destroy(dopt);
    dt_module_destroy(dst);
    dst = ck_gpt("tiny", 12);
    CK_OK(dt_optim_adamw_create(dst, &ap, &dopt));
    CK_OK(dt_checkpoint_save(src, so, ck));
    rewrite_index(ck, e_optim_name, NULL);
    dt_optim *sgd = NULL;
    dt_sgd_params sp = {0};
    CK_OK(dt_optim_sgd_create(dst, &sp, &sgd));
    CK_FAILS(dt_checkpoint_load(dst, sgd, ck), DT_ERR_FORMAT,
             "/index.json records sgd optimizer state, but ");
    dt_optim_destroy(sgd);
    CK_OK(dt_checkpoint_save(src, so, ck));
    rewrite_index(ck, e_save_id, NULL);
    CK_FAILS(dt_checkpoint_load(dst, NULL, ck), DT_ERR_FORMAT,
             "/index.json is of save 00000000000000ff");
    ck_assert_params(dst, snap, n, "load of another save's files");
    CK_OK(dt_checkpoint_save(src, so, ck));
    CK_OK(dt_checkpoint_load(dst, dopt, ck));
    assert_int_equal(dt_optim_step_count(dopt), 5);
    CK_FAILS(dt_optim_set_step_count(dopt, -1), DT_ERR_INVALID_ARG, "-1 steps");
    dt_optim_destroy(so);
    dt_optim_destroy(dopt);
    ck_release_all(snap, n);
    dt_module_destroy(src);
    dt_module_destroy(dst);
    ck_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_inconsistent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
