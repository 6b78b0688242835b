/* Environment variables set around a library load and put back (env_scope.h). */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/env_scope.h"

char *dt__env_set_saving(const char *name, const char *value)
{
    const char *prev = getenv(name);
    char *saved = prev != NULL ? strdup(prev) : NULL;
    setenv(name, value, 1);
    return saved;
}

void dt__env_restore(const char *name, char *saved)
{
    if (saved != NULL)
        setenv(name, saved, 1);
    else
        unsetenv(name);
    free(saved);
}
