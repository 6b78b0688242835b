/* The distributed-tensor hooks of autograd, installed by placement/rules/. */
#include <stdatomic.h>

#include "autograd/dist_hooks.h"

static _Atomic(const dt_ag_dist_hooks *) g_hooks;

void dt__ag_offer_dist_hooks(const dt_ag_dist_hooks *hooks)
{
    const dt_ag_dist_hooks *none = NULL;
    /* a plain load first: every distributed tensor made offers, and after the
     * first time there is nothing to write */
    if (atomic_load(&g_hooks) == NULL)
        atomic_compare_exchange_strong(&g_hooks, &none, hooks);
}

const dt_ag_dist_hooks *dt__ag_dist_hooks(void)
{
    return atomic_load(&g_hooks);
}
