/*
 * Activation checkpointing per module: marking modules by hand or by FQN
 * glob (the plans' convention). What a mark does to a forward is
 * checkpoint_recompute.c's.
 */
#include "core/fqn_match.h"
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

/* The modules under @p m that match the rest @p pat of the pattern: counted,
 * and marked when @p mark (a pattern matching nothing marks nothing). */
static int match_rec(dt_module *m, const char *pat, bool mark)
{
    if (*pat == '\0') {
        m->checkpoint = m->checkpoint || mark;
        return 1;
    }
    const char *dot = strchr(pat, '.');
    size_t len = dot != NULL ? (size_t)(dot - pat) : strlen(pat);
    const char *rest = dot != NULL ? dot + 1 : pat + len;
    int n = 0;
    for (int i = 0; i < m->n_children; i++)
        if (dt__fqn_segment_match(pat, len, m->children[i]->name))
            n += match_rec(m->children[i], rest, mark);
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
    if (match_rec(root, pattern, false) == 0)
        return DT_ERR(DT_ERR_NOT_FOUND,
                      "dt_module_checkpoint_matching: pattern '%s' matches no module", pattern);
    int n = match_rec(root, pattern, true);
    if (n_marked != NULL)
        *n_marked = n;
    return DT_OK;
}
