/* Meshes over real ranks: one comm per mesh dim, the right members, slices share comms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dtensor.h"

#define MT_OK(call)                                                                                \
    do {                                                                                           \
        dt_status mt_s_ = (call);                                                                  \
        if (mt_s_ != DT_OK)                                                                        \
            fail_msg("%s -> %s: %s", #call, dt_status_str(mt_s_), dt_last_error());                \
    } while (0)

static dt_runtime *rt;

static int setup(void **state)
{
    (void)state;
    return dt_init(NULL, &rt) == DT_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    dt_runtime_destroy(rt);
    return 0;
}

/* On every dim comm, all-gather the world ranks: they must be the ranks that
 * differ from mine only on that dim, in coordinate order. */
static void check_mesh(dt_mesh *m)
{
    int me = dt_runtime_rank(rt), c[4];
    dt_mesh_coordinate(m, c);
    for (int d = 0; d < dt_mesh_ndim(m); d++) {
        dt_comm *comm = dt_mesh_dim_comm(m, d);
        assert_non_null(comm);
        assert_int_equal(dt_comm_size(comm), dt_mesh_dim_size(m, d));
        assert_int_equal(dt_comm_rank(comm), c[d]);
        int64_t mine = dt_mesh_world_rank(m, dt_mesh_rank(m)), got[16];
        assert_int_equal(mine, me);
        MT_OK(dt_comm_allgather(comm, &mine, got, 1, DT_DTYPE_I64, NULL));
        for (int q = 0; q < dt_comm_size(comm); q++) {
            int cq[4], r;
            memcpy(cq, c, sizeof(cq));
            cq[d] = q;
            MT_OK(dt_mesh_coord_to_rank(m, cq, &r));
            assert_int_equal(got[q], dt_mesh_world_rank(m, r));
        }
    }
}

static void test_shapes(void **state)
{
    (void)state;
    int w = dt_runtime_size(rt);
    int shapes[4][3] = {{w}, {1, w}, {w, 1}, {2, 1, w / 2}};
    int nds[4] = {1, 2, 2, 3};
    const char *names[3] = {"dp", "cp", "tp"};
    for (int i = 0; i < 4; i++) {
        dt_mesh *m = NULL;
        if (nds[i] == 3 && w % 2 != 0)
            continue;
        MT_OK(dt_mesh_create(rt, nds[i], shapes[i], nds[i] == 3 ? names : NULL, &m));
        assert_int_equal(dt_mesh_rank(m), dt_runtime_rank(rt));
        check_mesh(m);
        if (nds[i] == 3) {
            dt_mesh *s = NULL;
            MT_OK(dt_mesh_slice(m, "dp,tp", &s));
            assert_int_equal(dt_mesh_size(s), w);
            check_mesh(s);
            assert_ptr_equal(dt_mesh_dim_comm(s, 1), dt_mesh_dim_comm(m, 2));
            if (dt_runtime_rank(rt) == 0)
                dt_mesh_print(m, stdout);
            dt_mesh_release(m); /* the slice keeps the comms alive */
            check_mesh(s);
            dt_mesh_release(s);
        } else {
            dt_mesh_release(m);
        }
    }
}

/* A bad shape fails on every rank without communicating (so nobody hangs). */
static void test_bad_shape(void **state)
{
    (void)state;
    int w = dt_runtime_size(rt), bad[2] = {w, 2};
    dt_mesh *m = NULL;
    assert_int_equal(dt_mesh_create(rt, 2, bad, NULL, &m), DT_ERR_INVALID_ARG);
    assert_null(m);
    char want[64];
    snprintf(want, sizeof(want), "world has %d", w);
    assert_non_null(strstr(dt_last_error(), want));
    const char *dup[2] = {"tp", "tp"};
    int ok[2] = {1, w};
    assert_int_equal(dt_mesh_create(rt, 2, ok, dup, &m), DT_ERR_INVALID_ARG);
    /* a product past INT_MAX is named as such, not as the number it wraps to */
    int huge[4] = {65536, 65536, 65536, 65536};
    assert_int_equal(dt_mesh_create(rt, 4, huge, NULL, &m), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "holds more than 2147483647 ranks"));
    assert_null(m);
    MT_OK(dt_comm_barrier(dt_runtime_world(rt), NULL)); /* everyone is still in step */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_shapes),
                                       cmocka_unit_test(test_bad_shape)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
