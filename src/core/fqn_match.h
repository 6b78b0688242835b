/*
 * Matching one segment of an FQN pattern ("layers.*.attention|feed_forward")
 * against a child's name: the rule plans (styles/plan.c) and activation
 * checkpointing (src/nn/activation_checkpoint.c) share.
 */
#ifndef DT_CORE_FQN_MATCH_H
#define DT_CORE_FQN_MATCH_H

#include <stdbool.h>
#include <stddef.h>

/* Does the segment pattern @p pat (its first @p pat_len characters) match
 * @p name? fnmatch per '|' alternative, so '*' stays inside the segment. */
bool dt__fqn_segment_match(const char *pat, size_t pat_len, const char *name);

#endif
