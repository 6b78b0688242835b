/* Element-wise rules: Partial arithmetic, Shard/Replicate alignment,
 * broadcasting, mismatched shards, non-linear ops on Partial. */
#include "do_util.h"

static dt_status op_binary(dt_tensor *const *xs, bool dist, void *ctx, dt_tensor **out)
{
    (void)dist;
    switch (*(const int *)ctx) {
    case 0:
        return dt_add(xs[0], xs[1], out);
    case 1:
        return dt_sub(xs[0], xs[1], out);
    case 2:
        return dt_mul(xs[0], xs[1], out);
    default:
        return dt_div(xs[0], xs[1], out);
    }
}

/* b shifted away from 0 so division is well conditioned: a / (b*b + 1) */
static dt_status op_div_safe(dt_tensor *const *xs, bool dist, void *ctx, dt_tensor **out)
{
    (void)dist, (void)ctx;
    dt_tensor *b2 = NULL, *b3 = NULL;
    dt_status s = dt_mul(xs[1], xs[1], &b2);
    if (s == DT_OK)
        s = dt_add_scalar(b2, 1.0, &b3);
    if (s == DT_OK)
        s = dt_div(xs[0], b3, out);
    dt_tensor_release(b2);
    dt_tensor_release(b3);
    return s;
}

static dt_status op_unary(dt_tensor *const *xs, bool dist, void *ctx, dt_tensor **out)
{
    (void)dist;
    switch (*(const int *)ctx) {
    case 0:
        return dt_scale(xs[0], -2.5, out);
    case 1:
        return dt_add_scalar(xs[0], 0.75, out);
    case 2:
        return dt_gelu_tanh(xs[0], out);
    default:
        return dt_relu(xs[0], out);
    }
}

typedef struct bin_case {
    int op;
    int na, nb;
    int64_t sa[3], sb[3];
    dt_placement pa, pb, po;
} bin_case;

static void run_binary_cases(dt_mesh *m, const bin_case *bc, int n)
{
    for (int i = 0; i < n; i++) {
        do_case c = {
            .name = "binary", .n = 2, .op = op_binary, .ctx = (void *)&bc[i].op, .n_out_pl = 1};
        c.ndim[0] = bc[i].na, c.ndim[1] = bc[i].nb;
        memcpy(c.shape[0], bc[i].sa, sizeof(bc[i].sa));
        memcpy(c.shape[1], bc[i].sb, sizeof(bc[i].sb));
        c.pl[0][0] = bc[i].pa, c.pl[1][0] = bc[i].pb, c.out_pl[0] = bc[i].po;
        char name[64];
        snprintf(name, sizeof(name), "binary case %d", i);
        c.name = name;
        do_run(m, &c, 100 + (uint64_t)i);
    }
}

static void test_binary(void **state)
{
    (void)state;
    dt_mesh *m = do_mesh1();
    const bin_case cases[] = {
        /* same Shard */
        {0, 2, 2, {7, 5}, {7, 5}, S(0), S(0), S(0)},
        /* Shard with Replicate: the Replicate side is sliced */
        {2, 2, 2, {7, 5}, {7, 5}, S(1), R, S(1)},
        {1, 2, 2, {7, 5}, {7, 5}, R, S(0), S(0)},
        /* Partial + Partial, Partial * Replicate, Replicate * Partial */
        {0, 2, 2, {7, 5}, {7, 5}, P, P, P},
        {1, 2, 2, {7, 5}, {7, 5}, P, P, P},
        {2, 2, 2, {7, 5}, {7, 5}, P, R, P},
        {2, 2, 2, {7, 5}, {7, 5}, R, P, P},
        /* Partial + Replicate is not linear in both: reduced first */
        {0, 2, 2, {7, 5}, {7, 5}, P, R, R},
        /* Partial * Partial: reduced */
        {2, 2, 2, {7, 5}, {7, 5}, P, P, R},
        /* broadcasting: a bias [5] on a row-sharded [7,5] stays Replicate */
        {0, 2, 1, {7, 5}, {5}, S(0), R, S(0)},
        /* bias [5] sharded on its only dim, x sharded on the same output dim */
        {0, 2, 1, {7, 5}, {5}, S(1), S(0), S(1)},
        /* a Shard on a broadcast (size-1) dim is gathered */
        {2, 3, 3, {3, 4, 5}, {1, 4, 5}, S(0), S(0), S(0)},
        /* mismatched shards: the second follows the first */
        {0, 2, 2, {7, 5}, {7, 5}, S(0), S(1), S(0)},
        /* 3-d with a 2-d operand broadcast over the batch */
        {2, 3, 2, {3, 6, 5}, {6, 5}, S(1), S(0), S(1)},
    };
    run_binary_cases(m, cases, (int)(sizeof(cases) / sizeof(cases[0])));
    dt_mesh_release(m);
}

static void test_div(void **state)
{
    (void)state;
    dt_mesh *m = do_mesh1();
    const dt_placement pls[][2] = {{P, R}, {S(0), R}, {R, S(1)}, {P, S(0)}};
    for (int i = 0; i < 4; i++) {
        do_case c = {
            .name = "div", .n = 2, .ndim = {2, 2}, .shape = {{5, 6}, {5, 6}}, .op = op_div_safe};
        c.pl[0][0] = pls[i][0], c.pl[1][0] = pls[i][1];
        do_run(m, &c, 300 + (uint64_t)i);
    }
    dt_mesh_release(m);
}

static void test_unary(void **state)
{
    (void)state;
    dt_mesh *m = do_mesh1();
    const struct {
        int op;
        dt_placement in, out;
    } cases[] = {
        {0, P, P},       /* scale is linear: Partial stays */
        {1, P, R},       /* add_scalar on a Partial: reduced first */
        {2, P, R},       /* gelu: non-linear */
        {3, S(1), S(1)}, /* relu passes Shard */
        {2, S(0), S(0)}, {0, R, R},
    };
    for (int i = 0; i < (int)(sizeof(cases) / sizeof(cases[0])); i++) {
        do_case c = {.name = "unary",
                     .n = 1,
                     .ndim = {2},
                     .shape = {{5, 7}},
                     .op = op_unary,
                     .ctx = (void *)&cases[i].op,
                     .n_out_pl = 1};
        c.pl[0][0] = cases[i].in;
        c.out_pl[0] = cases[i].out;
        do_run(m, &c, 500 + (uint64_t)i);
    }
    dt_mesh_release(m);
}

/* On a 2-d mesh (world 4 as 2x2): placements combine per mesh dim. */
static void test_binary_2d(void **state)
{
    (void)state;
    dt_mesh *m = do_mesh_2x2();
    int op = 2;
    do_case c = {.name = "binary 2x2",
                 .n = 2,
                 .ndim = {2, 1},
                 .shape = {{6, 5}, {5}},
                 .pl = {{S(0), P}, {R, R}},
                 .op = op_binary,
                 .ctx = &op,
                 .n_out_pl = 2,
                 .out_pl = {S(0), P}};
    do_run(m, &c, 700);
    op = 0;
    do_case c2 = {.name = "add 2x2",
                  .n = 2,
                  .ndim = {2, 2},
                  .shape = {{6, 5}, {6, 5}},
                  .pl = {{S(0), S(1)}, {R, S(1)}},
                  .op = op_binary,
                  .ctx = &op,
                  .n_out_pl = 2,
                  .out_pl = {S(0), S(1)}};
    do_run(m, &c2, 701);
    dt_mesh_release(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binary),
        cmocka_unit_test(test_div),
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_binary_2d),
    };
    return cmocka_run_group_tests(tests, mr_setup, mr_teardown);
}
