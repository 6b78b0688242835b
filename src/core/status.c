/* Status texts and the thread-local last error. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"

static _Thread_local char last_error[1024];

int dt_version(void)
{
    return DT_VERSION_CODE;
}

const char *dt_status_str(dt_status s)
{
    switch (s) {
#define DT_STATUS_CASE_(name, value, text)                                                         \
    case name:                                                                                     \
        return text;
        DT_STATUS_MAP(DT_STATUS_CASE_)
#undef DT_STATUS_CASE_
    }
    return "unknown status";
}

const char *dt_last_error(void)
{
    return last_error;
}

void dt_clear_error(void)
{
    last_error[0] = '\0';
}

dt_status dt__error(dt_status status, const char *file, int line, const char *fmt, ...)
{
    char msg[sizeof(last_error) - 32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    int rank = dt__log_rank();
    if (rank >= 0)
        snprintf(last_error, sizeof(last_error), "rank %d: %s", rank, msg);
    else
        snprintf(last_error, sizeof(last_error), "%s", msg);
    DT_LOG_DEBUG("core", "%s: %s (%s:%d)", dt_status_str(status), msg, file, line);
    return status;
}

const char *dt__error_text(const char *msg)
{
    const char *p = msg;
    if (strncmp(p, "rank ", 5) != 0)
        return msg;
    p += 5;
    while (*p >= '0' && *p <= '9')
        p++;
    return p > msg + 5 && p[0] == ':' && p[1] == ' ' ? p + 2 : msg;
}

void dt__trace_hop(dt_status status, const char *file, int line, const char *expr)
{
    DT_LOG_TRACE("core", "%s -> %s (%s:%d)", expr, dt_status_str(status), file, line);
}
