/*
 * Full state dicts of a GPT whose parameters are distributed over real dtrun
 * ranks (Shard(0), Shard(-1), Replicate; uneven shards on 3 ranks):
 * dt_save_full writes exactly the bytes a single-rank save of the same
 * weights writes, dt_load_full into a differently sharded model reproduces
 * the exact weights, and a writer failure is reported on every rank.
 */
#include "ck_gpt_util.h"
#include "common/multirank.h"

/* Parameter i gets placement (i + shift) % 3 of Shard(0), Shard(-1),
 * Replicate on mesh dim 0; the Replicate ones Shard(0) on the last dim of a
 * 2-d mesh; Replicate elsewhere. */
static void place(int i, int nd, dt_placement *pl, void *user)
{
    int k = (i + *(int *)user) % 3;
    pl[0] = k == 0 ? dt_shard(0) : k == 1 ? dt_shard(-1) : dt_replicate();
    for (int d = 1; d < nd; d++)
        pl[d] = (k == 2 && d == nd - 1) ? dt_shard(0) : dt_replicate();
}

static void run_on_mesh(int nd, const int *shape, const char *tag)
{
    int w = dt_runtime_size(mr_rt), r = dt_runtime_rank(mr_rt);
    char dir[128], ref[200], dist[200];
    snprintf(dir, sizeof(dir), "ck_dist_np%d_%s", w, tag);
    snprintf(ref, sizeof(ref), "%s/ref.safetensors", dir);
    snprintf(dist, sizeof(dist), "%s/dist.safetensors", dir);
    if (r == 0) {
        ck_rmdir(dir);
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "mkdir -p %s", dir);
        assert_int_equal(system(cmd), 0);
    }
    dt_mesh *mesh = NULL;
    CK_OK(dt_mesh_create(mr_rt, nd, shape, NULL, &mesh));
    dt_module *full = ck_gpt("tiny", 7), *a = ck_gpt("tiny", 7), *b = ck_gpt("tiny", 99);
    if (r == 0)
        CK_OK(dt_save_full(full, ref)); /* local parameters: not collective */
    int shift[2] = {0, 1};
    ck_shard_model(a, mesh, place, &shift[0]);
    ck_shard_model(b, mesh, place, &shift[1]);
    mr_barrier();
    CK_OK(dt_save_full(a, dist));
    mr_barrier();
    if (r == 0) {
        size_t la = 0, lb = 0;
        unsigned char *x = ck_read_all(ref, &la), *y = ck_read_all(dist, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(x, y, la);
        free(x);
        free(y);
    }
    /* load into b (other placements): every shard is its slice of the full weights */
    CK_OK(dt_load_full(b, dist));
    ck_params pb;
    ck_params_of(b, &pb);
    for (int i = 0; i < pb.n; i++)
        assert_true(dt_tensor_is_distributed(pb.t[i]));
    ck_assert_same_weights(b, full, "after dt_load_full");
    /* a writer that cannot create its file: every rank fails, none hangs */
    char bad[300];
    snprintf(bad, sizeof(bad), "%s/missing/x.safetensors", dir);
    dt_status st = dt_save_full(a, bad);
    assert_int_equal(st, DT_ERR_SYSTEM);
    assert_non_null(
        strstr(dt_last_error(), "cannot create")); /* the writer's message, everywhere */
    if (dt_mesh_rank(mesh) != 0)
        assert_non_null(strstr(dt_last_error(), "failed on world rank 0"));
    mr_barrier();
    dt_module_destroy(full);
    dt_module_destroy(a);
    dt_module_destroy(b);
    dt_mesh_release(mesh);
    mr_barrier();
    if (r == 0)
        ck_rmdir(dir);
}

static void test_mesh_1d(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt);
    run_on_mesh(1, &w, "1d");
}

static void test_mesh_2d(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt), shape[2] = {1, w};
    if (w == 4) {
        shape[0] = 2;
        shape[1] = 2;
    }
    run_on_mesh(2, shape, "2d");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mesh_1d),
        cmocka_unit_test(test_mesh_2d),
    };
    return cmocka_run_group_tests(tests, mr_setup, mr_teardown);
}
