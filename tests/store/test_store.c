/* store_ops: the TCP store's operations, in one process (server + clients in threads). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dtensor/store.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static dt_store *make_server(const char *token, double timeout_s)
{
    dt_store_params p = {.field_mask = DT_STORE_PARAM_FIELD_IS_SERVER | DT_STORE_PARAM_FIELD_PORT |
                                       DT_STORE_PARAM_FIELD_TOKEN | DT_STORE_PARAM_FIELD_TIMEOUT,
                         .is_server = true,
                         .port = 0,
                         .token = token,
                         .timeout_s = timeout_s};
    dt_store *s = NULL;
    assert_int_equal(dt_store_create(&p, &s), DT_OK);
    assert_non_null(s);
    assert_true(dt_store_port(s) > 0);
    return s;
}

static dt_status make_client(int port, const char *token, double timeout_s, dt_store **out)
{
    dt_store_params p = {.field_mask = DT_STORE_PARAM_FIELD_HOST | DT_STORE_PARAM_FIELD_PORT |
                                       DT_STORE_PARAM_FIELD_TOKEN | DT_STORE_PARAM_FIELD_TIMEOUT,
                         .host = "127.0.0.1",
                         .port = port,
                         .token = token,
                         .timeout_s = timeout_s};
    return dt_store_create(&p, out);
}

static void test_set_get(void **state)
{
    dt_store *s = make_server("tok", 5);
    assert_int_equal(dt_store_set(s, "a", "hello", 5), DT_OK);
    void *v = NULL;
    size_t n = 0;
    assert_int_equal(dt_store_get(s, "a", &v, &n), DT_OK);
    assert_int_equal(n, 5);
    assert_memory_equal(v, "hello", 5);
    free(v);
    /* overwrite, empty value, binary value */
    assert_int_equal(dt_store_set(s, "a", "x", 1), DT_OK);
    assert_int_equal(dt_store_get(s, "a", &v, &n), DT_OK);
    assert_int_equal(n, 1);
    assert_memory_equal(v, "x", 1);
    free(v);
    assert_int_equal(dt_store_set(s, "empty", NULL, 0), DT_OK);
    assert_int_equal(dt_store_get(s, "empty", &v, &n), DT_OK);
    assert_int_equal(n, 0);
    free(v);
    size_t big = (1u << 20) + 3;
    unsigned char *b = malloc(big);
    for (size_t i = 0; i < big; i++)
        b[i] = (unsigned char)(i * 131 + 7);
    assert_int_equal(dt_store_set(s, "big", b, big), DT_OK);
    assert_int_equal(dt_store_get(s, "big", &v, &n), DT_OK);
    assert_int_equal(n, big);
    assert_memory_equal(v, b, big);
    free(v);
    free(b);
    dt_store_destroy(s);
    dt_store_destroy(NULL);
}

static void test_get_timeout_names_key(void **state)
{
    dt_store *s = make_server("tok", 0.3);
    void *v = (void *)0x1;
    size_t n = 77;
    double t0 = now_s();
    assert_int_equal(dt_store_get(s, "no/such/key", &v, &n), DT_ERR_TIMEOUT);
    double dt = now_s() - t0;
    assert_true(dt >= 0.25 && dt < 3.0);
    assert_non_null(strstr(dt_last_error(), "no/such/key"));
    assert_ptr_equal(v, (void *)0x1); /* outputs untouched on error */
    assert_int_equal(n, 77);
    /* wait names the first missing key, not a present one */
    assert_int_equal(dt_store_set(s, "present", "1", 1), DT_OK);
    const char *keys[] = {"present", "absent_key"};
    assert_int_equal(dt_store_wait(s, keys, 2, 0.2), DT_ERR_TIMEOUT);
    assert_non_null(strstr(dt_last_error(), "absent_key"));
    /* the server answered the timeout itself, so the handle stays usable */
    assert_int_equal(dt_store_set(s, "after", "y", 1), DT_OK);
    assert_int_equal(dt_store_wait(s, keys, 1, 0), DT_OK);
    dt_store_destroy(s);
}

typedef struct setter_arg {
    int port;
    double delay_s;
    const char *key;
} setter_arg;

static void *setter(void *p)
{
    setter_arg *a = p;
    dt_store *c = NULL;
    if (make_client(a->port, "tok", 5, &c) != DT_OK)
        return (void *)1;
    struct timespec ts = {0, (long)(a->delay_s * 1e9)};
    nanosleep(&ts, NULL);
    dt_status st = dt_store_set(c, a->key, "late", 4);
    dt_store_destroy(c);
    return st == DT_OK ? NULL : (void *)1;
}

/* A blocked get returns as soon as another client sets the key (parked, not polled). */
static void test_get_blocks_until_set(void **state)
{
    dt_store *s = make_server("tok", 10);
    setter_arg a = {dt_store_port(s), 0.3, "later"};
    pthread_t th;
    double t0 = now_s();
    pthread_create(&th, NULL, setter, &a);
    void *v = NULL;
    size_t n = 0;
    assert_int_equal(dt_store_get(s, "later", &v, &n), DT_OK);
    double dt = now_s() - t0;
    assert_true(dt >= 0.25 && dt < 2.0);
    assert_int_equal(n, 4);
    assert_memory_equal(v, "late", 4);
    free(v);
    void *rc;
    pthread_join(th, &rc);
    assert_null(rc);
    /* wait on several keys, the last arriving later */
    setter_arg b = {dt_store_port(s), 0.2, "k2"};
    assert_int_equal(dt_store_set(s, "k1", "v", 1), DT_OK);
    pthread_create(&th, NULL, setter, &b);
    const char *keys[] = {"k1", "k2"};
    assert_int_equal(dt_store_wait(s, keys, 2, -1), DT_OK);
    pthread_join(th, &rc);
    assert_null(rc);
    dt_store_destroy(s);
}

static void test_add_and_delete_prefix(void **state)
{
    dt_store *s = make_server("tok", 5);
    int64_t v = 0;
    assert_int_equal(dt_store_add(s, "ctr", 5, &v), DT_OK);
    assert_int_equal(v, 5);
    assert_int_equal(dt_store_add(s, "ctr", -7, &v), DT_OK);
    assert_int_equal(v, -2);
    assert_int_equal(dt_store_add(s, "ctr", 0, NULL), DT_OK);
    void *p = NULL;
    size_t n = 0;
    assert_int_equal(dt_store_get(s, "ctr", &p, &n), DT_OK); /* stored as text, like torch */
    assert_int_equal(n, 2);
    assert_memory_equal(p, "-2", 2);
    free(p);
    assert_int_equal(dt_store_set(s, "text", "abc", 3), DT_OK);
    assert_int_equal(dt_store_add(s, "text", 1, &v), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "text"));
    assert_int_equal(dt_store_set(s, "big", "9223372036854775807", 19), DT_OK);
    assert_int_equal(dt_store_add(s, "big", 1, &v), DT_ERR_INVALID_ARG); /* overflow */

    assert_int_equal(dt_store_set(s, "job/a", "1", 1), DT_OK);
    assert_int_equal(dt_store_set(s, "job/b", "1", 1), DT_OK);
    assert_int_equal(dt_store_set(s, "jobx", "1", 1), DT_OK);
    int64_t del = -1;
    assert_int_equal(dt_store_delete_prefix(s, "job/", &del), DT_OK);
    assert_int_equal(del, 2);
    const char *k[] = {"jobx"};
    assert_int_equal(dt_store_wait(s, k, 1, 0), DT_OK);
    const char *gone[] = {"job/a"};
    assert_int_equal(dt_store_wait(s, gone, 1, 0), DT_ERR_TIMEOUT);
    assert_int_equal(dt_store_delete_prefix(s, "nothing", NULL), DT_OK);
    dt_store_destroy(s);
}

typedef struct ag_arg {
    int port, rank, size;
    int32_t out[8];
    dt_status st;
} ag_arg;

static void *ag_thread(void *p)
{
    ag_arg *a = p;
    dt_store *c = NULL;
    a->st = make_client(a->port, "tok", 5, &c);
    if (a->st != DT_OK)
        return NULL;
    int32_t mine = 100 + a->rank;
    a->st = dt_store_allgather(c, "ag", a->rank, a->size, &mine, sizeof(mine), a->out);
    int64_t v;
    if (a->st == DT_OK)
        a->st = dt_store_add(c, "arrived", 1, &v);
    dt_store_destroy(c);
    return NULL;
}

static void test_allgather_threads(void **state)
{
    dt_store *s = make_server("tok", 10);
    enum { N = 6 };
    ag_arg args[N];
    pthread_t th[N];
    for (int r = 0; r < N; r++) {
        args[r] = (ag_arg){.port = dt_store_port(s), .rank = r, .size = N};
        pthread_create(&th[r], NULL, ag_thread, &args[r]);
    }
    for (int r = 0; r < N; r++) {
        pthread_join(th[r], NULL);
        assert_int_equal(args[r].st, DT_OK);
        for (int q = 0; q < N; q++)
            assert_int_equal(args[r].out[q], 100 + q);
    }
    int64_t v = 0;
    assert_int_equal(dt_store_add(s, "arrived", 0, &v), DT_OK);
    assert_int_equal(v, N);
    /* mismatched lengths are reported, naming the rank */
    int32_t x = 1;
    int64_t big = 2;
    int32_t all[2];
    assert_int_equal(dt_store_set(s, "mm/1", &big, sizeof(big)), DT_OK);
    assert_int_equal(dt_store_allgather(s, "mm", 0, 2, &x, sizeof(x), all), DT_ERR_FORMAT);
    assert_non_null(strstr(dt_last_error(), "rank 1"));
    assert_int_equal(dt_store_allgather(s, "mm", 2, 2, &x, sizeof(x), all), DT_ERR_INVALID_ARG);
    dt_store_destroy(s);
}

typedef struct late_reader {
    int port;
    dt_status st;
    size_t n;
} late_reader;

static void *late_read(void *p)
{
    late_reader *a = p;
    dt_store *c = NULL;
    a->st = make_client(a->port, "tok", 5, &c);
    if (a->st != DT_OK)
        return NULL;
    struct timespec ts = {0, 400 * 1000 * 1000};
    nanosleep(&ts, NULL); /* the serving rank is destroying its store meanwhile */
    void *v = NULL;
    a->st = dt_store_get(c, "final", &v, &a->n);
    free(v);
    dt_store_destroy(c);
    return NULL;
}

/* The serving rank's destroy keeps serving until the other clients hang up. */
static void test_destroy_waits_for_clients(void **state)
{
    dt_store *s = make_server("tok", 5);
    late_reader a = {.port = dt_store_port(s)};
    pthread_t th;
    pthread_create(&th, NULL, late_read, &a);
    assert_int_equal(dt_store_set(s, "final", "bye", 3), DT_OK);
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL); /* let the reader connect */
    double t0 = now_s();
    dt_store_destroy(s);
    double dt = now_s() - t0;
    pthread_join(th, NULL);
    assert_int_equal(a.st, DT_OK);
    assert_int_equal(a.n, 3);
    assert_true(dt > 0.2 && dt < 3.0); /* waited for the reader, not for the 5 s timeout */
}

static void test_bad_params(void **state)
{
    dt_store *s = NULL;
    assert_int_equal(dt_store_create(NULL, NULL), DT_ERR_INVALID_ARG);
    assert_int_equal(make_client(70000, "t", 1, &s), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "70000"));
    assert_int_equal(make_client(0, "t", 1, &s), DT_ERR_INVALID_ARG);
    assert_int_equal(make_client(1234, "t", -1, &s), DT_ERR_INVALID_ARG);
    assert_null(s);
    /* defaults from the launcher's environment, checked */
    setenv("MASTER_PORT", "80x", 1);
    assert_int_equal(dt_store_create(NULL, &s), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "MASTER_PORT='80x'"));
    unsetenv("MASTER_PORT");
    assert_int_equal(dt_store_create(NULL, &s), DT_ERR_INVALID_ARG); /* no port at all */
    assert_non_null(strstr(dt_last_error(), "MASTER_PORT"));
    assert_null(s);
    /* nobody listens: a timeout naming the address, not a hang */
    dt_store *srv = make_server("tok", 5);
    int port = dt_store_port(srv);
    dt_store_destroy(srv);
    double t0 = now_s();
    assert_int_equal(make_client(port, "tok", 0.3, &s), DT_ERR_TIMEOUT);
    assert_true(now_s() - t0 < 3.0);
    assert_non_null(strstr(dt_last_error(), "127.0.0.1"));
    assert_null(s);
    /* a store needs a server: operations on NULL are argument errors */
    assert_int_equal(dt_store_set(NULL, "k", "v", 1), DT_ERR_INVALID_ARG);
    srv = make_server("tok", 5);
    assert_int_equal(dt_store_set(srv, NULL, "v", 1), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_store_set(srv, "k", NULL, 1), DT_ERR_INVALID_ARG);
    dt_store_destroy(srv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_get),
        cmocka_unit_test(test_get_timeout_names_key),
        cmocka_unit_test(test_get_blocks_until_set),
        cmocka_unit_test(test_add_and_delete_prefix),
        cmocka_unit_test(test_allgather_threads),
        cmocka_unit_test(test_destroy_waits_for_clients),
        cmocka_unit_test(test_bad_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
