/*
 * dtensor/scope.h - for writing programs: checking calls (DT_TRY), reporting
 * your own errors the way the library does, and scopes that release the
 * tensors you give them.
 *
 *     int main(void)
 *     {
 *         dt_runtime *rt;
 *         DT_TRY(dt_init(NULL, &rt));      // on failure: prints where and why, exit(1)
 *         ...
 *         for (int step = 0; step < steps; step++) {
 *             DT_TRY(dt_scope_begin());
 *             dt_tensor *logits, *loss;
 *             DT_TRY(dt_module_call(model, x, &logits));
 *             dt_scope_add(logits);           // released by dt_scope_end
 *             DT_TRY(dt_nn_cross_entropy(logits, y, &loss));
 *             dt_scope_add(loss);
 *             DT_TRY(dt_backward(loss, NULL));
 *             dt_scope_end();                 // releases loss, then logits
 *         }
 *     }
 *
 * Why a scope records only what you add: the library itself keeps tensors it
 * creates during your calls (leaf gradients, optimizer state, activations an
 * autograd graph saved, ZeRO buffers), and a handle does not say who owns it.
 * A scope that released "every tensor created inside it" would free those
 * under the library's feet, so ownership passes to a scope only explicitly,
 * one reference at a time, and it releases exactly the references it was given.
 *
 * Thread safety: each thread has its own stack of scopes; the macros and
 * dt_set_error touch only the calling thread's state. Nothing here is
 * collective.
 */
#ifndef DTENSOR_SCOPE_H
#define DTENSOR_SCOPE_H

#include <stdio.h>
#include <stdlib.h>

#include "dtensor/core.h"
#include "dtensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- checking calls */

/* The file name the DT_TRY macros print: without its directories where the
 * compiler can tell (gcc >= 12, clang >= 9). */
#if defined(__FILE_NAME__)
#define DT_TRY_FILE_ __FILE_NAME__
#else
#define DT_TRY_FILE_ __FILE__
#endif

/* One line on stderr: "file:line: call: status text: dt_last_error()". */
#define DT_TRY_REPORT_(status, call_text)                                                          \
    fprintf(stderr, "%s:%d: %s: %s: %s\n", DT_TRY_FILE_, __LINE__, (call_text),                    \
            dt_status_str(status), dt_last_error())

/**
 * Run @p call (an expression of type dt_status); when it is not DT_OK, print
 * "file:line: call: status: dt_last_error()" to stderr and exit(EXIT_FAILURE).
 * For main() and other code that cannot go on after a failure. Under dtrun the
 * other ranks are then stopped by the launcher; nothing is released, which is
 * fine for a process that ends.
 */
#define DT_TRY(call)                                                                               \
    do {                                                                                           \
        dt_status dt_try_s_ = (call);                                                              \
        if (dt_try_s_ != DT_OK) {                                                                  \
            DT_TRY_REPORT_(dt_try_s_, #call);                                                      \
            exit(EXIT_FAILURE);                                                                    \
        }                                                                                          \
    } while (0)

/**
 * Run @p call; when it is not DT_OK, print the same line and return its status
 * from the enclosing function (which must return dt_status). Each function a
 * failure passes through prints one line, so the lines read as a backtrace,
 * innermost first. Use it where nothing needs releasing on the way out (or
 * where a dt_scope of the caller releases it).
 */
#define DT_TRY_RETURN(call)                                                                        \
    do {                                                                                           \
        dt_status dt_try_s_ = (call);                                                              \
        if (dt_try_s_ != DT_OK) {                                                                  \
            DT_TRY_REPORT_(dt_try_s_, #call);                                                      \
            return dt_try_s_;                                                                      \
        }                                                                                          \
    } while (0)

/**
 * Run @p call and store its status in the dt_status lvalue @p status; when it
 * is not DT_OK, print the same line and `goto label` (a cleanup label that
 * releases what the function made and returns @p status, or ends main with a
 * failure).
 */
#define DT_TRY_GOTO(call, status, label)                                                           \
    do {                                                                                           \
        (status) = (call);                                                                         \
        if ((status) != DT_OK) {                                                                   \
            DT_TRY_REPORT_((status), #call);                                                       \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

/**
 * Record a message as this thread's last error (what dt_last_error() returns
 * afterwards, prefixed with "rank N: " once the rank is known, as the
 * library's own messages are) and return @p status, so program code reports
 * failures the way the library does: `return dt_set_error(DT_ERR_INVALID_ARG,
 * "mlp: input has %d dims, want 2", n);`. printf-style; a message longer than
 * about 1000 bytes is cut. @p status is returned unchanged whatever it is.
 * Not collective.
 */
DT_API dt_status dt_set_error(dt_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---------------------------------------------------------------- scopes */

/**
 * Open a scope on this thread. Scopes nest: dt_scope_add gives references to
 * the innermost open one, dt_scope_end closes it. Every dt_scope_begin needs
 * exactly one dt_scope_end on every path out (use DT_TRY_GOTO to a label that
 * ends it; DT_TRY's exit needs none). Not collective.
 * Errors: DT_ERR_NO_MEMORY.
 */
DT_API dt_status dt_scope_begin(void);

/**
 * Close the innermost scope of this thread, releasing every reference given
 * to it with dt_scope_add, newest first. A tensor that something else still
 * holds (another reference you took with dt_tensor_retain, a module slot, an
 * autograd graph, a tensor in an enclosing scope) lives on; only the scope's
 * references go. Without an open scope it logs a warning and does nothing.
 * Not collective (releasing never communicates).
 */
DT_API void dt_scope_end(void);

/**
 * Give one reference to @p t to the innermost open scope: dt_scope_end will
 * release it, so do not release it yourself (add a tensor once per reference
 * you hand over). Typical: right after the call that gave you the tensor,
 * `DT_TRY(dt_relu(h, &a)); dt_scope_add(a);`. Returns @p t. NULL-safe (nothing
 * is recorded). Without an open scope, or if no memory is left to record it,
 * nothing is recorded, the reference stays with the caller and a warning or
 * error is logged (the tensor leaks rather than being freed while in use).
 * Not collective.
 */
DT_API dt_tensor *dt_scope_add(dt_tensor *t);

/**
 * Take back one reference to @p t from the open scopes of this thread (the
 * innermost scope holding one, newest record first): the caller owns it again
 * and must release it or hand it on, e.g. as a function's result:
 * `*out = dt_scope_keep(y); dt_scope_end();`. Retaining works too:
 * `*out = dt_tensor_retain(y);` before dt_scope_end leaves y alive with the
 * caller holding the new reference. Returns @p t. When no open scope holds
 * @p t (never added, or NULL), nothing changes: the caller already owns its
 * reference. Not collective.
 */
DT_API dt_tensor *dt_scope_keep(dt_tensor *t);

/** Number of scopes open on this thread (0 outside any). */
DT_API int dt_scope_depth(void);

#ifdef __cplusplus
}
#endif
#endif /* DTENSOR_SCOPE_H */
