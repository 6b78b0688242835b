/*
 * The hook between the ops layer and the placement layer's sharding rules.
 *
 * src/ops/ knows nothing about meshes or placements: when any input of a
 * public op is a distributed tensor (t->dist != NULL), the op hands all its
 * arguments to the entry of this table, which placement/rules/ implements
 * (ask the rule for placements, redistribute, run the local op on the shards,
 * wrap the result). An entry left NULL makes the op fail with
 * DT_ERR_UNSUPPORTED naming it.
 *
 * The placement layer offers the table (dt__ops_offer_dist_table) when it
 * makes its first distributed tensor (dt__dist_wrap), so the table is there
 * whenever an op meets a distributed input, and ops names no function of the
 * layer above it (no constructor either: a static-library constructor would
 * be dropped by the linker). dt__ops_set_dist_table() replaces it (NULL: none
 * until the placement layer offers it again).
 *
 * Gradients stay local: autograd runs on the local shards, and the rules keep
 * the convention of placement.h (the gradient of a shard is the shard of the
 * global gradient, Partial read as Replicate). What autograd needs for
 * distributed tensors (detach, gradients in flight) is its own table,
 * autograd/dist_hooks.h.
 */
#ifndef DT_OPS_DIST_DISPATCH_H
#define DT_OPS_DIST_DISPATCH_H

#include "kernels/kernel_ops.h"

typedef enum dt_dist_softmax_kind {
    DT_DIST_SOFTMAX,
    DT_DIST_LOG_SOFTMAX,
    DT_DIST_CAUSAL_SOFTMAX
} dt_dist_softmax_kind;

typedef struct dt_dist_op_table {
    dt_status (*binary)(dt_binary_op op, dt_tensor *a, dt_tensor *b, dt_tensor **out);
    /* scale, add_scalar, gelu_tanh, relu, round_bf16 */
    dt_status (*unary)(dt_unary_op op, dt_tensor *x, double alpha, dt_tensor **out);
    dt_status (*masked_fill)(dt_tensor *x, dt_tensor *mask, double value, dt_tensor **out);
    dt_status (*matmul)(dt_tensor *a, dt_tensor *b, bool trans_a, bool trans_b, dt_tensor **out);
    dt_status (*linear)(dt_tensor *x, dt_tensor *w, dt_tensor *bias, dt_tensor **out);
    /* dim is ignored for the causal kind, scale only used by it */
    dt_status (*softmax)(dt_dist_softmax_kind kind, dt_tensor *x, int dim, double scale,
                         dt_tensor **out);
    dt_status (*layer_norm)(dt_tensor *x, dt_tensor *w, dt_tensor *b, double eps, dt_tensor **out);
    dt_status (*embedding)(dt_tensor *weight, dt_tensor *ids, dt_tensor **out);
    dt_status (*cross_entropy)(dt_tensor *logits, dt_tensor *targets, int64_t ignore_index,
                               dt_tensor **out);
    /* sum / mean / max along dim */
    dt_status (*reduce)(dt_reduce_kind kind, dt_tensor *x, int dim, bool keepdim, dt_tensor **out);
    dt_status (*sum_all)(dt_tensor *x, dt_tensor **out);
    dt_status (*reshape)(dt_tensor *x, int ndim, const int64_t *shape, dt_tensor **out);
    dt_status (*permute)(dt_tensor *x, const int *perm, dt_tensor **out);
    dt_status (*narrow)(dt_tensor *x, int dim, int64_t start, int64_t length, dt_tensor **out);
    dt_status (*contiguous)(dt_tensor *x, dt_tensor **out);
    dt_status (*concat)(int n, dt_tensor *const *xs, int dim, dt_tensor **out);
    dt_status (*split)(dt_tensor *x, int dim, int n, const int64_t *sizes, dt_tensor **outs);
} dt_dist_op_table;

/* Replace the table (NULL: none until the next offer). */
void dt__ops_set_dist_table(const dt_dist_op_table *table);
/* Install @p table unless one is installed already (thread-safe; the first
 * wins, so a table set on purpose, as by a test, is kept). */
void dt__ops_offer_dist_table(const dt_dist_op_table *table);

/*
 * *table = NULL when no input of @p xs is distributed; else the installed
 * table, or DT_ERR_UNSUPPORTED naming @p op when none is (only after
 * dt__ops_set_dist_table(NULL): a distributed tensor offers the table).
 */
dt_status dt__ops_dist_table(const char *op, int n, dt_tensor *const *xs,
                             const dt_dist_op_table **table);

/*
 * In a public op, after the NULL checks: route distributed inputs to the
 * table entry @p entry with the call's arguments, or fail naming the op.
 */
#define DT__DIST_DISPATCH(name, n, ins, entry, ...)                                                \
    do {                                                                                           \
        const dt_dist_op_table *dt__tab = NULL;                                                    \
        DT_CHECK(dt__ops_dist_table((name), (n), (ins), &dt__tab));                                \
        if (dt__tab != NULL) {                                                                     \
            if (dt__tab->entry == NULL)                                                            \
                return DT_ERR(DT_ERR_UNSUPPORTED, "%s: no sharding rule for distributed inputs",   \
                              (name));                                                             \
            return dt__tab->entry(__VA_ARGS__);                                                    \
        }                                                                                          \
    } while (0)

#endif
