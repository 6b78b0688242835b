/*
 * Token data: the uint16 file reader and the spec's batch windows
 * (row b of step s starts at ((s*B + b)*T) mod (n - T - 1)), row subsets for
 * data parallelism, bad input, and the token file the build makes from
 * examples/data/corpus.txt (path given as the first argument).
 */
#include <fcntl.h>
#include <unistd.h>

#include "nn_test_util.h"

static const char *built_tokens;

static void expect_batch(const dt_token_data *d, const uint16_t *tok, int64_t n, int64_t step,
                         int64_t B, int64_t T, int64_t r0, int64_t r1)
{
    dt_tensor *x = NULL, *y = NULL;
    NN_OK(dt_token_data_batch(d, step, B, T, r0, r1, &x, &y));
    assert_int_equal(dt_tensor_dtype(x), DT_DTYPE_I64);
    assert_int_equal(dt_tensor_dim(x, 0), r1 - r0);
    assert_int_equal(dt_tensor_dim(y, 1), T);
    for (int64_t r = r0; r < r1; r++) {
        int64_t start = ((step * B + r) * T) % (n - T - 1);
        for (int64_t j = 0; j < T; j++) {
            assert_int_equal((int64_t)dt_tensor_item_at(x, (r - r0) * T + j), tok[start + j]);
            assert_int_equal((int64_t)dt_tensor_item_at(y, (r - r0) * T + j), tok[start + j + 1]);
        }
    }
    dt_tensor_release(x);
    dt_tensor_release(y);
}

static void test_batches(void **state)
{
    (void)state;
    enum { N = 101 };
    uint16_t tok[N];
    for (int i = 0; i < N; i++)
        tok[i] = (uint16_t)((i * 37 + 11) % 1000);
    dt_token_data *d = NULL;
    NN_OK(dt_token_data_from_buffer(tok, N, &d));
    assert_int_equal(dt_token_data_size(d), N);
    int64_t vmax = 0;
    for (int i = 0; i < N; i++)
        vmax = tok[i] > vmax ? tok[i] : vmax;
    assert_int_equal(dt_token_data_vocab(d), vmax + 1);
    for (int64_t s = 0; s < 12; s++) /* wraps around the 101 tokens several times */
        expect_batch(d, tok, N, s, 3, 8, 0, 3);
    expect_batch(d, tok, N, 1000003, 4, 5, 0, 4); /* a large step */
    /* a data-parallel rank's rows equal the same rows of the full batch */
    expect_batch(d, tok, N, 5, 4, 8, 2, 4);
    expect_batch(d, tok, N, 5, 4, 8, 1, 2);
    dt_tensor *x = NULL, *y = NULL;
    NN_FAILS(dt_token_data_batch(d, 0, 4, 8, 3, 5, &x, &y), DT_ERR_INVALID_ARG, "rows [3, 5)");
    NN_FAILS(dt_token_data_batch(d, 0, 4, 100, 0, 4, &x, &y), DT_ERR_INVALID_ARG, "seq 100");
    NN_FAILS(dt_token_data_batch(d, -1, 4, 8, 0, 4, &x, &y), DT_ERR_INVALID_ARG, "step -1");
    dt_token_data_close(d);
}

static void test_file(void **state)
{
    (void)state;
    char path[] = "/tmp/nn_data_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    /* little-endian on disk whatever the host: 0x1234 is bytes 34 12 */
    unsigned char bytes[8] = {0x34, 0x12, 0x01, 0x00, 0xff, 0xff, 0x00, 0x00};
    assert_int_equal(write(fd, bytes, sizeof(bytes)), (ssize_t)sizeof(bytes));
    close(fd);
    dt_token_data *d = NULL;
    NN_OK(dt_token_data_open(path, &d));
    assert_int_equal(dt_token_data_size(d), 4);
    assert_int_equal(dt_token_data_vocab(d), 65536);
    dt_tensor *x = NULL, *y = NULL;
    NN_OK(dt_token_data_batch(d, 0, 1, 2, 0, 1, &x, &y));
    assert_int_equal((int64_t)dt_tensor_item_at(x, 0), 0x1234);
    assert_int_equal((int64_t)dt_tensor_item_at(x, 1), 1);
    assert_int_equal((int64_t)dt_tensor_item_at(y, 1), 65535);
    dt_tensor_release(x);
    dt_tensor_release(y);
    dt_token_data_close(d);

    /* an odd byte count is not a uint16 file */
    fd = open(path, O_WRONLY | O_APPEND);
    assert_int_equal(write(fd, bytes, 1), 1);
    close(fd);
    NN_FAILS(dt_token_data_open(path, &d), DT_ERR_FORMAT, "9 bytes");
    unlink(path);
    NN_FAILS(dt_token_data_open(path, &d), DT_ERR_SYSTEM, path);
    dt_token_data_close(NULL);
}

static void test_built_token_file(void **state)
{
    (void)state;
    if (built_tokens == NULL) {
        /* configured without examples: there is no built token file to check */
        skip();
    }
    dt_token_data *d = NULL;
    NN_OK(dt_token_data_open(built_tokens, &d));
    assert_true(dt_token_data_size(d) > 20000);
    assert_true(dt_token_data_vocab(d) <= 128); /* ASCII text, char-level */
    const char *want = "PRIDE AND PREJUDICE";
    int64_t t = (int64_t)strlen(want);
    dt_tensor *x = NULL, *y = NULL;
    NN_OK(dt_token_data_batch(d, 0, 1, t, 0, 1, &x, &y));
    for (int64_t j = 0; j < t; j++)
        assert_int_equal((int64_t)dt_tensor_item_at(x, j), (unsigned char)want[j]);
    dt_tensor_release(x);
    dt_tensor_release(y);
    dt_token_data_close(d);
}

int main(int argc, char **argv)
{
    built_tokens = argc > 1 ? argv[1] : NULL;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batches),
        cmocka_unit_test(test_file),
        cmocka_unit_test(test_built_token_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
