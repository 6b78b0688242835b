/*
 * The tunables registry. Every environment variable dtensor reads is a row of
 * the table in config.c (name, default, help); code reads them only through
 * these getters, so `dt_config_print` lists them all.
 */
#ifndef DT_CORE_CONFIG_H
#define DT_CORE_CONFIG_H

#include <stdint.h>

#include "dtensor/core.h"

/* The value: the environment's, else the registry default (may be NULL).
 * Each row has a type (integer or number with a range, boolean, one of a
 * list of words, text with a syntax check, or another program's variable,
 * which is not checked). A set value that is not valid is rejected by
 * dt__config_validate; these getters, which run before dt_init too, then
 * return the default and log the bad value once. Booleans read as "0"/"1",
 * words in the registry's spelling. Asking for a name missing from the
 * registry is a programming error, logged. */
const char *dt__config_str(const char *name);
int64_t dt__config_int(const char *name);
double dt__config_double(const char *name);

/* Check every set variable of the registry (dt_init calls this first):
 * DT_ERR_INVALID_ARG "<fn>: environment variable DT_SHM='maybe' is not a
 * boolean (want 0 or 1 ...)" for the first bad one. Also warns once about
 * DT_* variables the registry does not know (misspellings). */
dt_status dt__config_validate(const char *fn);

#endif
