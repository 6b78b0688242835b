/*
 * Internal error helpers (UCX's rules): the first function that detects an
 * error records the message with DT_ERR(); callers only propagate with
 * DT_CHECK / DT_CHECK_GOTO. Outputs are written only after success.
 */
#ifndef DT_CORE_ERROR_H
#define DT_CORE_ERROR_H

#include "core/handle.h"
#include "dtensor/core.h"

/* The handle types whose released handles entry points detect (handle.h);
 * declared here, not included, so core does not depend on their layers. */
typedef struct dt_tensor dt_tensor;
typedef struct dt_mesh dt_mesh;

/* The name of @p ptr's handle type (for messages). */
#define DT__HANDLE_NAME(ptr)                                                                       \
    _Generic((ptr),                                                                                \
        dt_tensor *: "tensor",                                                                     \
        const dt_tensor *: "tensor",                                                               \
        dt_mesh *: "mesh",                                                                         \
        default: "mesh")

/* The magic of @p ptr's handle type, 0 for any other pointer type. */
#define DT__HANDLE_MAGIC(ptr)                                                                      \
    _Generic((ptr),                                                                                \
        dt_tensor *: DT__MAGIC_TENSOR,                                                             \
        const dt_tensor *: DT__MAGIC_TENSOR,                                                       \
        dt_mesh *: DT__MAGIC_MESH,                                                                 \
        const dt_mesh *: DT__MAGIC_MESH,                                                           \
        default: 0u)

/* Record "what and why" for this thread and return @p status. printf-style. */
dt_status dt__error(dt_status status, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The trace hop log used by the check macros at DT_LOG=trace. */
void dt__trace_hop(dt_status status, const char *file, int line, const char *expr);

#define DT_ERR(status, ...) dt__error((status), __FILE__, __LINE__, __VA_ARGS__)

/* @p msg (a last error) without the "rank N: " DT_ERR puts in front, to
 * quote it inside another error, which gets its own. */
const char *dt__error_text(const char *msg);

#define DT_CHECK(call)                                                                             \
    do {                                                                                           \
        dt_status dt_check_s_ = (call);                                                            \
        if (dt_check_s_ != DT_OK) {                                                                \
            dt__trace_hop(dt_check_s_, __FILE__, __LINE__, #call);                                 \
            return dt_check_s_;                                                                    \
        }                                                                                          \
    } while (0)

#define DT_CHECK_GOTO(call, status, label)                                                         \
    do {                                                                                           \
        (status) = (call);                                                                         \
        if ((status) != DT_OK) {                                                                   \
            dt__trace_hop((status), __FILE__, __LINE__, #call);                                    \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

/* Argument checks for public entry points: return DT_ERR_INVALID_ARG naming it. */
#define DT_ARG_NOT_NULL(ptr)                                                                       \
    do {                                                                                           \
        if ((ptr) == NULL)                                                                         \
            return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument '%s' is NULL", __func__, #ptr);        \
        DT_ARG_ALIVE(ptr);                                                                         \
    } while (0)

/* A handle argument that was released (or is not a handle of its type):
 * DT_ERR_INVALID_ARG naming it. Nothing for pointers of other types. */
#define DT_ARG_ALIVE(ptr)                                                                          \
    do {                                                                                           \
        const char *dt_dead_ = dt__handle_problem((const void *)(ptr), DT__HANDLE_MAGIC(ptr));     \
        if (dt_dead_ != NULL)                                                                      \
            return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument '%s' is %s %s", __func__, #ptr,        \
                          dt_dead_, DT__HANDLE_NAME(ptr));                                         \
    } while (0)

#endif
