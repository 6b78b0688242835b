/* Non-blocking, type-checked opens of user-named files (see file_open.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file_open.h"

const char *dt__file_type_name(mode_t mode)
{
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "a special file";
}

static dt_status not_regular(const char *fn, const char *path, mode_t mode)
{
    return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s is %s, not a regular file", fn, path,
                  dt__file_type_name(mode));
}

dt_status dt__open_regular(const char *fn, const char *path, int *fd, struct stat *sb)
{
    struct stat st;
    /* stat first: the common bad case is refused without opening (and so
     * without waking a writer blocked on a FIFO) */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return not_regular(fn, path, st.st_mode);
    int f = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (f < 0)
        return DT_ERR(DT_ERR_SYSTEM, "%s: cannot open %s: %s", fn, path, strerror(errno));
    dt_status s = DT_OK;
    int flags;
    if (fstat(f, &st) != 0) {
        s = DT_ERR(DT_ERR_SYSTEM, "%s: cannot stat %s: %s", fn, path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) { /* replaced between the stat and the open */
        s = not_regular(fn, path, st.st_mode);
    } else if ((flags = fcntl(f, F_GETFL)) < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        s = DT_ERR(DT_ERR_SYSTEM, "%s: cannot make %s blocking: %s", fn, path, strerror(errno));
    }
    if (s != DT_OK) {
        close(f);
        return s;
    }
    if (sb != NULL)
        *sb = st;
    *fd = f;
    return DT_OK;
}

dt_status dt__fopen_regular(const char *fn, const char *path, FILE **f, struct stat *sb)
{
    int fd = -1;
    DT_CHECK(dt__open_regular(fn, path, &fd, sb));
    FILE *s = fdopen(fd, "rb");
    if (s == NULL) {
        dt_status st = DT_ERR(DT_ERR_SYSTEM, "%s: cannot open %s: %s", fn, path, strerror(errno));
        close(fd);
        return st;
    }
    *f = s;
    return DT_OK;
}
