/* softmax / log_softmax / causal softmax, LayerNorm and reductions on
 * distributed inputs. */
#include "do_util.h"

typedef struct red_ctx {
    int kind; /* 0 sum, 1 mean, 2 max, 3 sum_all, 4 softmax, 5 log_softmax, 6 causal */
    int dim;
    bool keepdim;
} red_ctx;

static dt_status op_red(dt_tensor *const *xs, bool dist, void *ctx, dt_tensor **out)
{
    (void)dist;
    const red_ctx *c = ctx;
    switch (c->kind) {
    case 0:
        return dt_sum(xs[0], c->dim, c->keepdim, out);
    case 1:
        return dt_mean(xs[0], c->dim, c->keepdim, out);
    case 2:
        return dt_max(xs[0], c->dim, c->keepdim, out);
    case 3:
        return dt_sum_all(xs[0], out);
    case 4:
        return dt_softmax(xs[0], c->dim, out);
    case 5:
        return dt_log_softmax(xs[0], c->dim, out);
    default:
        return dt_causal_softmax(xs[0], 0.5, out);
    }
}

/* One input of shape [d0, d1, d2] placed `in`, the output expected `out`. */
typedef struct red_case {
    red_ctx c;
    dt_placement in, out;
} red_case;

/* Run cases[0..n) on @p m as "<what> case i" with seeds seed + i. */
static void run_red_cases(dt_mesh *m, const char *what, int64_t d0, int64_t d1, int64_t d2,
                          const red_case *cases, int n, uint64_t seed)
{
    for (int i = 0; i < n; i++) {
        char name[48];
        snprintf(name, sizeof(name), "%s case %d", what, i);
        do_case c = {.name = name,
                     .n = 1,
                     .ndim = {3},
                     .shape = {{d0, d1, d2}},
                     .op = op_red,
                     .ctx = (void *)&cases[i].c,
                     .n_out_pl = 1};
        c.pl[0][0] = cases[i].in, c.out_pl[0] = cases[i].out;
        do_run(m, &c, seed + (uint64_t)i);
    }
}

static void test_reductions(void **state)
{
    (void)state;
    dt_mesh *m = do_mesh1();
    const red_case cases[] = {
        {{0, 1, false}, S(1), P}, /* sum over the sharded dim -> Partial */
        {{0, 1, true}, S(1), P},
        {{1, 1, false}, S(1), P},    /* mean over an uneven sharded dim: global divisor */
        {{0, 0, false}, S(1), S(0)}, /* other dim: shard renumbered */
        {{1, 2, true}, S(1), S(1)},
        {{0, 1, false}, P, P}, /* linear in a Partial */
        {{1, 0, false}, P, P},
        {{2, 1, false}, S(1), R}, /* max over a sharded dim: gathered */
        {{2, 2, false}, S(0), S(0)},
        {{2, 0, false}, P, R},
        {{3, 0, false}, S(2), P}, /* sum_all */
        {{3, 0, false}, P, P},
        {{3, 0, false}, R, R},
    };
    run_red_cases(m, "reduce", 3, 7, 5, cases, (int)(sizeof(cases) / sizeof(cases[0])), 4000);
    dt_mesh_release(m);
}

static void test_softmax(void **state)
{
    (void)state;
    dt_mesh *m = do_mesh1();
    const red_case cases[] = {
        {{4, -1, false}, S(0), S(0)}, /* over an unsharded dim: stays sharded */
        {{4, 1, false}, S(2), S(2)},
        {{4, -1, false}, S(2), R}, /* over the sharded dim: gathered first */
        {{4, -1, false}, P, R},    /* non-linear on a Partial: reduced first */
        {{5, -1, false}, S(1), S(1)},
        {{5, 1, false}, S(1), R},
        {{6, -1, false}, S(0), S(0)}, /* causal over [.., Tq, Tk]: batch shard passes */
        {{6, -1, false}, S(1), R},    /* query dim sharded: gathered */
        {{6, -1, false}, S(2), R},
    };
    run_red_cases(m, "softmax", 5, 6, 6, cases, (int)(sizeof(cases) / sizeof(cases[0])), 5000);
    dt_mesh_release(m);
}

static dt_status op_ln(dt_tensor *const *xs, bool dist, void *ctx, dt_tensor **out)
{
    (void)dist, (void)ctx;
    return dt_layer_norm(xs[0], xs[1], xs[2], 1e-5, out);
}

static void test_layer_norm(void **state)
{
    (void)state;
    dt_mesh *m = do_mesh1();
    const struct {
        dt_placement x, w, b, out;
    } cases[] = {
        {S(1), R, R, S(1)}, /* sequence parallel: rows sharded, params' grads all-reduced */
        {S(0), R, R, S(0)},    {S(2), R, R, R}, /* normalised dim sharded: gathered */
        {P, R, R, R},                           /* Partial: reduced */
        {R, S(0), S(0), R},                     /* sharded params: gathered */
        {S(1), S(0), R, S(1)},
    };
    for (int i = 0; i < (int)(sizeof(cases) / sizeof(cases[0])); i++) {
        char name[48];
        snprintf(name, sizeof(name), "layer_norm case %d", i);
        do_case c = {.name = name,
                     .n = 3,
                     .ndim = {3, 1, 1},
                     .shape = {{2, 7, 9}, {9}, {9}},
                     .op = op_ln,
                     .n_out_pl = 1};
        c.pl[0][0] = cases[i].x, c.pl[1][0] = cases[i].w, c.pl[2][0] = cases[i].b;
        c.out_pl[0] = cases[i].out;
        do_run(m, &c, 6000 + (uint64_t)i);
    }
    dt_mesh_release(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_layer_norm),
    };
    return cmocka_run_group_tests(tests, mr_setup, mr_teardown);
}
