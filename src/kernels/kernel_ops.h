/*
 * The per-device compute table. One `dt_kernel_ops` per device type, filled
 * with designated initializers in src/kernels/<device>/; the CPU table is the
 * reference. Kernels take tensors whose outputs are already allocated with the
 * right shape (the ops layer allocates and checks shapes and dtypes); they
 * compute in float32. Entries marked (optional) may be NULL: callers check
 * `supports` first. Kernels never record autograd history.
 *
 * Layout rules: inputs may be strided (broadcast views with stride 0
 * included) unless an entry says "contiguous"; outputs are contiguous.
 */
#ifndef DT_KERNELS_KERNEL_OPS_H
#define DT_KERNELS_KERNEL_OPS_H

#include "core/tensor_impl.h"

typedef enum dt_kernel_op {
    DT_KOP_FILL,
    DT_KOP_COPY,
    DT_KOP_GEMM,
    DT_KOP_BINARY,
    DT_KOP_UNARY,
    DT_KOP_UNARY_BACKWARD,
    DT_KOP_SOFTMAX,
    DT_KOP_LAYER_NORM,
    DT_KOP_EMBEDDING,
    DT_KOP_CROSS_ENTROPY,
    DT_KOP_REDUCE,
    DT_KOP_MASKED_FILL,
    DT_KOP_OPTIM,
    DT_KOP_COUNT
} dt_kernel_op;

typedef enum dt_binary_op {
    DT_BINARY_ADD,
    DT_BINARY_SUB,
    DT_BINARY_MUL,
    DT_BINARY_DIV
} dt_binary_op;

typedef enum dt_unary_op {
    DT_UNARY_SCALE,      /* y = alpha * x */
    DT_UNARY_ADD_SCALAR, /* y = x + alpha */
    DT_UNARY_GELU_TANH,
    DT_UNARY_RELU,
    DT_UNARY_EXP,
    DT_UNARY_LOG,
    DT_UNARY_NEG,
    DT_UNARY_SQRT,
    DT_UNARY_SQUARE,
    DT_UNARY_ROUND_BF16 /* y = x rounded to the nearest bf16 value (ties to even), kept f32 */
} dt_unary_op;

typedef enum dt_reduce_kind {
    DT_REDUCE_KIND_SUM,
    DT_REDUCE_KIND_MEAN,
    DT_REDUCE_KIND_MAX
} dt_reduce_kind;

typedef struct dt_kernel_ops {
    const char *name;
    bool (*supports)(dt_kernel_op op, dt_dtype dtype);

    /* out[...] = value */
    dt_status (*fill)(dt_tensor *out, double value);
    /* dst = src elementwise, same shape, dtype conversion allowed, src strided; on
     * a device table also between host and device: returns once a host side is
     * done with (host data read, or arrived) */
    dt_status (*copy)(dt_tensor *dst, const dt_tensor *src);
    /* (optional) the same, returning once queued: the host side is in use until
     * synchronize (NULL: copy is used) */
    dt_status (*copy_async)(dt_tensor *dst, const dt_tensor *src);
    /* (optional) wait for device @p index's queued work and report an error it
     * raised (NULL: the device computes synchronously) */
    dt_status (*synchronize)(int index);
    /* (optional) whether @p p points into this device's memory (and which index) */
    bool (*owns)(const void *p, int *index);
    /* (optional) copy @p n bytes where either side may be this device's memory;
     * returns once the host side is done with (as copy) */
    dt_status (*copy_bytes)(void *dst, const void *src, size_t n);

    /*
     * c = alpha * op(a) @ op(b) + beta * c over the last two dims; a [B.., M, K]
     * (or [B.., K, M] when trans_a), b [B.., K, N] (or [B.., N, K]), c [B.., M, N].
     * a and b have unit stride in their last dim and a row stride >= row length;
     * batch dims of a and b are equal to c's or absent/broadcast (stride 0).
     */
    dt_status (*gemm)(const dt_tensor *a, const dt_tensor *b, bool trans_a, bool trans_b,
                      float alpha, float beta, dt_tensor *c);
    /*
     * (optional) c = op(a) @ op(b) + bias, as gemm with alpha 1 and beta 0,
     * bias [N] (f32, unit stride) added to every row of every batch in the
     * GEMM's epilogue: c's old values are never read. c is f32. (NULL: the ops
     * layer copies the bias into c and runs gemm with beta 1.)
     */
    dt_status (*gemm_bias)(const dt_tensor *a, const dt_tensor *b, bool trans_a, bool trans_b,
                           const dt_tensor *bias, dt_tensor *c);

    /* out = a op b, a and b broadcastable to out (strided views allowed) */
    dt_status (*binary)(dt_binary_op op, const dt_tensor *a, const dt_tensor *b, dt_tensor *out);
    /* out = f(x; alpha) */
    dt_status (*unary)(dt_unary_op op, const dt_tensor *x, float alpha, dt_tensor *out);
    /* gx = gy * f'(x) for GELU_TANH, RELU (others: the ops layer composes) */
    dt_status (*unary_backward)(dt_unary_op op, const dt_tensor *x, const dt_tensor *gy,
                                dt_tensor *gx);

    /*
     * Softmax (or log-softmax) over the last dim of contiguous x after scaling
     * by `scale`; with `causal`, x is [..., Tq, Tk] and key j > query i +
     * (Tk - Tq) is masked to -inf (a row with every key masked, Tq > Tk, gives
     * NaN as PyTorch's softmax of an all -inf row does).
     */
    dt_status (*softmax)(const dt_tensor *x, float scale, bool causal, bool log, dt_tensor *y);
    /* gx = d/dx given y (the forward output) and gy; includes `scale` */
    dt_status (*softmax_backward)(const dt_tensor *y, const dt_tensor *gy, float scale, bool log,
                                  dt_tensor *gx);

    /* LayerNorm over the last dim; w, b may be NULL; mean/rstd [rows] f32 saved for backward */
    dt_status (*layer_norm)(const dt_tensor *x, const dt_tensor *w, const dt_tensor *b, float eps,
                            dt_tensor *y, dt_tensor *mean, dt_tensor *rstd);
    /* gx = ..., gw/gb accumulated (+=) when non-NULL */
    dt_status (*layer_norm_backward)(const dt_tensor *x, const dt_tensor *w, const dt_tensor *mean,
                                     const dt_tensor *rstd, const dt_tensor *gy, dt_tensor *gx,
                                     dt_tensor *gw, dt_tensor *gb);

    /*
     * out[i, :] = weight[ids[i] - vocab_start, :] when the id lies in
     * [vocab_start, vocab_start + rows), else zeros (a vocabulary shard).
     */
    dt_status (*embedding)(const dt_tensor *weight, const dt_tensor *ids, int64_t vocab_start,
                           dt_tensor *out);
    /* gweight[ids[i] - vocab_start, :] += gy[i, :] for in-range ids */
    dt_status (*embedding_backward)(const dt_tensor *ids, const dt_tensor *gy, int64_t vocab_start,
                                    dt_tensor *gweight);

    /*
     * Per-row cross entropy of contiguous logits [N, C]: loss[i] (or 0 when
     * targets[i] == ignore_index); writes the row log-sum-exp to lse [N].
     */
    dt_status (*cross_entropy)(const dt_tensor *logits, const dt_tensor *targets,
                               int64_t ignore_index, dt_tensor *loss, dt_tensor *lse);
    /* glogits[i, :] = gloss[i] * (softmax(logits[i]) - onehot(target)) (0 when ignored) */
    dt_status (*cross_entropy_backward)(const dt_tensor *logits, const dt_tensor *targets,
                                        int64_t ignore_index, const dt_tensor *lse,
                                        const dt_tensor *gloss, dt_tensor *glogits);

    /* reduce x along `dim` into out (keepdim shape or not; same numel); argmax i64 optional */
    dt_status (*reduce)(dt_reduce_kind kind, const dt_tensor *x, int dim, dt_tensor *out,
                        dt_tensor *argmax);
    /* out = mask ? value : x (mask u8 broadcastable) */
    dt_status (*masked_fill)(const dt_tensor *x, const dt_tensor *mask, float value,
                             dt_tensor *out);

    /* (optional) fused optimizer steps on contiguous f32 tensors of equal numel */
    dt_status (*sgd_step)(dt_tensor *p, const dt_tensor *g, dt_tensor *momentum_buf, float lr,
                          float momentum, float weight_decay);
    dt_status (*adamw_step)(dt_tensor *p, const dt_tensor *g, dt_tensor *m, dt_tensor *v, float lr,
                            float beta1, float beta2, float eps, float weight_decay, int64_t step);
    /* sum of squares of all elements, in double */
    dt_status (*sum_squares)(const dt_tensor *x, double *out);
} dt_kernel_ops;

/*
 * The device-independent arguments of a reduce entry: DT_ERR_INVALID_ARG
 * naming fn and the value for an unknown kind or a dim out of range; else the
 * dim wrapped (negative counts from the end; a 0-d x reduces as shape [1])
 * into *dim_out. x must already be checked non-NULL.
 */
dt_status dt__kernel_reduce_args(const char *fn, dt_reduce_kind kind, const dt_tensor *x, int dim,
                                 int *dim_out);

/*
 * The geometry of an embedding entry: @p table (named tname) is [rows, dim] and
 * @p rows_t (named rname) holds numel(ids) x dim elements; DT_ERR_INVALID_ARG
 * naming the bad value. The tensors must already be checked non-NULL.
 */
dt_status dt__kernel_embedding_dims(const char *fn, const char *tname, const dt_tensor *table,
                                    const dt_tensor *ids, const char *rname,
                                    const dt_tensor *rows_t, int64_t *rows, int64_t *dim,
                                    int64_t *n);

/* The table for @p device (NULL when that device type is not built in). */
const dt_kernel_ops *dt__kernels_for(dt_device device);

/*
 * Whether @p p is device memory (a non-CPU table's `owns`), and of which
 * device. Cheap when no device memory was ever allocated in this process.
 */
bool dt__kernels_device_of(const void *p, dt_device *out);

/*
 * Compute threads of this process: dt__kernels_set_num_threads's value, else
 * DT_NUM_THREADS, else usable cores / ranks on this node (LOCAL_WORLD_SIZE,
 * OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS or SLURM_NTASKS_PER_NODE), >= 1.
 */
int dt__kernels_num_threads(void);

/* Override the thread count (n <= 0: back to the environment's) and apply it
 * to the BLAS and oneDNN now (dt_init calls this with dt_init_params.num_threads). */
void dt__kernels_set_num_threads(int n);

#endif
