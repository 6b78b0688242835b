/* FQN pattern segments (fqn_match.h). */
#include "core/fqn_match.h"

#include <fnmatch.h>
#include <string.h>

bool dt__fqn_segment_match(const char *pat, size_t pat_len, const char *name)
{
    char alt[256];
    size_t start = 0;
    while (start <= pat_len) {
        size_t end = start;
        while (end < pat_len && pat[end] != '|')
            end++;
        size_t n = end - start;
        if (n > 0 && n < sizeof(alt)) {
            memcpy(alt, pat + start, n);
            alt[n] = '\0';
            if (fnmatch(alt, name, 0) == 0)
                return true;
        }
        start = end + 1;
    }
    return false;
}
