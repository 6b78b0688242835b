/*
 * Crash-safe file creation (see atomic_file.h). The order matters: data
 * fsync'ed before the rename, so a crash after the rename cannot expose a
 * file whose blocks were never written; the directory fsync'ed after it, so
 * the new name itself survives a power loss.
 */
#define _GNU_SOURCE /* mkostemp */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/atomic_file.h"
#include "core/error.h"

struct dt_atomic_file {
    int fd;
    char *path;
    char *tmp;
};

static void af_free(dt_atomic_file *f)
{
    if (f == NULL)
        return;
    if (f->fd >= 0)
        close(f->fd);
    free(f->path);
    free(f->tmp);
    free(f);
}

dt_status dt__atomic_file_create(const char *path, dt_atomic_file **out)
{
    dt_atomic_file *f = calloc(1, sizeof(*f));
    size_t n = strlen(path);
    if (f == NULL || (f->path = strdup(path)) == NULL || (f->tmp = malloc(n + 16)) == NULL) {
        af_free(f);
        return DT_ERR(DT_ERR_NO_MEMORY, "atomic file %s", path);
    }
    snprintf(f->tmp, n + 16, "%s.tmp-XXXXXX", path);
    f->fd = mkostemp(f->tmp, O_CLOEXEC);
    if (f->fd < 0) {
        dt_status st = DT_ERR(DT_ERR_SYSTEM, "cannot create %s: %s", f->tmp, strerror(errno));
        af_free(f);
        return st;
    }
    /* mkstemp makes 0600; a checkpoint is an ordinary readable file (reading
     * the umask would race with other threads, so use the common 0644) */
    (void)fchmod(f->fd, 0644);
    *out = f;
    return DT_OK;
}

dt_status dt__atomic_file_write(dt_atomic_file *f, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(f->fd, p, len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return DT_ERR(DT_ERR_SYSTEM, "cannot write %s: %s", f->tmp,
                          w < 0 ? strerror(errno) : "no progress");
        p += w;
        len -= (size_t)w;
    }
    return DT_OK;
}

static dt_status af_sync_dir(const char *path)
{
    char *copy = strdup(path);
    if (copy == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "atomic file %s", path);
    const char *dir = dirname(copy);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    dt_status st = DT_OK;
    if (fd < 0 || fsync(fd) != 0)
        st = DT_ERR(DT_ERR_SYSTEM, "cannot fsync directory %s: %s", dir, strerror(errno));
    if (fd >= 0)
        close(fd);
    free(copy);
    return st;
}

dt_status dt__atomic_file_commit(dt_atomic_file *f)
{
    dt_status st = DT_OK;
    if (fsync(f->fd) != 0) {
        st = DT_ERR(DT_ERR_SYSTEM, "cannot fsync %s: %s", f->tmp, strerror(errno));
        goto err_abort;
    }
    int rc = close(f->fd);
    f->fd = -1;
    if (rc != 0) {
        st = DT_ERR(DT_ERR_SYSTEM, "cannot close %s: %s", f->tmp, strerror(errno));
        goto err_abort;
    }
    if (rename(f->tmp, f->path) != 0) {
        st = DT_ERR(DT_ERR_SYSTEM, "cannot rename %s to %s: %s", f->tmp, f->path, strerror(errno));
        goto err_abort;
    }
    st = af_sync_dir(f->path);
    af_free(f);
    return st;

err_abort:
    dt__atomic_file_abort(f);
    return st;
}

void dt__atomic_file_abort(dt_atomic_file *f)
{
    if (f == NULL)
        return;
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    unlink(f->tmp);
    af_free(f);
}

dt_status dt__atomic_file_put(const char *path, const void *buf, size_t len)
{
    dt_atomic_file *f = NULL;
    DT_CHECK(dt__atomic_file_create(path, &f));
    dt_status st = dt__atomic_file_write(f, buf, len);
    if (st != DT_OK) {
        dt__atomic_file_abort(f);
        return st;
    }
    return dt__atomic_file_commit(f);
}
