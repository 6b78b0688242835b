/* Helpers for the checkpoint tests. */
#ifndef DT_TEST_CK_UTIL_H
#define DT_TEST_CK_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dtensor.h"

#define CK_OK(call)                                                                                \
    do {                                                                                           \
        dt_status ck_s_ = (call);                                                                  \
        if (ck_s_ != DT_OK)                                                                        \
            fail_msg("%s -> %s: %s", #call, dt_status_str(ck_s_), dt_last_error());                \
    } while (0)

/* @p call must fail with @p want and a message containing @p text. */
#define CK_FAILS(call, want, text)                                                                 \
    do {                                                                                           \
        dt_status ck_s_ = (call);                                                                  \
        if (ck_s_ != (want) || strstr(dt_last_error(), (text)) == NULL)                            \
            fail_msg("%s -> %s '%s', want %s with '%s'", #call, dt_status_str(ck_s_),              \
                     dt_last_error(), dt_status_str(want), (text));                                \
    } while (0)

/* A fresh scratch directory under the test's working directory. */
static inline void ck_tmpdir(char *buf, size_t len, const char *tag)
{
    snprintf(buf, len, "ck_%s_%d", tag, (int)getpid());
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s'", buf, buf);
    if (system(cmd) != 0)
        fail_msg("cannot make %s", buf);
}

static inline void ck_rmdir(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fail_msg("cannot remove %s", dir);
}

static inline unsigned char *ck_read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n)
        fail_msg("cannot read %s", path);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static inline void ck_write_all(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(buf, 1, len, f) != len)
        fail_msg("cannot write %s", path);
    fclose(f);
}

/* A tensor whose element i is fn(i) converted to @p dt. */
static inline dt_tensor *ck_tensor(int ndim, const int64_t *shape, dt_dtype dt,
                                   double (*fn)(int64_t))
{
    dt_tensor *t = NULL;
    CK_OK(dt_tensor_empty(ndim, shape, dt, dt_device_cpu(), &t));
    int64_t n = dt_tensor_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = fn(i);
    dt_tensor *f = NULL;
    CK_OK(dt_tensor_from_buffer(ndim, shape, DT_DTYPE_F64, v, &f));
    CK_OK(dt_tensor_copy_(t, f));
    dt_tensor_release(f);
    free(v);
    return t;
}

#endif
