/*
 * Tensor scopes and dt_set_error (include/dtensor/scope.h).
 *
 * One stack per thread: the references given to any open scope in one array,
 * newest last, and for each open scope the index its records start at. A
 * record taken back by dt_scope_keep becomes NULL (release ignores it), so
 * keeping costs no shifting. The arrays are freed when the last scope closes,
 * so a thread that balances its scopes leaves nothing behind.
 */
#include <stdarg.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/log.h"
#include "dtensor/scope.h"

typedef struct scope_stack {
    dt_tensor **refs; /* references owned by the open scopes */
    size_t n, cap;
    size_t *starts; /* starts[i]: first record of scope i (0 = outermost) */
    int depth, depth_cap;
} scope_stack;

static _Thread_local scope_stack st;

dt_status dt_set_error(dt_status status, const char *fmt, ...)
{
    char msg[1000];
    if (fmt == NULL) {
        msg[0] = '\0';
    } else {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
    }
    return dt__error(status, __FILE__, __LINE__, "%s", msg);
}

dt_status dt_scope_begin(void)
{
    if (st.depth == st.depth_cap) {
        int cap = st.depth_cap > 0 ? 2 * st.depth_cap : 8;
        size_t *s = realloc(st.starts, (size_t)cap * sizeof(*s));
        if (s == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "dt_scope_begin: no memory for scope %d", st.depth + 1);
        st.starts = s;
        st.depth_cap = cap;
    }
    st.starts[st.depth++] = st.n;
    return DT_OK;
}

void dt_scope_end(void)
{
    if (st.depth == 0) {
        DT_LOG_WARN("core", "dt_scope_end without an open scope on this thread: nothing released");
        return;
    }
    size_t start = st.starts[--st.depth];
    /* newest first, as a function releases what it made in reverse order */
    while (st.n > start)
        dt_tensor_release(st.refs[--st.n]);
    if (st.depth == 0) {
        free(st.refs);
        free(st.starts);
        st = (scope_stack){0};
    }
}

dt_tensor *dt_scope_add(dt_tensor *t)
{
    if (t == NULL)
        return NULL;
    if (st.depth == 0) {
        DT_LOG_WARN("core", "dt_scope_add without an open scope: the reference stays with the "
                            "caller");
        return t;
    }
    if (st.n == st.cap) {
        size_t cap = st.cap > 0 ? 2 * st.cap : 32;
        dt_tensor **r = realloc(st.refs, cap * sizeof(*r));
        if (r == NULL) {
            DT_LOG_ERROR("core",
                         "dt_scope_add: no memory to record %zu references: the tensor "
                         "is not recorded and will leak",
                         cap);
            return t;
        }
        st.refs = r;
        st.cap = cap;
    }
    st.refs[st.n++] = t;
    return t;
}

dt_tensor *dt_scope_keep(dt_tensor *t)
{
    if (t == NULL)
        return NULL;
    for (size_t i = st.n; i > 0; i--) {
        if (st.refs[i - 1] == t) {
            st.refs[i - 1] = NULL;
            break;
        }
    }
    return t;
}

int dt_scope_depth(void)
{
    return st.depth;
}
