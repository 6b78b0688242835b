/*
 * Handles that know when they are released (handle.c). A handle struct starts
 * with a uint32_t magic; dt__handle_new sets it and dt__handle_delete poisons
 * it and keeps the memory (never returned to malloc, reused only after many
 * other handles of its size were released), so an entry point that receives
 * a released handle reads a dead magic instead of freed memory, in release
 * builds too. DT_ARG_NOT_NULL (error.h) checks the handle types it knows.
 */
#ifndef DT_CORE_HANDLE_H
#define DT_CORE_HANDLE_H

#include <stddef.h>
#include <stdint.h>

#include "dtensor/core.h"

enum {
    DT__MAGIC_TENSOR = 0x7e45e001u,
    DT__MAGIC_MESH = 0x7e45e002u,
    DT__MAGIC_DEAD = 0xdeadd7e4u,
};

/* Zeroed memory for a handle of @p size bytes with its magic set; NULL when
 * out of memory. */
void *dt__handle_new(size_t size, uint32_t magic);

/* Release handle @p h (@p size bytes, as created; NULL is ignored): its magic
 * becomes DT__MAGIC_DEAD and the memory waits in quarantine. */
void dt__handle_delete(void *h, size_t size);

/* NULL when @p h holds @p magic (or @p magic is 0: not a known handle type),
 * else what it is, to go before the type's name: "a released", or "not a
 * live" for a pointer that never was one. */
const char *dt__handle_problem(const void *h, uint32_t magic);

#endif
