/* Losses of the nn layer. */
#include "core/error.h"
#include "dtensor/nn.h"
#include "dtensor/ops.h"

/* No target is ignored: ids are never negative. */
#define NN_NO_IGNORE_INDEX (-100)

dt_status dt_nn_cross_entropy(dt_tensor *logits, dt_tensor *targets, dt_tensor **loss)
{
    DT_ARG_NOT_NULL(logits);
    DT_ARG_NOT_NULL(targets);
    DT_ARG_NOT_NULL(loss);
    return dt_cross_entropy(logits, targets, NN_NO_IGNORE_INDEX, loss);
}
