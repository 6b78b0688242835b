/* Placements, shard math and specs: pure, no communication. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dtensor.h"

static void test_text_roundtrip(void **state)
{
    (void)state;
    char buf[64];
    dt_placement p;
    const char *ok[] = {"S(0)", "S(-1)", "R", "P(sum)", "P(avg)", "P(max)", "P(min)"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        assert_int_equal(dt_placement_parse(ok[i], &p), DT_OK);
        dt_placement_format(p, buf, sizeof(buf));
        assert_string_equal(buf, ok[i]);
    }
    assert_int_equal(dt_placement_parse("Shard(2)", &p), DT_OK);
    assert_true(dt_placement_equal(p, dt_shard(2)));
    assert_int_equal(dt_placement_parse("Replicate()", &p), DT_OK);
    assert_true(dt_placement_equal(p, dt_replicate()));
    assert_int_equal(dt_placement_parse("P", &p), DT_OK);
    assert_true(dt_placement_equal(p, dt_partial(DT_REDUCE_OP_SUM)));
    assert_int_equal(dt_placement_parse("Partial(max)", &p), DT_OK);
    assert_true(dt_placement_equal(p, dt_partial(DT_REDUCE_OP_MAX)));
    assert_false(dt_placement_equal(dt_partial(DT_REDUCE_OP_MAX), dt_partial(DT_REDUCE_OP_MIN)));
    assert_false(dt_placement_equal(dt_shard(0), dt_shard(1)));
    assert_false(dt_placement_equal(dt_shard(0), dt_replicate()));
    /* strided shards: "_S(d)" or "StridedShard(d)", never equal to the plain one */
    assert_int_equal(dt_placement_parse("_S(1)", &p), DT_OK);
    assert_true(dt_placement_equal(p, dt_strided_shard(1)));
    assert_true(dt_placement_is_shard(p, 1));
    dt_placement_format(p, buf, sizeof(buf));
    assert_string_equal(buf, "_S(1)");
    assert_int_equal(dt_placement_parse("StridedShard(-1)", &p), DT_OK);
    assert_true(dt_placement_equal(p, dt_strided_shard(-1)));
    assert_int_equal(dt_placement_normalize(p, 2, &p), DT_OK);
    assert_true(dt_placement_equal(p, dt_strided_shard(1)));
    assert_false(dt_placement_equal(dt_strided_shard(0), dt_shard(0)));
    assert_int_equal(dt_placement_parse("_R", &p), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_placement_parse("_Shard(0)", &p), DT_ERR_INVALID_ARG);
}

static void test_list_parse(void **state)
{
    (void)state;
    dt_placement pl[4];
    int n = 0;
    char buf[64];
    const char *forms[] = {"S(0),R", "S(0) R", "S(0)R", " S(0) , R "};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(dt_placements_parse(forms[i], 4, pl, &n), DT_OK);
        assert_int_equal(n, 2);
        assert_true(dt_placement_equal(pl[0], dt_shard(0)));
        assert_true(dt_placement_equal(pl[1], dt_replicate()));
    }
    assert_int_equal(dt_placements_parse("RS(1)P(max)R", 4, pl, &n), DT_OK);
    assert_int_equal(n, 4);
    dt_placements_format(n, pl, ",", buf, sizeof(buf));
    assert_string_equal(buf, "R,S(1),P(max),R");
    dt_placements_format(n, pl, "", buf, sizeof(buf));
    assert_string_equal(buf, "RS(1)P(max)R");

    assert_int_equal(dt_placements_parse("_S(0)S(0)", 4, pl, &n), DT_OK);
    assert_int_equal(n, 2);
    assert_true(dt_placement_equal(pl[0], dt_strided_shard(0)));
    assert_true(dt_placement_equal(pl[1], dt_shard(0)));
    assert_int_equal(dt_placements_parse("S(0)_S(1)", 4, pl, &n), DT_OK);
    assert_true(dt_placement_equal(pl[1], dt_strided_shard(1)));

    assert_int_equal(dt_placements_parse("S(0),X", 4, pl, &n), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "item 2 'X'"));
    assert_int_equal(dt_placements_parse("S0,R", 4, pl, &n), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "'S0'"));
    assert_int_equal(dt_placements_parse("R,P(prod)", 4, pl, &n), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "'P(prod)'"));
    assert_int_equal(dt_placements_parse("S(x)", 4, pl, &n), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_placements_parse("S(0", 4, pl, &n), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_placements_parse("", 4, pl, &n), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_placements_parse("R,R,R", 2, pl, &n), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "more than 2"));
    dt_placement p;
    assert_int_equal(dt_placement_parse("R,R", &p), DT_ERR_INVALID_ARG);
}

static void test_normalize(void **state)
{
    (void)state;
    dt_placement p;
    assert_int_equal(dt_placement_normalize(dt_shard(-1), 3, &p), DT_OK);
    assert_true(dt_placement_equal(p, dt_shard(2)));
    assert_int_equal(dt_placement_normalize(dt_shard(-3), 3, &p), DT_OK);
    assert_true(dt_placement_equal(p, dt_shard(0)));
    assert_int_equal(dt_placement_normalize(dt_shard(3), 3, &p), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "S(3)"));
    assert_int_equal(dt_placement_normalize(dt_shard(-4), 3, &p), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_placement_normalize(dt_partial(DT_REDUCE_OP_PROD), 3, &p),
                     DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "prod"));
}

/* torch.chunk reference: the chunks torch.chunk returns, padded with empty ones. */
static void chunk_ref(int64_t n, int k, int64_t *sizes, int64_t *offs)
{
    int64_t c = (n + k - 1) / k, off = 0;
    for (int i = 0; i < k; i++) {
        int64_t s = c;
        if (off + s > n)
            s = n - off;
        if (s < 0)
            s = 0;
        sizes[i] = s;
        offs[i] = off;
        off += s;
    }
}

static void test_chunk(void **state)
{
    (void)state;
    int64_t sz, off;
    int64_t expect5_4[4] = {2, 2, 1, 0};
    for (int i = 0; i < 4; i++) {
        dt_shard_chunk(5, 4, i, &sz, &off);
        assert_int_equal(sz, expect5_4[i]);
    }
    dt_shard_chunk(5, 4, 3, &sz, &off);
    assert_int_equal(off, 5);
    /* n=6,k=4: chunk 2 -> 2,2,2,0 (torch.chunk gives 3 chunks) */
    int64_t expect6_4[4] = {2, 2, 2, 0};
    for (int i = 0; i < 4; i++) {
        dt_shard_chunk(6, 4, i, &sz, NULL);
        assert_int_equal(sz, expect6_4[i]);
    }
    for (int64_t n = 0; n <= 13; n++)
        for (int k = 1; k <= 6; k++) {
            int64_t rs[8], ro[8], total = 0;
            chunk_ref(n, k, rs, ro);
            for (int i = 0; i < k; i++) {
                dt_shard_chunk(n, k, i, &sz, &off);
                assert_int_equal(sz, rs[i]);
                assert_int_equal(off, ro[i]);
                assert_true(sz <= dt_shard_padded_size(n, k));
                total += sz;
            }
            assert_int_equal(total, n);
        }
    dt_shard_chunk(5, 4, 4, &sz, &off); /* index out of range */
    assert_int_equal(sz, 0);
}

static void test_nested(void **state)
{
    (void)state;
    /* dim 0 of size 7 sharded by mesh dims 0 (size 2) and 1 (size 2): 4,3 -> 2,2 | 2,1 */
    int mesh[2] = {2, 2};
    int64_t shape[2] = {7, 5}, ls[2], off[2];
    dt_placement pl[2] = {dt_shard(0), dt_shard(0)};
    int64_t es[4] = {2, 2, 2, 1}, eo[4] = {0, 2, 4, 6};
    for (int r = 0; r < 4; r++) {
        int c[2] = {r / 2, r % 2};
        assert_int_equal(dt_shard_local_shape(2, shape, 2, mesh, pl, c, ls, off), DT_OK);
        assert_int_equal(ls[0], es[r]);
        assert_int_equal(off[0], eo[r]);
        assert_int_equal(ls[1], 5);
        assert_int_equal(off[1], 0);
    }
    /* S(1) on mesh 0, S(0) on mesh 1: independent dims */
    dt_placement pl2[2] = {dt_shard(1), dt_shard(0)};
    int c[2] = {1, 1};
    assert_int_equal(dt_shard_local_shape(2, shape, 2, mesh, pl2, c, ls, off), DT_OK);
    assert_int_equal(ls[0], 3);
    assert_int_equal(off[0], 4);
    assert_int_equal(ls[1], 2);
    assert_int_equal(off[1], 3);
    /* dims smaller than the mesh: 1 row over 4 -> 1,0,0,0 nested 2x2 */
    int64_t tiny[1] = {1};
    int c3[2] = {0, 1};
    assert_int_equal(dt_shard_local_shape(1, tiny, 2, mesh, pl, c3, ls, off), DT_OK);
    assert_int_equal(ls[0], 0);
    assert_int_equal(off[0], 1);
    /* [_S(0), S(0)]: mesh dim 1 splits 7 rows first (4 | 3), then mesh dim 0
     * splits each piece: rows 0-1, 4-5 | 2-3, 6 for coordinates (0,0), (0,1),
     * (1,0), (1,1); the same shards as [S(0), _S(0)] with the mesh dims swapped */
    dt_placement st[2] = {dt_strided_shard(0), dt_shard(0)},
                 ts[2] = {dt_shard(0), dt_strided_shard(0)};
    int64_t ss[4] = {2, 2, 2, 1}, so[4] = {0, 4, 2, 6};
    for (int r = 0; r < 4; r++) {
        int cr[2] = {r / 2, r % 2}, sw[2] = {r % 2, r / 2};
        assert_int_equal(dt_shard_local_shape(2, shape, 2, mesh, st, cr, ls, off), DT_OK);
        assert_int_equal(ls[0], ss[r]);
        assert_int_equal(off[0], so[r]);
        assert_int_equal(dt_shard_local_shape(2, shape, 2, mesh, ts, sw, ls, off), DT_OK);
        assert_int_equal(ls[0], ss[r]);
        assert_int_equal(off[0], so[r]);
    }
    c[0] = 2;
    assert_int_equal(dt_shard_local_shape(2, shape, 2, mesh, pl2, c, ls, off), DT_ERR_INVALID_ARG);
    dt_placement bad[2] = {dt_shard(2), dt_replicate()};
    c[0] = 0;
    assert_int_equal(dt_shard_local_shape(2, shape, 2, mesh, bad, c, ls, off), DT_ERR_INVALID_ARG);
}

static void test_spec(void **state)
{
    (void)state;
    int mshape[2] = {2, 2};
    const char *names[2] = {"dp", "tp"};
    dt_mesh *m = NULL;
    dt_spec *s = NULL, *s2 = NULL;
    assert_int_equal(dt_mesh_create_virtual(2, mshape, names, 3, &m), DT_OK);
    int64_t shape[2] = {7, 5};
    dt_placement pl[2] = {dt_shard(-1), dt_partial(DT_REDUCE_OP_MAX)};
    assert_int_equal(dt_spec_create(m, 2, pl, 2, shape, DT_DTYPE_F32, &s), DT_OK);
    assert_true(dt_placement_equal(dt_spec_placements(s)[0], dt_shard(1)));
    int64_t ls[2], off[2];
    assert_int_equal(dt_spec_local_shape(s, NULL, ls, off), DT_OK);
    assert_int_equal(ls[0], 7);
    assert_int_equal(ls[1], 2);
    assert_int_equal(off[1], 3);
    assert_int_equal(dt_spec_num_shards(s), 2);
    char buf[128];
    dt_spec_format(s, buf, sizeof(buf));
    assert_string_equal(buf, "S(1),P(max) [7, 5] f32 on mesh 2x2");
    dt_placement pl2[2] = {dt_shard(1), dt_partial(DT_REDUCE_OP_MAX)};
    assert_int_equal(dt_spec_create(m, 2, pl2, 2, shape, DT_DTYPE_F32, &s2), DT_OK);
    assert_true(dt_spec_equal(s, s2));
    dt_spec_release(s2);
    assert_int_equal(dt_spec_create(m, 2, pl2, 2, shape, DT_DTYPE_BF16, &s2), DT_OK);
    assert_false(dt_spec_equal(s, s2));
    dt_spec_release(s2);
    s2 = NULL;

    /* errors name the value */
    assert_int_equal(dt_spec_create(m, 1, pl, 2, shape, DT_DTYPE_F32, &s2), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "1 placements"));
    assert_non_null(strstr(dt_last_error(), "2-d mesh"));
    dt_placement bad[2] = {dt_shard(2), dt_replicate()};
    assert_int_equal(dt_spec_create(m, 2, bad, 2, shape, DT_DTYPE_F32, &s2), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "S(2)"));
    assert_non_null(strstr(dt_last_error(), "out of range"));
    dt_placement mixed[2] = {dt_partial(DT_REDUCE_OP_SUM), dt_partial(DT_REDUCE_OP_MAX)};
    assert_int_equal(dt_spec_create(m, 2, mixed, 2, shape, DT_DTYPE_F32, &s2), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "mixes"));
    int64_t neg[2] = {7, -1};
    assert_int_equal(dt_spec_create(m, 2, pl2, 2, neg, DT_DTYPE_F32, &s2), DT_ERR_INVALID_ARG);
    assert_null(s2);
    dt_spec_release(s);
    dt_mesh_release(m);
}

/* Split-factor strided shards: text form, the boxes of a shard, the spec's refusals. */
static void test_split_factor(void **state)
{
    (void)state;
    dt_placement p, pl[4];
    int n = 0;
    char buf[128];
    assert_int_equal(dt_placement_parse("_S(0,sf=3)", &p), DT_OK);
    assert_true(dt_placement_equal(p, dt_strided_shard_split(0, 3)));
    dt_placement_format(p, buf, sizeof(buf));
    assert_string_equal(buf, "_S(0,sf=3)");
    assert_false(dt_placement_equal(p, dt_strided_shard(0)));
    assert_false(dt_placement_equal(p, dt_strided_shard_split(0, 2)));
    assert_true(dt_placement_equal(dt_strided_shard_split(0, 1), dt_strided_shard(0)));
    assert_int_equal(dt_placement_parse("StridedShard(-1, sf=2)", &p), DT_OK);
    assert_int_equal(dt_placement_normalize(p, 2, &p), DT_OK);
    assert_true(dt_placement_equal(p, dt_strided_shard_split(1, 2)));
    assert_int_equal(dt_placement_parse("_S(0,sf=1)", &p), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_placement_parse("S(0,sf=3)", &p), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_placement_parse("_S(0,3)", &p), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_placements_parse("_S(0,sf=3)R", 4, pl, &n), DT_OK);
    assert_int_equal(n, 2);
    assert_true(dt_placement_equal(pl[1], dt_replicate()));

    /* mesh 2x2 seen from rank 3 = (1, 1): 12 rows in 6 pieces of 2, this rank
     * pieces 1, 3, 5 (rows 2-3, 6-7, 10-11), PyTorch's _StridedShard(0, 3) */
    int mshape[2] = {2, 2};
    dt_mesh *m = NULL;
    dt_spec *s = NULL;
    assert_int_equal(dt_mesh_create_virtual(2, mshape, NULL, 3, &m), DT_OK);
    int64_t shape[2] = {12, 5}, ls[2], off[2];
    dt_placement qkv[2] = {dt_replicate(), dt_strided_shard_split(0, 3)};
    assert_int_equal(dt_spec_create(m, 2, qkv, 2, shape, DT_DTYPE_F32, &s), DT_OK);
    dt_spec_format(s, buf, sizeof(buf));
    assert_string_equal(buf, "R,_S(0,sf=3) [12, 5] f32 on mesh 2x2");
    assert_int_equal(dt_spec_local_shape(s, NULL, ls, off), DT_OK);
    assert_int_equal(ls[0], 6);
    assert_int_equal(off[0], 2);
    dt_box boxes[4];
    assert_int_equal(dt_spec_local_boxes(s, NULL, boxes, 4, &n), DT_OK);
    assert_int_equal(n, 3);
    for (int b = 0; b < 3; b++) {
        assert_int_equal(boxes[b].offset[0], 2 + 4 * b);
        assert_int_equal(boxes[b].local_offset[0], 2 * b);
        assert_int_equal(boxes[b].shape[0], 2);
        assert_int_equal(boxes[b].shape[1], 5);
        assert_int_equal(boxes[b].offset[1], 0);
    }
    assert_int_equal(dt_spec_local_boxes(s, NULL, boxes, 2, &n), DT_ERR_INVALID_ARG);
    dt_spec_release(s);
    s = NULL;
    /* refused: uneven, another shard of the dim, two split factors, too large */
    int64_t uneven[2] = {10, 5};
    assert_int_equal(dt_spec_create(m, 2, qkv, 2, uneven, DT_DTYPE_F32, &s), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "equal pieces"));
    dt_placement two_dims[2] = {dt_shard(0), dt_strided_shard_split(0, 3)};
    assert_int_equal(dt_spec_create(m, 2, two_dims, 2, shape, DT_DTYPE_F32, &s),
                     DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "also shards tensor dim 0"));
    int64_t sq[2] = {12, 12};
    dt_placement two_sf[2] = {dt_strided_shard_split(1, 2), dt_strided_shard_split(0, 3)};
    assert_int_equal(dt_spec_create(m, 2, two_sf, 2, sq, DT_DTYPE_F32, &s), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "two split-factor shards"));
    dt_placement big[2] = {dt_replicate(), dt_strided_shard_split(0, DT_PLACEMENT_MAX_SPLIT + 1)};
    assert_int_equal(dt_spec_create(m, 2, big, 2, shape, DT_DTYPE_F32, &s), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "split factor"));
    assert_null(s);
    dt_mesh_release(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_roundtrip), cmocka_unit_test(test_list_parse),
        cmocka_unit_test(test_normalize),      cmocka_unit_test(test_chunk),
        cmocka_unit_test(test_nested),         cmocka_unit_test(test_spec),
        cmocka_unit_test(test_split_factor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
