/*
 * store_ranks: real processes meet through the store using only what the
 * launcher put in the environment (dtrun, mpirun, or faked Slurm variables):
 * dt__launch_env_read, rank 0 serves, everyone all-gathers and counts.
 * Optional argument: the launch source expected ("env", "ompi", "slurm").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/launch_env.h"
#include "dtensor/store.h"

static const char *expected_source;

typedef struct view {
    char addr[256];
    int port, size, local_size;
    char token[128];
    char source[16];
} view;

static void test_meet_through_store(void **state)
{
    dt_launch_env e;
    dt_status st = dt__launch_env_read(&e);
    if (st != DT_OK)
        fail_msg("dt__launch_env_read: %s", dt_last_error());
    printf("source=%s rank=%d size=%d local=%d/%d master=%s:%d\n", e.source, e.rank, e.size,
           e.local_rank, e.local_size, e.master_addr, e.master_port);
    if (expected_source != NULL)
        assert_string_equal(e.source, expected_source);
    assert_true(e.size >= 2);
    assert_true(e.token[0] != '\0');

    dt_store_params p = {.field_mask = DT_STORE_PARAM_FIELD_HOST | DT_STORE_PARAM_FIELD_PORT |
                                       DT_STORE_PARAM_FIELD_IS_SERVER | DT_STORE_PARAM_FIELD_TOKEN |
                                       DT_STORE_PARAM_FIELD_TIMEOUT,
                         .host = e.master_addr,
                         .port = e.master_port,
                         .is_server = e.rank == 0,
                         .token = e.token,
                         .timeout_s = 30};
    dt_store *s = NULL;
    st = dt_store_create(&p, &s);
    if (st != DT_OK)
        fail_msg("dt_store_create: %s", dt_last_error());

    /* every rank saw the same rendezvous */
    view mine = {0}, *all = calloc((size_t)e.size, sizeof(view));
    snprintf(mine.addr, sizeof(mine.addr), "%s", e.master_addr);
    mine.port = e.master_port;
    mine.size = e.size;
    mine.local_size = e.local_size;
    snprintf(mine.token, sizeof(mine.token), "%s", e.token);
    snprintf(mine.source, sizeof(mine.source), "%s", e.source);
    assert_int_equal(dt_store_allgather(s, "view", e.rank, e.size, &mine, sizeof(mine), all),
                     DT_OK);
    for (int r = 0; r < e.size; r++)
        assert_memory_equal(&all[r], &mine, sizeof(mine));
    free(all);

    /* ranks are distinct and complete: gather them, and count arrivals */
    int32_t r32 = e.rank, *ranks = calloc((size_t)e.size, sizeof(int32_t));
    assert_int_equal(dt_store_allgather(s, "rank", e.rank, e.size, &r32, 4, ranks), DT_OK);
    for (int r = 0; r < e.size; r++)
        assert_int_equal(ranks[r], r);
    free(ranks);
    int64_t v = 0;
    assert_int_equal(dt_store_add(s, "arrived", 1, &v), DT_OK);
    assert_true(v >= 1 && v <= e.size);

    /* rank 0 keeps serving until everyone is done */
    char key[32];
    snprintf(key, sizeof(key), "fin/%d", e.rank);
    assert_int_equal(dt_store_set(s, key, "", 0), DT_OK);
    if (e.rank == 0) {
        char **keys = calloc((size_t)e.size, sizeof(char *));
        for (int r = 0; r < e.size; r++) {
            keys[r] = malloc(32);
            snprintf(keys[r], 32, "fin/%d", r);
        }
        assert_int_equal(dt_store_wait(s, (const char *const *)keys, e.size, -1), DT_OK);
        assert_int_equal(dt_store_add(s, "arrived", 0, &v), DT_OK);
        assert_int_equal(v, e.size);
        for (int r = 0; r < e.size; r++)
            free(keys[r]);
        free(keys);
    }
    dt_store_destroy(s);
}

int main(int argc, char **argv)
{
    expected_source = argc > 1 ? argv[1] : NULL;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_meet_through_store)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
