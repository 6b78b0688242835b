/* Mesh layout without communication: virtual meshes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dtensor.h"
#include "dtensor/mesh.h"

static void test_coords_row_major(void **state)
{
    (void)state;
    int shape[3] = {2, 1, 3};
    dt_mesh *m = NULL;
    assert_int_equal(dt_mesh_create_virtual(3, shape, NULL, 4, &m), DT_OK);
    assert_int_equal(dt_mesh_ndim(m), 3);
    assert_int_equal(dt_mesh_size(m), 6);
    assert_int_equal(dt_mesh_rank(m), 4);
    int c[3];
    dt_mesh_coordinate(m, c);
    assert_int_equal(c[0], 1);
    assert_int_equal(c[1], 0);
    assert_int_equal(c[2], 1);
    for (int r = 0; r < 6; r++) {
        int rr = -1;
        assert_int_equal(dt_mesh_rank_to_coord(m, r, c), DT_OK);
        assert_int_equal(c[0], r / 3);
        assert_int_equal(c[2], r % 3);
        assert_int_equal(dt_mesh_coord_to_rank(m, c, &rr), DT_OK);
        assert_int_equal(rr, r);
    }
    assert_int_equal(dt_mesh_rank_to_coord(m, 6, c), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "rank 6"));
    c[0] = 0;
    c[1] = 1;
    c[2] = 0;
    int rr;
    assert_int_equal(dt_mesh_coord_to_rank(m, c, &rr), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_mesh_dim_size(m, -1), 3);
    assert_int_equal(dt_mesh_dim_size(m, 3), -1);
    assert_null(dt_mesh_dim_comm(m, 0));
    assert_null(dt_mesh_dim_name(m, 0));
    dt_mesh_release(m);
}

static void test_errors(void **state)
{
    (void)state;
    dt_mesh *m = NULL;
    int shape[2] = {2, 2};
    const char *dup[2] = {"tp", "tp"};
    assert_int_equal(dt_mesh_create_virtual(2, shape, dup, 0, &m), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "'tp'"));
    assert_null(m);
    assert_int_equal(dt_mesh_create_virtual(0, shape, NULL, 0, &m), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_mesh_create_virtual(5, shape, NULL, 0, &m), DT_ERR_INVALID_ARG);
    int bad[2] = {2, 0};
    assert_int_equal(dt_mesh_create_virtual(2, bad, NULL, 0, &m), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "size 0"));
    assert_int_equal(dt_mesh_create_virtual(2, shape, NULL, 4, &m), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "rank 4"));
    /* shape product vs world size is checked by the layout builder used by dt_mesh_create */
    const char *empty[2] = {"", "tp"};
    assert_int_equal(dt_mesh_create_virtual(2, shape, empty, 0, &m), DT_ERR_INVALID_ARG);
    /* more ranks than an int holds: refused naming the shape, never wrapped to a small world */
    int big[4] = {65536, 65536, 65536, 65536};
    assert_int_equal(dt_mesh_create_virtual(4, big, NULL, 0, &m), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(),
                           "mesh shape 65536x65536x65536x65536 holds more than 2147483647 ranks "
                           "(at dim 1 of size 65536)"));
    int wide[2] = {65536, 65537}; /* 4295032832 ranks: 65536 after wrapping to 32 bits */
    assert_int_equal(dt_mesh_create_virtual(2, wide, NULL, 0, &m), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "holds more than 2147483647 ranks"));
    assert_null(m);
}

static void test_names_and_slices(void **state)
{
    (void)state;
    int shape[3] = {2, 3, 2};
    const char *names[3] = {"pp", "dp", "tp"};
    dt_mesh *m = NULL, *s = NULL, *s2 = NULL;
    /* rank 9 = (1, 1, 1) */
    assert_int_equal(dt_mesh_create_virtual(3, shape, names, 9, &m), DT_OK);
    int d = -1;
    assert_int_equal(dt_mesh_dim_index(m, "dp", &d), DT_OK);
    assert_int_equal(d, 1);
    assert_int_equal(dt_mesh_dim_index(m, "ep", &d), DT_ERR_NOT_FOUND);
    assert_non_null(strstr(dt_last_error(), "'ep'"));
    assert_non_null(strstr(dt_last_error(), "pp, dp, tp"));

    assert_int_equal(dt_mesh_slice(m, "tp", &s), DT_OK);
    assert_int_equal(dt_mesh_ndim(s), 1);
    assert_int_equal(dt_mesh_size(s), 2);
    assert_int_equal(dt_mesh_rank(s), 1);
    assert_int_equal(dt_mesh_world_rank(s, 0), 8);
    assert_int_equal(dt_mesh_world_rank(s, 1), 9);
    assert_string_equal(dt_mesh_dim_name(s, 0), "tp");
    dt_mesh_release(s);

    assert_int_equal(dt_mesh_slice(m, "pp, tp", &s), DT_OK);
    assert_int_equal(dt_mesh_size(s), 4);
    int expect[4] = {2, 3, 8, 9}; /* dp fixed at 1 */
    for (int r = 0; r < 4; r++)
        assert_int_equal(dt_mesh_world_rank(s, r), expect[r]);
    assert_int_equal(dt_mesh_rank(s), 3);
    /* a slice of a slice */
    assert_int_equal(dt_mesh_slice(s, "pp", &s2), DT_OK);
    assert_int_equal(dt_mesh_world_rank(s2, 0), 3);
    assert_int_equal(dt_mesh_world_rank(s2, 1), 9);
    dt_mesh_release(s2);
    dt_mesh_release(s);

    assert_int_equal(dt_mesh_slice(m, "tp,dp", &s), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "mesh order"));
    assert_int_equal(dt_mesh_slice(m, "dp,dp", &s), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "twice"));
    assert_int_equal(dt_mesh_slice(m, "xx", &s), DT_ERR_NOT_FOUND);
    assert_non_null(strstr(dt_last_error(), "'xx'"));
    dt_mesh_release(m); /* the slices were released first; also fine the other way */
}

static void test_slice_outlives_parent(void **state)
{
    (void)state;
    int shape[2] = {2, 2};
    const char *names[2] = {"dp", "tp"};
    dt_mesh *m = NULL, *s = NULL;
    assert_int_equal(dt_mesh_create_virtual(2, shape, names, 2, &m), DT_OK);
    assert_int_equal(dt_mesh_slice(m, "dp", &s), DT_OK);
    dt_mesh_release(m);
    assert_int_equal(dt_mesh_world_rank(s, 0), 0);
    assert_int_equal(dt_mesh_world_rank(s, 1), 2);
    dt_mesh_release(s);
}

static void test_format(void **state)
{
    (void)state;
    int shape[2] = {2, 3};
    const char *names[2] = {"dp", "tp"};
    dt_mesh *m = NULL;
    char buf[256];
    assert_int_equal(dt_mesh_create_virtual(2, shape, names, 0, &m), DT_OK);
    dt_mesh_format(m, buf, sizeof(buf));
    assert_string_equal(buf, "mesh 2x3 (dp, tp)\n[[0, 1, 2],\n [3, 4, 5]]\n");
    dt_mesh_release(m);
    int s1[1] = {4};
    assert_int_equal(dt_mesh_create_virtual(1, s1, NULL, 0, &m), DT_OK);
    dt_mesh_format(m, buf, sizeof(buf));
    assert_string_equal(buf, "mesh 4\n[0, 1, 2, 3]\n");
    dt_mesh_release(m);
    int s3[3] = {2, 1, 2};
    assert_int_equal(dt_mesh_create_virtual(3, s3, NULL, 0, &m), DT_OK);
    int need = dt_mesh_format(m, buf, sizeof(buf));
    assert_int_equal(need, (int)strlen(buf));
    assert_string_equal(buf, "mesh 2x1x2\n[[[0, 1]],\n [[2, 3]]]\n");
    /* truncation keeps a terminated string */
    char small[8];
    dt_mesh_format(m, small, sizeof(small));
    assert_int_equal(strlen(small), 7);
    dt_mesh_release(m);
}

static void test_equal_and_stats(void **state)
{
    (void)state;
    int shape[2] = {2, 2};
    dt_mesh *a = NULL, *b = NULL, *s = NULL;
    assert_int_equal(dt_mesh_create_virtual(2, shape, NULL, 0, &a), DT_OK);
    assert_int_equal(dt_mesh_create_virtual(2, shape, NULL, 3, &b), DT_OK);
    assert_true(dt_mesh_equal(a, b)); /* same layout seen from two ranks */
    int d0 = 0;
    assert_int_equal(dt_mesh_slice_dims(a, 1, &d0, &s), DT_OK);
    assert_false(dt_mesh_equal(a, s));
    dt_coll_stats st;
    dt_mesh_coll_stats(s, &st);
    assert_int_equal(dt_coll_stats_total(&st), 0);
    assert_string_equal(dt_coll_kind_name(DT_COLL_ALLTOALL), "all-to-all");
    dt_mesh_release(s);
    dt_mesh_release(a);
    dt_mesh_release(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coords_row_major), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_names_and_slices), cmocka_unit_test(test_slice_outlives_parent),
        cmocka_unit_test(test_format),           cmocka_unit_test(test_equal_and_stats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
