/*
 * A leaf's .grad += a local gradient (leaf_grad.c), for the engine.
 */
#ifndef DT_AUTOGRAD_LEAF_GRAD_H
#define DT_AUTOGRAD_LEAF_GRAD_H

#include "core/tensor_impl.h"

/*
 * leaf.grad += g; a first gradient gets its own storage tagged
 * DT_MEM_GRADIENT: g's own when nobody else can see it (@p held = the
 * references to g the caller holds; 0 for a tensor the user passed in), else
 * a copy. Later ones are added in place (others may hold views of .grad).
 */
dt_status dt__ag_accumulate_leaf(dt_tensor *leaf, dt_tensor *g, int held);

#endif
