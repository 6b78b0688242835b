/*
 * The sim device's kernel table: each entry snapshots its tensor arguments
 * (dt__sim_job_with) and queues the CPU table's entry to run on the stream.
 * Entries return as soon as the job is queued, so a failure inside a kernel
 * surfaces at a later submission or at dt_device_synchronize. The one entry
 * that returns a host value (sum_squares) waits for its job.
 */
#include "core/error.h"
#include "kernels/kernel_ops.h"
#include "kernels/sim/sim.h"

extern const dt_kernel_ops dt__kernels_cpu;
#define CPU  (&dt__kernels_cpu)
#define A(k) (j->a[k])

/* Queue entry @p name over the tensors listed after it, then set scalars in SCALARS. */
#define SIM_SUBMIT(name, run, SCALARS, ...)                                                        \
    do {                                                                                           \
        const dt_tensor *const args_[] = {__VA_ARGS__};                                            \
        dt_sim_job *j = NULL;                                                                      \
        DT_CHECK(dt__sim_job_with(name, run, args_, (int)(sizeof(args_) / sizeof(args_[0])), &j)); \
        SCALARS;                                                                                   \
        return dt__sim_submit(j);                                                                  \
    } while (0)

static dt_status run_fill(dt_sim_job *j)
{
    return CPU->fill(A(0), j->d);
}
dt_status dt__sim_fill(dt_tensor *out, double value)
{
    SIM_SUBMIT("fill", run_fill, j->d = value, out);
}

static dt_status run_gemm(dt_sim_job *j)
{
    return CPU->gemm(A(0), A(1), j->i[0], j->i[1], j->f[0], j->f[1], A(2));
}
static dt_status sim_gemm(const dt_tensor *a, const dt_tensor *b, bool ta, bool tb, float alpha,
                          float beta, dt_tensor *c)
{
    SIM_SUBMIT("gemm", run_gemm, (j->i[0] = ta, j->i[1] = tb, j->f[0] = alpha, j->f[1] = beta), a,
               b, c);
}

static dt_status run_gemm_bias(dt_sim_job *j)
{
    return CPU->gemm_bias(A(0), A(1), j->i[0], j->i[1], A(2), A(3));
}
static dt_status sim_gemm_bias(const dt_tensor *a, const dt_tensor *b, bool ta, bool tb,
                               const dt_tensor *bias, dt_tensor *c)
{
    SIM_SUBMIT("gemm_bias", run_gemm_bias, (j->i[0] = ta, j->i[1] = tb), a, b, bias, c);
}

static dt_status run_binary(dt_sim_job *j)
{
    return CPU->binary((dt_binary_op)j->i[0], A(0), A(1), A(2));
}
static dt_status sim_binary(dt_binary_op op, const dt_tensor *a, const dt_tensor *b, dt_tensor *out)
{
    SIM_SUBMIT("binary", run_binary, j->i[0] = (int)op, a, b, out);
}

static dt_status run_unary(dt_sim_job *j)
{
    return CPU->unary((dt_unary_op)j->i[0], A(0), j->f[0], A(1));
}
static dt_status sim_unary(dt_unary_op op, const dt_tensor *x, float alpha, dt_tensor *out)
{
    SIM_SUBMIT("unary", run_unary, (j->i[0] = (int)op, j->f[0] = alpha), x, out);
}

static dt_status run_unary_backward(dt_sim_job *j)
{
    return CPU->unary_backward((dt_unary_op)j->i[0], A(0), A(1), A(2));
}
static dt_status sim_unary_backward(dt_unary_op op, const dt_tensor *x, const dt_tensor *gy,
                                    dt_tensor *gx)
{
    SIM_SUBMIT("unary_backward", run_unary_backward, j->i[0] = (int)op, x, gy, gx);
}

static dt_status run_softmax(dt_sim_job *j)
{
    return CPU->softmax(A(0), j->f[0], j->i[0], j->i[1], A(1));
}
static dt_status sim_softmax(const dt_tensor *x, float scale, bool causal, bool log, dt_tensor *y)
{
    SIM_SUBMIT("softmax", run_softmax, (j->f[0] = scale, j->i[0] = causal, j->i[1] = log), x, y);
}

static dt_status run_softmax_backward(dt_sim_job *j)
{
    return CPU->softmax_backward(A(0), A(1), j->f[0], j->i[0], A(2));
}
static dt_status sim_softmax_backward(const dt_tensor *y, const dt_tensor *gy, float scale,
                                      bool log, dt_tensor *gx)
{
    SIM_SUBMIT("softmax_backward", run_softmax_backward, (j->f[0] = scale, j->i[0] = log), y, gy,
               gx);
}

static dt_status run_layer_norm(dt_sim_job *j)
{
    return CPU->layer_norm(A(0), A(1), A(2), j->f[0], A(3), A(4), A(5));
}
static dt_status sim_layer_norm(const dt_tensor *x, const dt_tensor *w, const dt_tensor *b,
                                float eps, dt_tensor *y, dt_tensor *mean, dt_tensor *rstd)
{
    SIM_SUBMIT("layer_norm", run_layer_norm, j->f[0] = eps, x, w, b, y, mean, rstd);
}

static dt_status run_layer_norm_backward(dt_sim_job *j)
{
    return CPU->layer_norm_backward(A(0), A(1), A(2), A(3), A(4), A(5), A(6), A(7));
}
static dt_status sim_layer_norm_backward(const dt_tensor *x, const dt_tensor *w,
                                         const dt_tensor *mean, const dt_tensor *rstd,
                                         const dt_tensor *gy, dt_tensor *gx, dt_tensor *gw,
                                         dt_tensor *gb)
{
    SIM_SUBMIT("layer_norm_backward", run_layer_norm_backward, (void)0, x, w, mean, rstd, gy, gx,
               gw, gb);
}

static dt_status run_embedding(dt_sim_job *j)
{
    return CPU->embedding(A(0), A(1), j->l[0], A(2));
}
static dt_status sim_embedding(const dt_tensor *weight, const dt_tensor *ids, int64_t vocab_start,
                               dt_tensor *out)
{
    SIM_SUBMIT("embedding", run_embedding, j->l[0] = vocab_start, weight, ids, out);
}

static dt_status run_embedding_backward(dt_sim_job *j)
{
    return CPU->embedding_backward(A(0), A(1), j->l[0], A(2));
}
static dt_status sim_embedding_backward(const dt_tensor *ids, const dt_tensor *gy,
                                        int64_t vocab_start, dt_tensor *gweight)
{
    SIM_SUBMIT("embedding_backward", run_embedding_backward, j->l[0] = vocab_start, ids, gy,
               gweight);
}

static dt_status run_cross_entropy(dt_sim_job *j)
{
    return CPU->cross_entropy(A(0), A(1), j->l[0], A(2), A(3));
}
static dt_status sim_cross_entropy(const dt_tensor *logits, const dt_tensor *targets,
                                   int64_t ignore_index, dt_tensor *loss, dt_tensor *lse)
{
    SIM_SUBMIT("cross_entropy", run_cross_entropy, j->l[0] = ignore_index, logits, targets, loss,
               lse);
}

static dt_status run_cross_entropy_backward(dt_sim_job *j)
{
    return CPU->cross_entropy_backward(A(0), A(1), j->l[0], A(2), A(3), A(4));
}
static dt_status sim_cross_entropy_backward(const dt_tensor *logits, const dt_tensor *targets,
                                            int64_t ignore_index, const dt_tensor *lse,
                                            const dt_tensor *gloss, dt_tensor *glogits)
{
    SIM_SUBMIT("cross_entropy_backward", run_cross_entropy_backward, j->l[0] = ignore_index, logits,
               targets, lse, gloss, glogits);
}

static dt_status run_reduce(dt_sim_job *j)
{
    return CPU->reduce((dt_reduce_kind)j->i[0], A(0), j->i[1], A(1), A(2));
}
static dt_status sim_reduce(dt_reduce_kind kind, const dt_tensor *x, int dim, dt_tensor *out,
                            dt_tensor *argmax)
{
    int d = 0; /* argument errors now, not later on the stream */
    DT_CHECK(dt__kernel_reduce_args("sim reduce", kind, x, dim, &d));
    SIM_SUBMIT("reduce", run_reduce, (j->i[0] = (int)kind, j->i[1] = dim), x, out, argmax);
}

static dt_status run_masked_fill(dt_sim_job *j)
{
    return CPU->masked_fill(A(0), A(1), j->f[0], A(2));
}
static dt_status sim_masked_fill(const dt_tensor *x, const dt_tensor *mask, float value,
                                 dt_tensor *out)
{
    SIM_SUBMIT("masked_fill", run_masked_fill, j->f[0] = value, x, mask, out);
}

static dt_status run_sgd_step(dt_sim_job *j)
{
    return CPU->sgd_step(A(0), A(1), A(2), j->f[0], j->f[1], j->f[2]);
}
static dt_status sim_sgd_step(dt_tensor *p, const dt_tensor *g, dt_tensor *momentum_buf, float lr,
                              float momentum, float weight_decay)
{
    SIM_SUBMIT("sgd_step", run_sgd_step, (j->f[0] = lr, j->f[1] = momentum, j->f[2] = weight_decay),
               p, g, momentum_buf);
}

static dt_status run_adamw_step(dt_sim_job *j)
{
    return CPU->adamw_step(A(0), A(1), A(2), A(3), j->f[0], j->f[1], j->f[2], j->f[3], j->f[4],
                           j->l[0]);
}
static dt_status sim_adamw_step(dt_tensor *p, const dt_tensor *g, dt_tensor *m, dt_tensor *v,
                                float lr, float beta1, float beta2, float eps, float weight_decay,
                                int64_t step)
{
    SIM_SUBMIT("adamw_step", run_adamw_step,
               (j->f[0] = lr, j->f[1] = beta1, j->f[2] = beta2, j->f[3] = eps,
                j->f[4] = weight_decay, j->l[0] = step),
               p, g, m, v);
}

static dt_status run_sum_squares(dt_sim_job *j)
{
    return CPU->sum_squares(A(0), (double *)j->p[0]);
}
/* The result is a host value: queue, then wait for it. */
static dt_status sim_sum_squares(const dt_tensor *x, double *out)
{
    const dt_tensor *const args[] = {x};
    dt_sim_job *j = NULL;
    DT_CHECK(dt__sim_job_with("sum_squares", run_sum_squares, args, 1, &j));
    j->p[0] = out;
    DT_CHECK(dt__sim_submit(j));
    return dt__sim_synchronize();
}

static bool sim_supports(dt_kernel_op op, dt_dtype dtype)
{
    return CPU->supports(op, dtype);
}

static dt_status sim_synchronize(int index)
{
    (void)index;
    return dt__sim_synchronize();
}

const dt_kernel_ops dt__kernels_sim = {
    .name = "sim",
    .supports = sim_supports,
    .fill = dt__sim_fill,
    .copy = dt__sim_copy,
    .copy_async = dt__sim_copy_async,
    .synchronize = sim_synchronize,
    .owns = dt__sim_owns,
    .copy_bytes = dt__sim_copy_bytes,
    .gemm = sim_gemm,
    .gemm_bias = sim_gemm_bias,
    .binary = sim_binary,
    .unary = sim_unary,
    .unary_backward = sim_unary_backward,
    .softmax = sim_softmax,
    .softmax_backward = sim_softmax_backward,
    .layer_norm = sim_layer_norm,
    .layer_norm_backward = sim_layer_norm_backward,
    .embedding = sim_embedding,
    .embedding_backward = sim_embedding_backward,
    .cross_entropy = sim_cross_entropy,
    .cross_entropy_backward = sim_cross_entropy_backward,
    .reduce = sim_reduce,
    .masked_fill = sim_masked_fill,
    .sgd_step = sim_sgd_step,
    .adamw_step = sim_adamw_step,
    .sum_squares = sim_sum_squares,
};
