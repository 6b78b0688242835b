/*
 * dtensor.h - distributed tensors and tensor parallelism for C.
 *
 * A short tour (error checks omitted; every call returns dt_status):
 *
 *     dt_runtime *rt;  dt_init(NULL, &rt);                 // reads RANK/WORLD_SIZE (dtrun)
 *     dt_tensor *x;    int64_t shape[2] = {7, 5};
 *     dt_tensor_zeros(2, shape, DT_DTYPE_F32, dt_device_cpu(), &x);
 *     dt_tensor_fill_normal(x, 0.0, 1.0, 42, NULL, NULL);  // same values on every rank
 *     dt_comm_allreduce(dt_runtime_world(rt), dt_tensor_data(x), dt_tensor_data(x),
 *                       35, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL);
 *     dt_tensor_release(x);
 *     dt_runtime_destroy(rt);
 *
 * Areas, one header each: core (status, logging, dtypes), memory (accounting),
 * tensor (local tensors and views), autograd, ops (differentiable ops), store
 * and comm (bootstrap and collectives), runtime (start-up), mesh and placement
 * (distributed tensors), nn (modules, optimizers, data-parallel batches),
 * checkpoint, styles (tensor-parallel plans), data_parallel (DDP, ZeRO), and
 * scope (for programs: DT_TRY error checks and scopes that release tensors).
 * A program includes only this header and links -ldtensor (README.md, "Using
 * it from your build"); examples/ are written that way.
 */
#ifndef DTENSOR_H
#define DTENSOR_H

#include "dtensor/core.h"
#include "dtensor/memory.h"
#include "dtensor/tensor.h"
#include "dtensor/autograd.h"
#include "dtensor/ops.h"
#include "dtensor/store.h"
#include "dtensor/comm.h"
#include "dtensor/runtime.h"
#include "dtensor/mesh.h"
#include "dtensor/placement.h"
#include "dtensor/nn.h"
#include "dtensor/checkpoint.h"
#include "dtensor/styles.h"
#include "dtensor/data_parallel.h"
#include "dtensor/scope.h"

#endif /* DTENSOR_H */
