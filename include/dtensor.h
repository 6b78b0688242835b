/*
 * dtensor.h - distributed tensors and tensor parallelism for C.
 *
 * A short tour: a two-layer MLP, tensor parallel inside pairs of ranks and
 * ZeRO-3 across them (examples/mlp_short runs it; `dtrun -n 4 ./prog`):
 *
 *     dt_runtime *rt;  DT_TRY(dt_init(NULL, &rt));          // RANK/WORLD_SIZE (dtrun)
 *     dt_module *model, *fc1, *fc2;                          // fc2(relu(fc1(x)))
 *     DT_TRY(dt_module_create(&mlp_ops, NULL, &model));      // your forward (dt_module_ops)
 *     DT_TRY(dt_linear_create(16, 64, true, &fc1));
 *     DT_TRY(dt_module_add_child(model, "fc1", fc1));
 *     DT_TRY(dt_linear_create(64, 4, true, &fc2));
 *     DT_TRY(dt_module_add_child(model, "fc2", fc2));
 *
 *     int shape[2] = {2, 2};  const char *names[2] = {"dp", "tp"};
 *     dt_mesh *mesh;  dt_plan *plan;
 *     DT_TRY(dt_mesh_create(rt, 2, shape, names, &mesh));   // 2-D device mesh
 *     DT_TRY(dt_plan_parse("fc1 = colwise; fc2 = rowwise", &plan));
 *     DT_TRY(dt_parallelize_module(model, mesh, plan, "tp")); // tensor parallel first,
 *     DT_TRY(dt_fully_shard(model, mesh, "dp", NULL));        // then ZeRO-3 over dp
 *
 *     dt_optim *opt;  dt_adamw_params ap = {.field_mask = DT_ADAMW_PARAM_FIELD_LR, .lr = 1e-2};
 *     DT_TRY(dt_optim_adamw_create(model, &ap, &opt));
 *     DT_TRY(dt_dp_batch(X, mesh, "dp", &x));                // this dp rank's rows of X, Y
 *     DT_TRY(dt_dp_batch(Y, mesh, "dp", &y));
 *     for (int step = 0; step < 100; step++) {               // one training step
 *         DT_TRY(dt_scope_begin());                          // releases what dt_scope_add gets
 *         DT_TRY(dt_module_call(model, x, &logits));
 *         DT_TRY(dt_nn_cross_entropy(dt_scope_add(logits), y, &loss));
 *         DT_TRY(dt_dp_mean_loss(dt_scope_add(loss), mesh, "dp", 32, &v)); // global batch's
 *         DT_TRY(dt_backward(loss, NULL));
 *         DT_TRY(dt_optim_step(opt));
 *         dt_optim_zero_grad(opt);
 *         dt_scope_end();
 *     }
 *
 * Distributed tensors by hand: dt_distribute (a full tensor to placements
 * such as Shard(0), Replicate(), Partial(sum) on a mesh), dt_redistribute,
 * dt_full_tensor, dt_to_local / dt_from_local (placement.h).
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
