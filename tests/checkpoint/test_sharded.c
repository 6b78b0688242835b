/*
 * Sharded checkpoints over real dtrun ranks (2, 3, 4): save a GPT under one
 * mesh and plan, load it under others - another placement per parameter,
 * 1-d <-> 2-d meshes (tp=w <-> dp x tp, e.g. dp=2 x tp=2 -> tp=4 on 4 ranks),
 * and all-local models (resume on one rank) - and get exactly the saved
 * weights. A second save into the same directory replaces the first whole;
 * all ranks saving one local model leave one checkpoint.
 */
#include <dirent.h>

#include "ck_gpt_util.h"
#include "common/multirank.h"

/* Parameter i: Shard(0), Shard(-1) or Replicate by (i + shift) % 3 on the
 * last mesh dim; on a 2-d mesh the first dim replicates (data parallel) or,
 * for every 4th parameter, also shards dim 0 (nested). */
static void place(int i, int nd, dt_placement *pl, void *user)
{
    int shift = *(int *)user, k = (i + shift) % 3;
    pl[nd - 1] = k == 0 ? dt_shard(0) : k == 1 ? dt_shard(-1) : dt_replicate();
    if (nd == 2)
        pl[0] = (i % 4 == 3) ? dt_shard(0) : dt_replicate();
}

static int rank_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d))
        n += strncmp(e->d_name, "rank-", 5) == 0;
    closedir(d);
    return n;
}

static void test_reshard(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt), r = dt_runtime_rank(mr_rt);
    char dir[64];
    snprintf(dir, sizeof(dir), "ck_sharded_np%d", w);
    if (r == 0)
        ck_rmdir(dir);
    mr_barrier();
    int s1[1] = {w}, s2a[2] = {1, w}, s2b[2] = {w, 1};
    if (w == 4) {
        s2a[0] = 2;
        s2a[1] = 2;
    }
    dt_mesh *m1 = NULL, *m2a = NULL, *m2b = NULL;
    CK_OK(dt_mesh_create(mr_rt, 1, s1, NULL, &m1));
    CK_OK(dt_mesh_create(mr_rt, 2, s2a, NULL, &m2a));
    CK_OK(dt_mesh_create(mr_rt, 2, s2b, NULL, &m2b));
    dt_mesh *meshes[3] = {m1, m2a, m2b};
    dt_module *ref = ck_gpt("tiny", 7);
    for (int src = 0; src < 3; src++) {
        /* save from mesh src with shift 0 */
        dt_module *a = ck_gpt("tiny", 7);
        int shift = 0;
        ck_shard_model(a, meshes[src], place, &shift);
        CK_OK(dt_checkpoint_save(a, NULL, dir));
        mr_barrier();
        /* load into every mesh with other placements, and into a local model */
        for (int dst = 0; dst < 3; dst++) {
            dt_module *b = ck_gpt("tiny", 100 + dst);
            int sh = 1 + dst;
            ck_shard_model(b, meshes[dst], place, &sh);
            CK_OK(dt_checkpoint_load(b, NULL, dir));
            char what[64];
            snprintf(what, sizeof(what), "mesh %d -> mesh %d", src, dst);
            ck_assert_same_weights(b, ref, what);
            dt_module_destroy(b);
        }
        dt_module *local = ck_gpt("tiny", 55);
        CK_OK(dt_checkpoint_load(local, NULL, dir));
        ck_assert_same_weights(local, ref, "to one rank");
        dt_module_destroy(local);
        dt_module_destroy(a);
        mr_barrier();
        /* a second save replaces the first: older rank files are gone */
        if (r == 0)
            assert_true(rank_files(dir) <= w);
    }
    /* local -> sharded: a save of local parameters loads on every mesh. Every
     * rank calls it (not collective): only rank 0 writes, so the ranks do not
     * sweep each other's files; twice, so a save replaces a save */
    mr_barrier();
    for (int again = 0; again < 2; again++) {
        dt_module *l = ck_gpt("tiny", 7);
        CK_OK(dt_checkpoint_save(l, NULL, dir));
        dt_module_destroy(l);
        mr_barrier();
        if (r == 0)
            assert_int_equal(rank_files(dir), 1);
        mr_barrier();
    }
    dt_module *b = ck_gpt("tiny", 9);
    int sh = 2;
    ck_shard_model(b, m2a, place, &sh);
    CK_OK(dt_checkpoint_load(b, NULL, dir));
    ck_assert_same_weights(b, ref, "one rank -> mesh");
    /* errors name what is wrong, on every rank, without communication */
    char missing[96];
    snprintf(missing, sizeof(missing), "%s/none", dir);
    CK_FAILS(dt_checkpoint_load(b, NULL, missing), DT_ERR_SYSTEM, "index.json");
    dt_module *other = NULL;
    dt_gpt_config cfg;
    CK_OK(dt_gpt_config_preset("tiny", &cfg));
    cfg.vocab_size = 128;
    CK_OK(dt_gpt_create(&cfg, 1, &other));
    CK_FAILS(dt_checkpoint_load(other, NULL, dir), DT_ERR_INVALID_ARG,
             "parameter 'tok_embeddings.weight' is f32 [128, 64] in the model, f32 [256, 64]");
    dt_module_destroy(other);
    dt_module_destroy(b);
    dt_module_destroy(ref);
    dt_mesh_release(m1);
    dt_mesh_release(m2a);
    dt_mesh_release(m2b);
    mr_barrier();
    if (r == 0)
        ck_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reshard),
    };
    return cmocka_run_group_tests(tests, mr_setup, mr_teardown);
}
