/*
 * End-of-pass callbacks (dt_backward_queue_callback), the engine's side: each
 * backward pass, nested ones too, pushes its list while it runs; a callback
 * queued from inside the pass goes to the innermost one.
 */
#ifndef DT_AUTOGRAD_CALLBACKS_H
#define DT_AUTOGRAD_CALLBACKS_H

#include <stdbool.h>

#include "dtensor/autograd.h"

typedef struct dt__ag_callback {
    dt_backward_callback_fn fn;
    void *user;
    void (*free_user)(void *user);
} dt__ag_callback;

typedef struct dt__ag_pass {
    dt__ag_callback *v;
    int n, cap;
    struct dt__ag_pass *outer; /* the pass this one runs inside, or NULL */
} dt__ag_pass;

/* Make @p pass (zeroed) the innermost pass of this thread. */
void dt__ag_pass_begin(dt__ag_pass *pass);
/* With @p run: its callbacks in queue order (those they queue too; the first
 * error stops them); then each one's free_user, the outer pass is innermost
 * again and the list freed. */
dt_status dt__ag_pass_end(dt__ag_pass *pass, bool run);

#endif
