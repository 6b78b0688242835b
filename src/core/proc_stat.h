/*
 * A process's state letter and start time from /proc/PID/stat. Header-only:
 * dtrun, which does not link the library, watches its ranks with it too.
 */
#ifndef DT_CORE_PROC_STAT_H
#define DT_CORE_PROC_STAT_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* State letter ('R', 'S', 'T' stopped, 't' traced, 'Z'...) and start time (clock
 * ticks after boot) of @p pid; false when there is no such process. */
static inline bool dt__proc_stat(int pid, char *state, unsigned long long *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces and ')' */
    if (p == NULL || p[1] == '\0')
        return false;
    p += 2;
    *state = *p;
    /* fields after the name start at 3 (state); start time is field 22 */
    for (int field = 3; field < 22 && p != NULL; field++) {
        p = strchr(p, ' ');
        if (p != NULL)
            p++;
    }
    *start = (p != NULL) ? strtoull(p, NULL, 10) : 0;
    return true;
}

#endif
