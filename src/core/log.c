/* Environment-driven logging: DT_LOG, DT_LOG_SUBSYS, DT_LOG_FILE, dt_log_set(). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"

static int log_level_cached = -1; /* -1 until DT_LOG was read */
static int log_rank = -1;
static char subsys_filter[256];
static int subsys_all = -1;
static FILE *log_file;
static dt_log_fn log_fn;
static void *log_user;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *level_names[] = {"none", "error", "warn", "info", "debug", "trace"};

dt_log_level dt__log_level(void)
{
    if (log_level_cached < 0) {
        const char *v = dt__config_str("DT_LOG");
        int level = DT_LOG_LEVEL_WARN;
        for (int i = 0; v != NULL && i <= DT_LOG_LEVEL_TRACE; i++)
            if (strcasecmp(v, level_names[i]) == 0)
                level = i;
        log_level_cached = level;
    }
    return (dt_log_level)log_level_cached;
}

void dt_log_set_level(dt_log_level level)
{
    log_level_cached = (int)level;
}

bool dt__log_subsys_enabled(const char *subsys)
{
    if (subsys_all < 0) {
        const char *v = dt__config_str("DT_LOG_SUBSYS");
        subsys_all = (v == NULL || v[0] == '\0' || strcmp(v, "all") == 0);
        if (!subsys_all)
            snprintf(subsys_filter, sizeof(subsys_filter), ",%s,", v);
    }
    if (subsys_all)
        return true;
    char key[64];
    snprintf(key, sizeof(key), ",%s,", subsys);
    return strstr(subsys_filter, key) != NULL;
}

void dt__log_set_rank(int rank)
{
    log_rank = rank;
}

int dt__log_rank(void)
{
    return log_rank;
}

void dt_log_set(dt_log_fn fn, void *user_data)
{
    pthread_mutex_lock(&log_lock);
    log_fn = fn;
    log_user = user_data;
    pthread_mutex_unlock(&log_lock);
}

/* DT_LOG_FILE with %r -> rank and %p -> pid; opened on first use. */
static FILE *log_sink(void)
{
    if (log_file != NULL)
        return log_file;
    const char *pattern = dt__config_str("DT_LOG_FILE");
    if (pattern == NULL || pattern[0] == '\0')
        return stderr;
    char path[512];
    size_t n = 0;
    for (const char *p = pattern; *p != '\0' && n + 16 < sizeof(path); p++) {
        if (p[0] == '%' && p[1] == 'r') {
            n += (size_t)snprintf(path + n, sizeof(path) - n, "%d", log_rank);
            p++;
        } else if (p[0] == '%' && p[1] == 'p') {
            n += (size_t)snprintf(path + n, sizeof(path) - n, "%d", (int)getpid());
            p++;
        } else {
            path[n++] = *p;
        }
    }
    path[n] = '\0';
    log_file = fopen(path, "a");
    if (log_file == NULL)
        return stderr;
    setvbuf(log_file, NULL, _IOLBF, 0);
    return log_file;
}

bool dt__log_host_leader(void)
{
    /* the launchers' local-rank variables (torchrun/dtrun, Open MPI, MPICH, Slurm) */
    static const char *const vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                       "MPI_LOCALRANKID", "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL && v[0] != '\0')
            return strtol(v, NULL, 10) == 0;
    }
    return true;
}

void dt__log(dt_log_level level, const char *subsys, const char *file, int line, const char *fmt,
             ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    pthread_mutex_lock(&log_lock);
    if (log_fn != NULL) {
        log_fn(level, subsys, msg, log_user);
    } else {
        FILE *f = log_sink();
        const char *base = strrchr(file, '/');
        fprintf(f, "[dtensor %s rank %d %s] %s (%s:%d)\n", level_names[level], log_rank, subsys,
                msg, base != NULL ? base + 1 : file, line);
    }
    pthread_mutex_unlock(&log_lock);
}
