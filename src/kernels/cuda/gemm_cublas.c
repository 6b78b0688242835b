/*
 * GEMM through cuBLAS. cuBLAS is column-major; a row-major matrix is the
 * column-major view of its transpose, so row-major C = op(A) op(B) is computed
 * as column-major C^T = op(B)^T op(A)^T: swap the operands, keep each one's
 * transpose flag, and pass N as rows and M as columns. Batch dims go to
 * cublasSgemmStridedBatched when each operand's batch offsets are one
 * stride (contiguous batches or broadcast), else to cublasSgemmBatched with
 * a pointer array. Plain FP32 math (no TF32), to stay close to the CPU.
 * bf16 and f16 operands (both the same dtype) go to the ...Ex calls with
 * f32 accumulation (CUBLAS_COMPUTE_32F: tensor cores on Ampere and later),
 * into an f32 or bf16/f16 c, as the CPU table's oneDNN path does.
 *
 * One cuBLAS handle per device, created on first use and kept for the life
 * of the process; calls are serialised by a lock (handles are not thread safe).
 */
#include <pthread.h>
#include <stdlib.h>

#include <cublas_v2.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/kernels_cuda.h"

#define DT_CUDA_MAX_DEVICES 16

static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;
static cublasHandle_t blas_handles[DT_CUDA_MAX_DEVICES];

static dt_status blas_error(cublasStatus_t st, const char *fn, const char *what)
{
    dt_status s = st == CUBLAS_STATUS_ALLOC_FAILED ? DT_ERR_NO_MEMORY : DT_ERR_BACKEND;
    return DT_ERR(s, "%s: %s failed: %s", fn, what, cublasGetStatusString(st));
}

/* Caller holds blas_lock. */
static dt_status blas_handle(const char *fn, int device, cublasHandle_t *out)
{
    if (device < 0 || device >= DT_CUDA_MAX_DEVICES)
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: cuda device %d (at most %d supported)", fn, device,
                      DT_CUDA_MAX_DEVICES);
    if (blas_handles[device] == NULL) {
        cublasHandle_t h = NULL;
        cublasStatus_t st = cublasCreate(&h);
        if (st != CUBLAS_STATUS_SUCCESS)
            return blas_error(st, fn, "cublasCreate");
        st = cublasSetStream(h, DT_CUDA_STREAM);
        if (st == CUBLAS_STATUS_SUCCESS)
            st = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
        if (st != CUBLAS_STATUS_SUCCESS) {
            cublasDestroy(h);
            return blas_error(st, fn, "cublasSetStream/cublasSetMathMode");
        }
        blas_handles[device] = h;
    }
    *out = blas_handles[device];
    return DT_OK;
}

/* One operand's matrices: element offsets per batch, as a single stride when possible. */
typedef struct gemm_operand {
    const dt_tensor *t;
    int64_t bstride[DT_MAX_DIMS]; /* over c's batch dims; 0 = broadcast */
    bool uniform;
    int64_t stride; /* when uniform */
} gemm_operand;

static dt_status operand_batch(const char *fn, const char *what, const dt_tensor *t,
                               const dt_tensor *c, gemm_operand *op)
{
    int nb = c->ndim - 2, tb = t->ndim - 2;
    op->t = t;
    if (tb > nb)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s has %d batch dims, c has %d", fn, what, tb, nb);
    for (int d = 0; d < nb; d++) {
        int td = d - (nb - tb);
        int64_t cs = c->shape[d];
        if (td < 0 || t->shape[td] == 1 || cs == 1) {
            if (td >= 0 && t->shape[td] != 1 && t->shape[td] != cs)
                goto bad;
            op->bstride[d] = 0;
        } else if (t->shape[td] == cs) {
            op->bstride[d] = t->strides[td];
        } else {
            goto bad;
        }
    }
    /* uniform when offsets are b * stride over the flattened batch index */
    op->uniform = true;
    op->stride = 0;
    int64_t inner = 1; /* batch elements of the dims after d */
    bool have = false;
    for (int d = nb - 1; d >= 0; d--) {
        int64_t cs = c->shape[d];
        if (cs != 1) {
            if (!have) {
                op->stride = op->bstride[d] / (inner > 0 ? inner : 1);
                if (op->stride * inner != op->bstride[d])
                    op->uniform = false;
                have = true;
            } else if (op->bstride[d] != op->stride * inner) {
                op->uniform = false;
            }
        }
        inner *= cs;
    }
    return DT_OK;
bad:
    return DT_ERR(DT_ERR_INVALID_ARG, "%s: %s batch dims do not broadcast to c's", fn, what);
}

static int64_t operand_offset(const gemm_operand *op, const dt_tensor *c, int64_t b)
{
    int64_t off = 0;
    for (int d = c->ndim - 3; d >= 0; d--) {
        off += (b % c->shape[d]) * op->bstride[d];
        b /= c->shape[d];
    }
    return off;
}

/* Leading dimension of a row-major [rows, cols] operand: its row stride, at least cols. */
static int64_t row_ld(const dt_tensor *t, int64_t cols)
{
    int64_t ld = t->strides[t->ndim - 2];
    int64_t min = cols > 1 ? cols : 1;
    return (t->shape[t->ndim - 2] <= 1 || ld < min) ? min : ld;
}

/* The cuBLAS data type of a GEMM operand. */
static cudaDataType_t blas_type(dt_dtype dt)
{
    return dt == DT_DTYPE_BF16 ? CUDA_R_16BF : dt == DT_DTYPE_F16 ? CUDA_R_16F : CUDA_R_32F;
}

static dt_status gemm_pointer_array(const char *fn, cublasHandle_t h, cublasOperation_t opb,
                                    cublasOperation_t opa, int n, int m, int k, float alpha,
                                    float beta, const gemm_operand *ga, int lda,
                                    const gemm_operand *gb, int ldb, dt_tensor *c, int batch)
{
    size_t bytes = sizeof(void *) * 3 * (size_t)batch;
    const char **host = malloc(bytes); /* byte pointers: offsets scaled by the element size */
    if (host == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory for %d batch pointers", fn, batch);
    const char *pa = dt__cuda_ptr(ga->t), *pb = dt__cuda_ptr(gb->t);
    char *pc = dt__cuda_ptr(c);
    int64_t es_ab = (int64_t)dt_dtype_size(ga->t->dtype), es_c = (int64_t)dt_dtype_size(c->dtype);
    for (int i = 0; i < batch; i++) {
        host[i] = pb + operand_offset(gb, c, i) * es_ab;
        host[batch + i] = pa + operand_offset(ga, c, i) * es_ab;
        host[2 * batch + i] = pc + (int64_t)i * m * n * es_c;
    }
    void *dev = NULL;
    dt_status s = DT_OK;
    DT_CHECK_GOTO(dt__cuda_scratch(fn, bytes, &dev), s, out_free_host);
    DT_CUDA_CHECK_GOTO(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice), fn, s, out_free_dev);
    const void *const *dp = dev;
    void *const *dc = (void *const *)((const void **)dev + 2 * batch);
    cublasStatus_t st;
    if (ga->t->dtype == DT_DTYPE_F32 && c->dtype == DT_DTYPE_F32)
        st = cublasSgemmBatched(h, opb, opa, n, m, k, &alpha, (const float *const *)dp, ldb,
                                (const float *const *)(dp + batch), lda, &beta, (float *const *)dc,
                                n, batch);
    else
        st = cublasGemmBatchedEx(h, opb, opa, n, m, k, &alpha, dp, blas_type(gb->t->dtype), ldb,
                                 dp + batch, blas_type(ga->t->dtype), lda, &beta, dc,
                                 blas_type(c->dtype), n, batch, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS)
        s = blas_error(st, fn, "cublas(Sgemm|GemmEx)Batched");
out_free_dev:
    dt__cuda_scratch_free(dev);
out_free_host:
    free(host);
    return s;
}

dt_status dt__cuda_gemm(const dt_tensor *a, const dt_tensor *b, bool trans_a, bool trans_b,
                        float alpha, float beta, dt_tensor *c)
{
    const char *fn = "dt_kernel_gemm";
    /* f32 x f32 -> f32, or bf16/f16 operands (the same dtype) -> f32 or that dtype */
    dt_dtype in = a->dtype;
    if (in != DT_DTYPE_BF16 && in != DT_DTYPE_F16)
        in = DT_DTYPE_F32;
    DT_CHECK(dt__cuda_check(fn, "a", a, in));
    DT_CHECK(dt__cuda_check(fn, "b", b, in));
    DT_CHECK(dt__cuda_check_out(fn, "c", c, c->dtype == in ? in : DT_DTYPE_F32));
    if (a->ndim < 2 || b->ndim < 2 || c->ndim < 2)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: a, b, c need 2+ dims (have %d, %d, %d)", fn, a->ndim,
                      b->ndim, c->ndim);
    int64_t M = c->shape[c->ndim - 2], N = c->shape[c->ndim - 1];
    int64_t ar = a->shape[a->ndim - 2], ac = a->shape[a->ndim - 1];
    int64_t br = b->shape[b->ndim - 2], bc = b->shape[b->ndim - 1];
    int64_t K = trans_a ? ar : ac;
    if ((trans_a ? ac : ar) != M || (trans_b ? bc : br) != K || (trans_b ? br : bc) != N)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "%s: shapes a [%lld, %lld]%s, b [%lld, %lld]%s do not give c [%lld, %lld]",
                      fn, (long long)ar, (long long)ac, trans_a ? "^T" : "", (long long)br,
                      (long long)bc, trans_b ? "^T" : "", (long long)M, (long long)N);
    if ((ac > 1 && a->strides[a->ndim - 1] != 1) || (bc > 1 && b->strides[b->ndim - 1] != 1))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: a and b need unit stride in their last dim", fn);
    gemm_operand ga, gb;
    DT_CHECK(operand_batch(fn, "a", a, c, &ga));
    DT_CHECK(operand_batch(fn, "b", b, c, &gb));
    int64_t batch = dt__shape_numel(c->ndim - 2, c->shape);
    if (M == 0 || N == 0 || batch == 0)
        return DT_OK;
    DT_CHECK(dt__cuda_use_device(fn, c));
    if (K == 0) /* empty sum: c = beta * c (beta 0 also clears NaN) */
        return beta == 0.0f ? dt__cuda_fill(c, 0.0) : dt__cuda_unary(DT_UNARY_SCALE, c, beta, c);
    int64_t lda = row_ld(a, ac), ldb = row_ld(b, bc);
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || batch > INT32_MAX || lda > INT32_MAX ||
        ldb > INT32_MAX)
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "%s: sizes beyond cuBLAS's 32-bit int (M %lld N %lld K %lld)", fn,
                      (long long)M, (long long)N, (long long)K);
    /* column-major: C^T [N, M] = op(B)^T [N, K] * op(A)^T [K, M] */
    cublasOperation_t opb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    dt_status s = DT_OK;
    pthread_mutex_lock(&blas_lock);
    cublasHandle_t h = NULL;
    DT_CHECK_GOTO(blas_handle(fn, c->device.index, &h), s, out_unlock);
    if (ga.uniform && gb.uniform && in == DT_DTYPE_F32) {
        cublasStatus_t st =
            cublasSgemmStridedBatched(h, opb, opa, (int)N, (int)M, (int)K, &alpha, dt__cuda_ptr(b),
                                      (int)ldb, gb.stride, dt__cuda_ptr(a), (int)lda, ga.stride,
                                      &beta, dt__cuda_ptr(c), (int)N, M * N, (int)batch);
        if (st != CUBLAS_STATUS_SUCCESS)
            s = blas_error(st, fn, "cublasSgemmStridedBatched");
    } else if (ga.uniform && gb.uniform) {
        cublasStatus_t st = cublasGemmStridedBatchedEx(
            h, opb, opa, (int)N, (int)M, (int)K, &alpha, dt__cuda_ptr(b), blas_type(in), (int)ldb,
            gb.stride, dt__cuda_ptr(a), blas_type(in), (int)lda, ga.stride, &beta, dt__cuda_ptr(c),
            blas_type(c->dtype), (int)N, M * N, (int)batch, CUBLAS_COMPUTE_32F,
            CUBLAS_GEMM_DEFAULT);
        if (st != CUBLAS_STATUS_SUCCESS)
            s = blas_error(st, fn, "cublasGemmStridedBatchedEx");
    } else {
        s = gemm_pointer_array(fn, h, opb, opa, (int)N, (int)M, (int)K, alpha, beta, &ga, (int)lda,
                               &gb, (int)ldb, c, (int)batch);
    }
out_unlock:
    pthread_mutex_unlock(&blas_lock);
    return s;
}
