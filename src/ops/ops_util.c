/* The distributed-op table (dist_dispatch.h) and the checks only the ops layer needs. */
#include <stdlib.h>
#include <string.h>

#include <stdatomic.h>

#include "ops/dist_dispatch.h"
#include "ops/ops_internal.h"

static _Atomic(const dt_dist_op_table *) g_dist_table;

void dt__ops_set_dist_table(const dt_dist_op_table *table)
{
    atomic_store(&g_dist_table, table);
}

void dt__ops_offer_dist_table(const dt_dist_op_table *table)
{
    const dt_dist_op_table *none = NULL;
    /* a plain load first: every distributed tensor made offers, and after the
     * first time there is nothing to write */
    if (atomic_load(&g_dist_table) == NULL)
        atomic_compare_exchange_strong(&g_dist_table, &none, table);
}

dt_status dt__ops_dist_table(const char *op, int n, dt_tensor *const *xs,
                             const dt_dist_op_table **table)
{
    bool any = false;
    for (int i = 0; i < n && !any; i++)
        any = xs[i] != NULL && xs[i]->dist != NULL;
    if (!any) {
        *table = NULL;
        return DT_OK;
    }
    const dt_dist_op_table *t = atomic_load(&g_dist_table);
    if (t == NULL) /* the placement layer offers it with its first distributed tensor */
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: a distributed input and no sharding rules installed",
                      op);
    *table = t;
    return DT_OK;
}

dt_status dt__ops_check_ids(const char *op, const char *what, const dt_tensor *t)
{
    DT_CHECK(dt__kt_check_not_null(op, what, t));
    if (t->dtype != DT_DTYPE_I32 && t->dtype != DT_DTYPE_I64 && t->dtype != DT_DTYPE_U16)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: '%s' has dtype %s, expected i32, i64 or u16", op,
                      what, dt_dtype_name(t->dtype));
    return DT_OK;
}

dt_status dt__ops_check_same_device(const char *op, const dt_tensor *a, const dt_tensor *b)
{
    if (a->device.type != b->device.type || a->device.index != b->device.index)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: inputs on different devices (%d:%d vs %d:%d)", op,
                      (int)a->device.type, a->device.index, (int)b->device.type, b->device.index);
    return DT_OK;
}

dt_status dt__ops_wrap_dim(const char *op, int dim, int ndim, int *out)
{
    int d = dim < 0 ? dim + ndim : dim;
    if (d < 0 || d >= ndim)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: dim %d out of range for a %d-d tensor", op, dim,
                      ndim);
    *out = d;
    return DT_OK;
}
