/*
 * store_bad_clients: raw sockets misbehave at the store (wrong token, garbage,
 * oversized lengths, half-sent messages, silence); each is dropped while a
 * well-behaved client keeps being served.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "dtensor/store.h"

#define STALL_S 0.5 /* DT_STORE_STALL_S for this test */

typedef struct fixture {
    dt_store *server; /* also the well-behaved client */
    int port;
} fixture;

/* A store serving on a free port with token "s3cret" and timeout 5 s (so a
 * 5 s linger at exit); NULL when it cannot start. */
static dt_store *own_server(void)
{
    dt_store_params p = {.field_mask = DT_STORE_PARAM_FIELD_IS_SERVER | DT_STORE_PARAM_FIELD_PORT |
                                       DT_STORE_PARAM_FIELD_TOKEN | DT_STORE_PARAM_FIELD_TIMEOUT,
                         .is_server = true,
                         .port = 0,
                         .token = "s3cret",
                         .timeout_s = 5};
    dt_store *s = NULL;
    return dt_store_create(&p, &s) == DT_OK ? s : NULL;
}

static int setup(void **state)
{
    setenv("DT_STORE_STALL_S", "0.5", 1);
    setenv("DT_LOG", "error", 1); /* the drops are logged as warnings: keep the output short */
    fixture *f = calloc(1, sizeof(*f));
    if (f == NULL || (f->server = own_server()) == NULL)
        return -1;
    f->port = dt_store_port(f->server);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    dt_store_destroy(f->server);
    free(f);
    return 0;
}

static int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    int one = 1; /* no Nagle delay between our header and body writes */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static void raw_send(int fd, const void *p, size_t n)
{
    assert_int_equal(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void send_frame(int fd, uint8_t op, const void *body, uint32_t n)
{
    uint8_t hdr[5] = {(uint8_t)((n + 1) >> 24), (uint8_t)((n + 1) >> 16), (uint8_t)((n + 1) >> 8),
                      (uint8_t)(n + 1), op};
    raw_send(fd, hdr, 5);
    if (n > 0)
        raw_send(fd, body, n);
}

/* Read until the server closes; returns seconds it took, or -1 if still open at @p max_s.
 * The first reply byte (status) goes to *first when non-NULL. */
static double wait_closed(int fd, double max_s, int *first)
{
    double t0 = dt__clock_now();
    uint8_t buf[4096];
    size_t got = 0;
    for (;;) {
        double left = max_s - (dt__clock_now() - t0);
        if (left <= 0)
            return -1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
            continue;
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n <= 0)
            return dt__clock_now() - t0;
        if (first != NULL && got < 5 && got + (size_t)n > 4)
            *first = buf[4 - got];
        got += (size_t)n;
    }
}

/* Authenticate a raw socket; true on the OK reply. */
static void raw_auth(int fd, const char *token)
{
    send_frame(fd, 1 /* AUTH */, token, (uint32_t)strlen(token));
    uint8_t r[5];
    size_t got = 0;
    while (got < 5) {
        ssize_t n = recv(fd, r + got, 5 - got, 0);
        assert_true(n > 0);
        got += (size_t)n;
    }
    assert_int_equal(r[3], 1); /* body length 1 */
    assert_int_equal(r[4], 0); /* OK */
}

/* The well-behaved client still gets answers. */
static void assert_serving(fixture *f, const char *tag)
{
    assert_int_equal(dt_store_set(f->server, tag, "ok", 2), DT_OK);
    void *v = NULL;
    size_t n = 0;
    assert_int_equal(dt_store_get(f->server, tag, &v, &n), DT_OK);
    assert_int_equal(n, 2);
    free(v);
}

static void test_wrong_token(void **state)
{
    fixture *f = *state;
    int fd = raw_connect(f->port);
    send_frame(fd, 1, "wrong", 5);
    int status = -1;
    assert_true(wait_closed(fd, 3, &status) >= 0);
    assert_int_equal(status, 3); /* AUTH_FAILED, then closed */
    close(fd);
    assert_serving(f, "after_wrong_token");
    /* the same through the API: a clear error, not a hang */
    dt_store_params p = {.field_mask = DT_STORE_PARAM_FIELD_PORT | DT_STORE_PARAM_FIELD_TOKEN |
                                       DT_STORE_PARAM_FIELD_HOST | DT_STORE_PARAM_FIELD_TIMEOUT,
                         .host = "127.0.0.1",
                         .port = f->port,
                         .token = "guess",
                         .timeout_s = 3};
    dt_store *c = NULL;
    assert_int_equal(dt_store_create(&p, &c), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "token"));
    assert_null(c);
    /* a prefix of the right token is wrong too */
    fd = raw_connect(f->port);
    send_frame(fd, 1, "s3cre", 5);
    assert_true(wait_closed(fd, 3, NULL) >= 0);
    close(fd);
}

static void test_not_auth_first(void **state)
{
    fixture *f = *state;
    int fd = raw_connect(f->port);
    uint8_t setreq[] = {0, 0, 0, 1, 'k', 'v'};
    send_frame(fd, 2 /* SET without AUTH */, setreq, sizeof(setreq));
    assert_true(wait_closed(fd, 3, NULL) >= 0);
    close(fd);
    const char *keys[] = {"k"};
    assert_int_equal(dt_store_wait(f->server, keys, 1, 0), DT_ERR_TIMEOUT); /* not stored */
    assert_serving(f, "after_not_auth");
}

static void test_garbage(void **state)
{
    fixture *f = *state;
    int fd = raw_connect(f->port);
    const char *http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    raw_send(fd, http, strlen(http));
    assert_true(wait_closed(fd, 3, NULL) >= 0);
    close(fd);
    /* garbage after a good AUTH: unknown opcode, then a body that does not parse */
    fd = raw_connect(f->port);
    raw_auth(fd, "s3cret");
    send_frame(fd, 0xEE, "zz", 2);
    int status = -1;
    assert_true(wait_closed(fd, 3, &status) >= 0);
    assert_int_equal(status, 2); /* BAD_REQUEST */
    close(fd);
    fd = raw_connect(f->port);
    raw_auth(fd, "s3cret");
    uint8_t bad_get[] = {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 'k'}; /* key len lies */
    send_frame(fd, 3 /* GET */, bad_get, sizeof(bad_get));
    assert_true(wait_closed(fd, 3, NULL) >= 0);
    close(fd);
    assert_serving(f, "after_garbage");
}

static void test_oversized_length(void **state)
{
    fixture *f = *state;
    /* before AUTH, more than 4 KiB is refused */
    int fd = raw_connect(f->port);
    uint8_t hdr[4] = {0, 0, 0x20, 0}; /* 8 KiB */
    raw_send(fd, hdr, 4);
    assert_true(wait_closed(fd, 3, NULL) >= 0);
    close(fd);
    /* after AUTH, more than 64 MiB is refused without allocating it */
    uint32_t lens[] = {0xFFFFFFFFu, (64u << 20) + 1, 0};
    for (int i = 0; i < 3; i++) {
        fd = raw_connect(f->port);
        raw_auth(fd, "s3cret");
        uint8_t h[4] = {(uint8_t)(lens[i] >> 24), (uint8_t)(lens[i] >> 16), (uint8_t)(lens[i] >> 8),
                        (uint8_t)lens[i]};
        raw_send(fd, h, 4);
        assert_true(wait_closed(fd, 3, NULL) >= 0);
        close(fd);
    }
    assert_serving(f, "after_oversized");
}

static void test_half_sent_then_silence(void **state)
{
    fixture *f = *state;
    int fd = raw_connect(f->port);
    raw_auth(fd, "s3cret");
    uint8_t hdr[4] = {0, 0, 0, 100};
    raw_send(fd, hdr, 4);
    raw_send(fd, "\x02partial", 8);        /* 8 of the promised 100 bytes, then nothing */
    assert_serving(f, "during_half_sent"); /* served while the other one stalls */
    double t = wait_closed(fd, 5, NULL);
    assert_true(t >= 0);            /* dropped ... */
    assert_true(t < STALL_S + 2.0); /* ... after about DT_STORE_STALL_S */
    close(fd);
    /* a header cut in the middle counts as half-sent too */
    fd = raw_connect(f->port);
    raw_auth(fd, "s3cret");
    raw_send(fd, hdr, 2);
    assert_true(wait_closed(fd, 5, NULL) >= 0);
    close(fd);
    assert_serving(f, "after_half_sent");
}

static void test_half_sent_then_disconnect(void **state)
{
    fixture *f = *state;
    int fd = raw_connect(f->port);
    raw_auth(fd, "s3cret");
    uint8_t hdr[4] = {0, 0, 1, 0};
    raw_send(fd, hdr, 4);
    raw_send(fd, "\x02", 1);
    close(fd);
    /* and a peer that vanishes while its GET is parked */
    fd = raw_connect(f->port);
    raw_auth(fd, "s3cret");
    uint8_t get[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                     0,    0,    0,    4,    'n',  'e',  'v',  'r'};
    send_frame(fd, 3, get, sizeof(get));
    usleep(100000);
    close(fd);
    assert_serving(f, "after_disconnect");
    assert_int_equal(dt_store_set(f->server, "nevr", "1", 1), DT_OK); /* wakes nobody, no crash */
    assert_serving(f, "after_disconnect2");
}

static void test_silent_unauthenticated(void **state)
{
    fixture *f = *state;
    int fd = raw_connect(f->port);
    double t = wait_closed(fd, 5, NULL);
    assert_true(t >= 0 && t < STALL_S + 2.0);
    close(fd);
}

typedef struct drip {
    int port;
    volatile int stop;
} drip;

/* Three slow-drip clients: a frame header one byte at a time, never stalled.
 * (A thread, not a child process: a fork would hold the store's own client
 * socket open and so delay its exit by itself.) */
static void *drip_main(void *arg)
{
    drip *d = arg;
    int fds[3];
    uint8_t hdr[4] = {0, 0, 0x10, 0}; /* an AUTH frame of 4096 bytes, sent a byte per 0.1 s */
    for (int i = 0; i < 3; i++) {
        fds[i] = raw_connect(d->port);
        raw_send(fds[i], hdr, sizeof(hdr));
    }
    while (!d->stop) {
        for (int i = 0; i < 3; i++)
            (void)!send(fds[i], "\1", 1, MSG_NOSIGNAL);
        usleep(100000);
    }
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    return NULL;
}

/* Clients that never authenticate but send a byte now and then (never
 * stalled) do not delay the exit: only ranks are waited for. */
static void test_exit_not_delayed_by_unauthenticated(void **state)
{
    (void)state;
    dt_store *s = own_server();
    assert_non_null(s);
    drip d = {.port = dt_store_port(s)};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, drip_main, &d), 0);
    usleep(300000); /* the drips have started */
    double t0 = dt__clock_now();
    dt_store_destroy(s);
    double took = dt__clock_now() - t0;
    d.stop = 1;
    pthread_join(t, NULL);
    if (!(took < 2.0))
        fail_msg("dt_store_destroy took %.1f s waiting for unauthenticated clients", took);
}

/* Without a token, a store that other hosts can reach is refused, by name. */
static void test_empty_token_refused_off_host(void **state)
{
    (void)state;
    dt_store_params p = {.field_mask = DT_STORE_PARAM_FIELD_IS_SERVER | DT_STORE_PARAM_FIELD_PORT |
                                       DT_STORE_PARAM_FIELD_TOKEN | DT_STORE_PARAM_FIELD_BIND,
                         .is_server = true,
                         .port = 0,
                         .token = "",
                         .bind = "0.0.0.0"};
    dt_store *s = NULL;
    assert_int_equal(dt_store_create(&p, &s), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "no job token for a store bound to 0.0.0.0"));
    assert_null(s);
    p.bind = "127.0.0.1"; /* a one-host job may go without */
    assert_int_equal(dt_store_create(&p, &s), DT_OK);
    dt_store_destroy(s);
}

/* Many idle authenticated connections do not slow anyone down. */
static void test_many_clients(void **state)
{
    fixture *f = *state;
    enum { N = 64 };
    int fds[N];
    for (int i = 0; i < N; i++) {
        fds[i] = raw_connect(f->port);
        raw_auth(fds[i], "s3cret");
    }
    double t0 = dt__clock_now();
    for (int i = 0; i < 50; i++)
        assert_serving(f, "many");
    assert_true(dt__clock_now() - t0 < 2.0);
    /* idle authenticated clients are not dropped by the stall timer */
    usleep((useconds_t)(STALL_S * 1.5 * 1e6));
    for (int i = 0; i < N; i++) {
        send_frame(fds[i], 5 /* ADD */, "\0\0\0\0\0\0\0\1\0\0\0\1c", 13);
        uint8_t r[13];
        size_t got = 0;
        while (got < sizeof(r)) {
            ssize_t n = recv(fds[i], r + got, sizeof(r) - got, 0);
            assert_true(n > 0);
            got += (size_t)n;
        }
        assert_int_equal(r[4], 0);
        assert_int_equal(r[12], i + 1);
        close(fds[i]);
    }
}

/* A legitimate wait longer than the stall timer is not mistaken for a stall. */
static void test_long_wait_not_stalled(void **state)
{
    fixture *f = *state;
    const char *keys[] = {"never_set"};
    double t0 = dt__clock_now();
    assert_int_equal(dt_store_wait(f->server, keys, 1, 3 * STALL_S), DT_ERR_TIMEOUT);
    assert_true(dt__clock_now() - t0 >= 3 * STALL_S - 0.05);
    assert_non_null(strstr(dt_last_error(), "never_set"));
    assert_serving(f, "after_long_wait");
}

/* Child: a store server limited to 48 fds; reports its port, serves for 1.5 s
 * while the parent floods it, then checks it still serves and did not spin. */
static int fd_limited_server(int port_pipe)
{
    struct rlimit rl = {48, 48};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 10;
    dt_store_params p = {.field_mask = DT_STORE_PARAM_FIELD_IS_SERVER | DT_STORE_PARAM_FIELD_PORT |
                                       DT_STORE_PARAM_FIELD_TOKEN,
                         .is_server = true,
                         .port = 0,
                         .token = "s3cret"};
    dt_store *s = NULL;
    if (dt_store_create(&p, &s) != DT_OK)
        return 11;
    int port = dt_store_port(s);
    if (write(port_pipe, &port, sizeof(port)) != sizeof(port))
        return 12;
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    usleep(1500000);
    getrusage(RUSAGE_SELF, &after);
    double cpu = (double)(after.ru_utime.tv_sec - before.ru_utime.tv_sec) +
                 (double)(after.ru_stime.tv_sec - before.ru_stime.tv_sec) +
                 1e-6 * (double)(after.ru_utime.tv_usec - before.ru_utime.tv_usec) +
                 1e-6 * (double)(after.ru_stime.tv_usec - before.ru_stime.tv_usec);
    void *v = NULL;
    size_t n = 0;
    if (dt_store_set(s, "alive", "1", 1) != DT_OK || dt_store_get(s, "alive", &v, &n) != DT_OK)
        return 13;
    free(v);
    dt_store_destroy(s);
    return cpu < 0.5 ? 0 : 14;
}

/* Out of file descriptors, the server neither spins on accept() nor stops serving. */
static void test_fd_exhaustion(void **state)
{
    int pp[2];
    assert_int_equal(pipe(pp), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pp[0]);
        _exit(fd_limited_server(pp[1]));
    }
    close(pp[1]);
    int port = 0;
    assert_int_equal(read(pp[0], &port, sizeof(port)), (ssize_t)sizeof(port));
    close(pp[0]);
    enum { N = 96 }; /* twice the child's fd limit: the rest waits in the backlog */
    int fds[N];
    for (int i = 0; i < N; i++)
        fds[i] = raw_connect(port);
    usleep(1000000);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0); /* 14 = spun, 13 = stopped serving */
}

/*
 * --rejections (its own ctest entry, DT_LOG=warn): 20 wrong-token clients
 * in a row log 3 warnings and one summary, not 20 lines.
 */
static int rejections(void)
{
    char path[] = "/tmp/dt_store_rejections_XXXXXX";
    int log = mkstemp(path), saved = dup(2);
    if (log < 0 || saved < 0)
        return 2;
    dup2(log, 2);
    dt_store *s = own_server();
    if (s == NULL)
        return 2;
    for (int i = 0; i < 20; i++) {
        int fd = raw_connect(dt_store_port(s));
        send_frame(fd, 1, "wrong", 5);
        wait_closed(fd, 3, NULL);
        close(fd);
    }
    dt_store_destroy(s);
    dup2(saved, 2);
    FILE *f = fopen(path, "r");
    char line[512];
    int dropped = 0, summaries = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        dropped += strstr(line, "store: dropping client") != NULL;
        summaries += strstr(line, "store: 17 more client(s) dropped") != NULL;
        fputs(line, stdout);
    }
    if (f != NULL)
        fclose(f);
    unlink(path);
    printf("%d drop lines, %d summaries for 20 rejected clients\n", dropped, summaries);
    return dropped == 3 && summaries == 1 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--rejections") == 0)
        return rejections();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrong_token),
        cmocka_unit_test(test_not_auth_first),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_oversized_length),
        cmocka_unit_test(test_half_sent_then_silence),
        cmocka_unit_test(test_half_sent_then_disconnect),
        cmocka_unit_test(test_silent_unauthenticated),
        cmocka_unit_test(test_exit_not_delayed_by_unauthenticated),
        cmocka_unit_test(test_empty_token_refused_off_host),
        cmocka_unit_test(test_many_clients),
        cmocka_unit_test(test_long_wait_not_stalled),
        cmocka_unit_test(test_fd_exhaustion),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
