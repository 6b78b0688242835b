/*
 * Token data: a flat little-endian uint16 file (nanoGPT .bin) held in memory,
 * and the batches of the spec's Data section.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file_open.h"
#include "dtensor/nn.h"

struct dt_token_data {
    uint16_t *tokens;
    int64_t n;
    int64_t vocab; /* max id + 1 */
};

static dt_status wrap(uint16_t *tokens, int64_t n, dt_token_data **out)
{
    dt_token_data *d = malloc(sizeof(*d));
    if (d == NULL) {
        free(tokens);
        return DT_ERR(DT_ERR_NO_MEMORY, "token data: no memory");
    }
    d->tokens = tokens;
    d->n = n;
    d->vocab = 0;
    for (int64_t i = 0; i < n; i++)
        if ((int64_t)tokens[i] + 1 > d->vocab)
            d->vocab = (int64_t)tokens[i] + 1;
    *out = d;
    return DT_OK;
}

/* The file's bytes as host-order uint16 (the file is little-endian). */
static void from_le(uint16_t *t, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *b = (const uint8_t *)&t[i];
        t[i] = (uint16_t)(b[0] | (b[1] << 8));
    }
}

dt_status dt_token_data_open(const char *path, dt_token_data **out)
{
    DT_ARG_NOT_NULL(path);
    DT_ARG_NOT_NULL(out);
    dt_status status;
    FILE *f = NULL;
    struct stat sb;
    DT_CHECK(dt__fopen_regular("dt_token_data_open", path, &f, &sb));
    off_t bytes = sb.st_size;
    if (bytes % 2 != 0) {
        status = DT_ERR(DT_ERR_FORMAT,
                        "dt_token_data_open: '%s' has %" PRId64 " bytes, not a whole number of "
                        "uint16 tokens",
                        path, (int64_t)bytes);
        goto err_close;
    }
    int64_t n = (int64_t)bytes / 2;
    uint16_t *t = malloc(n > 0 ? (size_t)bytes : 1);
    if (t == NULL) {
        status =
            DT_ERR(DT_ERR_NO_MEMORY, "dt_token_data_open: no memory for %" PRId64 " tokens", n);
        goto err_close;
    }
    if (n > 0 && fread(t, 2, (size_t)n, f) != (size_t)n) {
        status = DT_ERR(DT_ERR_SYSTEM, "dt_token_data_open: short read of '%s'", path);
        free(t);
        goto err_close;
    }
    fclose(f);
    from_le(t, n);
    return wrap(t, n, out);

err_close:
    fclose(f);
    return status;
}

dt_status dt_token_data_from_buffer(const uint16_t *tokens, int64_t n, dt_token_data **out)
{
    DT_ARG_NOT_NULL(out);
    if (n < 0 || (n > 0 && tokens == NULL))
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_token_data_from_buffer: %" PRId64 " tokens at %p", n,
                      (const void *)tokens);
    uint16_t *t = malloc(n > 0 ? (size_t)n * sizeof(*t) : 1);
    if (t == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_token_data_from_buffer: no memory");
    if (n > 0)
        memcpy(t, tokens, (size_t)n * sizeof(*t));
    return wrap(t, n, out);
}

void dt_token_data_close(dt_token_data *d)
{
    if (d == NULL)
        return;
    free(d->tokens);
    free(d);
}

int64_t dt_token_data_size(const dt_token_data *d)
{
    return d != NULL ? d->n : 0;
}
int64_t dt_token_data_vocab(const dt_token_data *d)
{
    return d != NULL ? d->vocab : 0;
}

dt_status dt_token_data_batch(const dt_token_data *d, int64_t step, int64_t batch, int64_t seq,
                              int64_t row_begin, int64_t row_end, dt_tensor **inputs,
                              dt_tensor **targets)
{
    DT_ARG_NOT_NULL(d);
    DT_ARG_NOT_NULL(inputs);
    DT_ARG_NOT_NULL(targets);
    if (step < 0 || batch <= 0 || seq <= 0)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_token_data_batch: step %" PRId64 ", batch %" PRId64 ", seq %" PRId64
                      " (need step >= 0, batch and seq > 0)",
                      step, batch, seq);
    if (d->n < seq + 2)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_token_data_batch: %" PRId64 " tokens are too few for seq %" PRId64
                      " (need seq + 2)",
                      d->n, seq);
    if (row_begin < 0 || row_end > batch || row_begin > row_end)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_token_data_batch: rows [%" PRId64 ", %" PRId64 ") outside [0, %" PRId64
                      ")",
                      row_begin, row_end, batch);
    int64_t rows = row_end - row_begin;
    int64_t shape[2] = {rows, seq};
    dt_tensor *x = NULL, *y = NULL;
    DT_CHECK(dt_tensor_empty(2, shape, DT_DTYPE_I64, dt_device_cpu(), &x));
    dt_status status = dt_tensor_empty(2, shape, DT_DTYPE_I64, dt_device_cpu(), &y);
    if (status != DT_OK) {
        dt_tensor_release(x);
        return status;
    }
    int64_t *xi = dt_tensor_data(x), *yi = dt_tensor_data(y);
    /* unsigned arithmetic: (step*batch + b)*seq may exceed int64 on long runs */
    uint64_t span = (uint64_t)(d->n - seq - 1);
    for (int64_t r = 0; r < rows; r++) {
        uint64_t b = (uint64_t)(row_begin + r);
        uint64_t start = (((uint64_t)step * (uint64_t)batch + b) % span) * ((uint64_t)seq % span);
        start %= span;
        for (int64_t j = 0; j < seq; j++) {
            xi[r * seq + j] = d->tokens[start + (uint64_t)j];
            yi[r * seq + j] = d->tokens[start + (uint64_t)j + 1];
        }
    }
    *inputs = x;
    *targets = y;
    return DT_OK;
}
