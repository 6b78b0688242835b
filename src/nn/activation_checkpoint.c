/*
 * Activation checkpointing per module: marking modules by hand or by FQN
 * glob (the plans' convention). What a mark does to a forward is
 * checkpoint_recompute.c's.
 */
#include <fnmatch.h>
#include <string.h>

#include "core/error.h"
#include "nn/module_impl.h"

dt_status dt_module_checkpoint(dt_module *m, bool enable)
{
    DT_ARG_NOT_NULL(m);
    m->checkpoint = enable;
    return DT_OK;
}

bool dt_module_is_checkpointed(const dt_module *m)
{
    return m != NULL && m->checkpoint;
}

/* Whether the first @p len characters of @p pat, one FQN segment, match
 * child name @p name: fnmatch per '|' alternative (so '*' stays inside the
 * segment), as the plans' segments. */
static bool segment_match(const char *pat, size_t len, const char *name)
{
    char alt[256];
    size_t start = 0;
    while (start <= len) {
        size_t end = start;
        while (end < len && pat[end] != '|')
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

/* Mark the modules under @p m that match the rest @p pat of the pattern. */
static int mark_rec(dt_module *m, const char *pat)
{
    if (*pat == '\0') {
        m->checkpoint = true;
        return 1;
    }
    const char *dot = strchr(pat, '.');
    size_t len = dot != NULL ? (size_t)(dot - pat) : strlen(pat);
    const char *rest = dot != NULL ? dot + 1 : pat + len;
    int n = 0;
    for (int i = 0; i < m->n_children; i++)
        if (segment_match(pat, len, m->children[i]->name))
            n += mark_rec(m->children[i], rest);
    return n;
}

/* Count the matches first so that a pattern matching nothing marks nothing. */
static int count_rec(const dt_module *m, const char *pat)
{
    if (*pat == '\0')
        return 1;
    const char *dot = strchr(pat, '.');
    size_t len = dot != NULL ? (size_t)(dot - pat) : strlen(pat);
    const char *rest = dot != NULL ? dot + 1 : pat + len;
    int n = 0;
    for (int i = 0; i < m->n_children; i++)
        if (segment_match(pat, len, m->children[i]->name))
            n += count_rec(m->children[i], rest);
    return n;
}

dt_status dt_module_checkpoint_matching(dt_module *root, const char *pattern, int *n_marked)
{
    DT_ARG_NOT_NULL(root);
    DT_ARG_NOT_NULL(pattern);
    if (n_marked != NULL)
        *n_marked = 0;
    if (*pattern == '\0')
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_module_checkpoint_matching: empty pattern (mark the root with "
                      "dt_module_checkpoint)");
    size_t len = strlen(pattern);
    if (pattern[0] == '.' || pattern[len - 1] == '.' || strstr(pattern, "..") != NULL)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_module_checkpoint_matching: pattern '%s' has an empty segment", pattern);
    if (count_rec(root, pattern) == 0)
        return DT_ERR(DT_ERR_NOT_FOUND,
                      "dt_module_checkpoint_matching: pattern '%s' matches no module", pattern);
    int n = mark_rec(root, pattern);
    if (n_marked != NULL)
        *n_marked = n;
    return DT_OK;
}
