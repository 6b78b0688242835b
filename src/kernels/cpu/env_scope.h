/*
 * Setting an environment variable around a library load and putting it back:
 * OpenBLAS and oneDNN's OpenMP read their settings (kernel, threads, wait
 * policy) only when they load, and dtensor must leave the user's environment
 * as it found it. Not thread-safe (setenv): the loaders run once, under their
 * pthread_once.
 */
#ifndef DT_KERNELS_CPU_ENV_SCOPE_H
#define DT_KERNELS_CPU_ENV_SCOPE_H

/* Set @p name to @p value; returns what to give dt__env_restore (malloc'ed or NULL). */
char *dt__env_set_saving(const char *name, const char *value);

/* Put @p name back as dt__env_set_saving found it (an empty value stays
 * empty; unset stays unset); frees @p saved. */
void dt__env_restore(const char *name, char *saved);

#endif
