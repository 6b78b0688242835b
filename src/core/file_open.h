/*
 * Opening the files a user names (checkpoints, token data, plans) without
 * ever blocking: a FIFO in place of a file would block a plain open() until a
 * writer appears, and a device or directory would be read as garbage.
 */
#ifndef DT_CORE_FILE_OPEN_H
#define DT_CORE_FILE_OPEN_H

#include <stdio.h>
#include <sys/stat.h>

#include "dtensor/core.h"

/*
 * Open @p path read-only (close-on-exec) when it is a regular file; its stat
 * into @p sb (may be NULL). The open itself is non-blocking and the type is
 * checked on the open descriptor (no race with a rename), then the descriptor
 * is made blocking again. Errors, both naming @p fn and @p path:
 * DT_ERR_SYSTEM "<fn>: cannot open <path>: <strerror>";
 * DT_ERR_INVALID_ARG "<fn>: <path> is a FIFO, not a regular file" (or a
 * directory, a character device, a block device, a socket).
 */
dt_status dt__open_regular(const char *fn, const char *path, int *fd, struct stat *sb);

/* The same as a stdio stream ("rb"). */
dt_status dt__fopen_regular(const char *fn, const char *path, FILE **f, struct stat *sb);

/* "a FIFO", "a directory", ... for a st_mode that is not a regular file. */
const char *dt__file_type_name(mode_t mode);

#endif
