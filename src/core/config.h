/*
 * The tunables registry. Every environment variable dtensor reads is a row of
 * the table in config.c (name, default, help); code reads them only through
 * these getters, so `dt_config_print` lists them all.
 */
#ifndef DT_CORE_CONFIG_H
#define DT_CORE_CONFIG_H

#include <stdint.h>

/* The raw value: the environment's, else the registry default (may be NULL).
 * Asking for a name missing from the registry is a programming error, logged. */
const char *dt__config_str(const char *name);
int64_t dt__config_int(const char *name);
double dt__config_double(const char *name);

#endif
