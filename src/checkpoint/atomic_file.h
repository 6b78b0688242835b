/*
 * Crash-safe file creation: write to "<path>.tmp-XXXXXX" in the same
 * directory, then fsync, rename over <path> and fsync the directory. Until
 * the rename the real path keeps its previous content (or does not exist).
 */
#ifndef DT_CHECKPOINT_ATOMIC_FILE_H
#define DT_CHECKPOINT_ATOMIC_FILE_H

#include <stddef.h>

#include "dtensor/core.h"

typedef struct dt_atomic_file dt_atomic_file;

/* Create the temporary file for @p path. DT_ERR_SYSTEM with strerror. */
dt_status dt__atomic_file_create(const char *path, dt_atomic_file **out);
/* Append @p len bytes (retries short writes and EINTR). DT_ERR_SYSTEM. */
dt_status dt__atomic_file_write(dt_atomic_file *f, const void *buf, size_t len);
/* fsync, close, rename to the real path, fsync the directory; frees @p f.
 * On failure the temporary file is removed. */
dt_status dt__atomic_file_commit(dt_atomic_file *f);
/* Close and remove the temporary file; frees @p f. NULL-safe. */
void dt__atomic_file_abort(dt_atomic_file *f);
/* Write a whole small file atomically (index.json). */
dt_status dt__atomic_file_put(const char *path, const void *buf, size_t len);

#endif
