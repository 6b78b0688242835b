/* Internal logging macros: the level test happens before any formatting. */
#ifndef DT_CORE_LOG_H
#define DT_CORE_LOG_H

#include "dtensor/core.h"

/* The level in force: dt_log_set_level's, else DT_LOG (read once), else warn. */
dt_log_level dt__log_level(void);
/* Whether DT_LOG_SUBSYS (comma list; unset, empty or "all" = all) lets @p subsys through. */
bool dt__log_subsys_enabled(const char *subsys);
/* Format one message and hand it to dt_log_set's callback, else write a line
 * (level, rank, subsys, message, file:line) to the log file; thread-safe.
 * Callers test the level first (the DT_LOG_* macros do). */
void dt__log(dt_log_level level, const char *subsys, const char *file, int line, const char *fmt,
             ...) __attribute__((format(printf, 5, 6)));

/* Whether this process is the first rank of its host (local rank 0, from the
 * launcher's environment; true when launched alone): a warning every rank
 * of a host would print the same is printed by that one only. */
bool dt__log_host_leader(void);

/* The rank written on every log line and error message (-1 = unknown yet). */
void dt__log_set_rank(int rank);
int dt__log_rank(void);

#define DT_LOG_AT(level, subsys, ...)                                                              \
    do {                                                                                           \
        if ((int)(level) <= (int)dt__log_level() && dt__log_subsys_enabled(subsys))                \
            dt__log((level), (subsys), __FILE__, __LINE__, __VA_ARGS__);                           \
    } while (0)

/* A warning that every rank of a host would print identically: once per host. */
#define DT_LOG_WARN_HOST(subsys, ...)                                                              \
    do {                                                                                           \
        if (dt__log_host_leader())                                                                 \
            DT_LOG_AT(DT_LOG_LEVEL_WARN, subsys, __VA_ARGS__);                                     \
    } while (0)

#define DT_LOG_ERROR(subsys, ...) DT_LOG_AT(DT_LOG_LEVEL_ERROR, subsys, __VA_ARGS__)
#define DT_LOG_WARN(subsys, ...)  DT_LOG_AT(DT_LOG_LEVEL_WARN, subsys, __VA_ARGS__)
#define DT_LOG_INFO(subsys, ...)  DT_LOG_AT(DT_LOG_LEVEL_INFO, subsys, __VA_ARGS__)
#define DT_LOG_DEBUG(subsys, ...) DT_LOG_AT(DT_LOG_LEVEL_DEBUG, subsys, __VA_ARGS__)
#define DT_LOG_TRACE(subsys, ...) DT_LOG_AT(DT_LOG_LEVEL_TRACE, subsys, __VA_ARGS__)

#endif
