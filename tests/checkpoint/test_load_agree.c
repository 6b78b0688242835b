/*
 * A checkpoint that fails to load on one rank fails on all, in seconds, with
 * the failing rank's message (issue 16 item 3): the last rank's shard file of
 * a sharded checkpoint truncated, and the last rank reading a corrupt copy
 * of a full state dict. Every rank fails within 5 s naming the file; the
 * comms stay usable (the ranks agreed, nothing was aborted).
 */
#include <time.h>
#include <unistd.h>

#include "ck_gpt_util.h"
#include "common/multirank.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Every parameter Shard(0) over the mesh: every rank has a file of its own. */
static void shard0(int i, int nd, dt_placement *pl, void *user)
{
    (void)i;
    (void)user;
    for (int d = 0; d < nd; d++)
        pl[d] = dt_shard(0);
}

/* @p st, from a call started at @p t0, must be a failure within 5 s naming @p file. */
static void expect_agreed_failure(dt_status st, double t0, const char *file, const char *what)
{
    double took = now_s() - t0;
    int r = dt_runtime_rank(mr_rt);
    if (st == DT_OK)
        fail_msg("%s: rank %d loaded successfully", what, r);
    if (took > 5.0)
        fail_msg("%s: rank %d took %.2f s to fail", what, r, took);
    if (strstr(dt_last_error(), file) == NULL)
        fail_msg("%s: rank %d's error does not name %s: %s", what, r, file, dt_last_error());
    print_message("%s: %s after %.3f s: %s\n", what, dt_status_str(st), took, dt_last_error());
    mr_barrier(); /* the comms still work */
}

/* The path of world rank @p rank's file in @p dir (dir/rank-R.<save id>.safetensors). */
static void rank_file(const char *dir, int rank, char *out, size_t cap)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "ls %s/rank-%d.*.safetensors", dir, rank);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    if (fgets(out, (int)cap, p) == NULL)
        fail_msg("no rank file of rank %d in %s", rank, dir);
    pclose(p);
    out[strcspn(out, "\n")] = '\0';
}

static void test_corrupt_shard(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt), r = dt_runtime_rank(mr_rt);
    char dir[64], victim[512];
    snprintf(dir, sizeof(dir), "ck_agree_np%d", w);
    if (r == 0)
        ck_rmdir(dir);
    mr_barrier();
    dt_mesh *mesh = mr_world_mesh("tp");
    dt_module *a = ck_gpt("tiny", 7);
    ck_shard_model(a, mesh, shard0, NULL);
    CK_OK(dt_checkpoint_save(a, NULL, dir));
    rank_file(dir, w - 1, victim, sizeof(victim));
    if (r == 0) /* cut inside the header: only the last rank reads this file */
        assert_int_equal(truncate(victim, 100), 0);
    mr_barrier();
    double t0 = now_s();
    dt_status st = dt_checkpoint_load(a, NULL, dir);
    expect_agreed_failure(st, t0, victim, "sharded load, one shard truncated");
    if (r != w - 1 && strstr(dt_last_error(), "failed on world rank") == NULL)
        fail_msg("rank %d does not name the failing rank: %s", r, dt_last_error());
    dt_module_destroy(a);
    dt_mesh_release(mesh);
    mr_barrier();
    if (r == 0)
        ck_rmdir(dir);
}

static void test_corrupt_full(void **state)
{
    (void)state;
    int w = dt_runtime_size(mr_rt), r = dt_runtime_rank(mr_rt);
    char good[64], bad[64];
    snprintf(good, sizeof(good), "ck_agree_full_np%d.safetensors", w);
    snprintf(bad, sizeof(bad), "ck_agree_bad_np%d.safetensors", w);
    dt_mesh *mesh = mr_world_mesh("tp");
    dt_module *a = ck_gpt("tiny", 7);
    ck_shard_model(a, mesh, shard0, NULL);
    CK_OK(dt_save_full(a, good));
    if (r == 0) {
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "head -c 5000 %s > %s", good, bad);
        assert_int_equal(system(cmd), 0);
    }
    mr_barrier();
    const char *mine = r == w - 1 ? bad : good; /* only the last rank's file is corrupt */
    double t0 = now_s();
    dt_status st = dt_load_full(a, mine);
    expect_agreed_failure(st, t0, bad, "full load, one rank's file truncated");
    dt_module_destroy(a);
    dt_mesh_release(mesh);
    mr_barrier();
    if (r == 0) {
        unlink(good);
        unlink(bad);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corrupt_shard),
        cmocka_unit_test(test_corrupt_full),
    };
    return cmocka_run_group_tests(tests, mr_setup, mr_teardown);
}
