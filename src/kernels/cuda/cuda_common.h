/*
 * Host-side helpers of the CUDA backend (src/kernels/cuda/, also used by
 * src/comm/nccl/): CUDA error conversion, tensor checks and pointers, the
 * element-wise iterator, stream-ordered scratch memory.
 *
 * Streams: every kernel of this backend runs on DT_CUDA_STREAM, the legacy
 * default stream, so kernels are ordered with each other and with blocking
 * cudaMemcpy; table entries return once the work is enqueued (entries that
 * return a host value, like sum_squares, synchronise).
 */
#ifndef DT_KERNELS_CUDA_COMMON_H
#define DT_KERNELS_CUDA_COMMON_H

#include <cuda_runtime_api.h>

#include "core/error.h"
#include "core/tensor_impl.h"
#include "kernels/cuda/cuda_launch.h"

#define DT_CUDA_STREAM ((cudaStream_t)0)

/* DT_ERR for a failed CUDA call: DT_ERR_NO_MEMORY for allocation failures,
 * else DT_ERR_BACKEND, with cudaGetErrorString's text. */
dt_status dt__cuda_error(cudaError_t e, const char *fn, const char *what, const char *file,
                         int line);

#define DT_CUDA_CHECK(call, fn)                                                                    \
    do {                                                                                           \
        cudaError_t dt__cu_e_ = (call);                                                            \
        if (dt__cu_e_ != cudaSuccess)                                                              \
            return dt__cuda_error(dt__cu_e_, (fn), #call, __FILE__, __LINE__);                     \
    } while (0)

#define DT_CUDA_CHECK_GOTO(call, fn, status, label)                                                \
    do {                                                                                           \
        cudaError_t dt__cu_e_ = (call);                                                            \
        if (dt__cu_e_ != cudaSuccess) {                                                            \
            (status) = dt__cuda_error(dt__cu_e_, (fn), #call, __FILE__, __LINE__);                 \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

/* @p t is a local CUDA tensor with storage and (unless @p dtype is
 * DT_DTYPE_COUNT) of @p dtype; names fn, what and the bad value. */
dt_status dt__cuda_check(const char *fn, const char *what, const dt_tensor *t, dt_dtype dtype);
/* Same, and contiguous (outputs). */
dt_status dt__cuda_check_out(const char *fn, const char *what, const dt_tensor *t, dt_dtype dtype);
/* @p t is one of the integer dtypes ids/targets/masks may have. */
dt_status dt__cuda_check_int(const char *fn, const char *what, const dt_tensor *t);
/* Same shape as @p ref (ndim and sizes). */
dt_status dt__cuda_check_same_shape(const char *fn, const char *what, const dt_tensor *t,
                                    const dt_tensor *ref);
/* numel of @p t is @p n (names what). */
dt_status dt__cuda_check_numel(const char *fn, const char *what, const dt_tensor *t, int64_t n);
/* cudaSetDevice to @p t's device (every entry calls it with its first tensor). */
dt_status dt__cuda_use_device(const char *fn, const dt_tensor *t);

/* Address of @p t's first element (device memory). */
static inline void *dt__cuda_ptr(const dt_tensor *t)
{
    return (char *)t->storage->data + t->offset * (int64_t)dt_dtype_size(t->dtype);
}
/* Row-major contiguous (size-1 dims may have any stride). */
bool dt__cuda_is_contiguous(const dt_tensor *t);

/*
 * Iterator for op 0 = @p out (its own strides) and @p nin inputs broadcast to
 * out's shape (aligned on the right; missing or size-1 dims get stride 0).
 * An input whose shape does not broadcast gives DT_ERR_INVALID_ARG naming it.
 */
dt_status dt__cuda_iter_init(const char *fn, dt__cu_iter *it, const dt_tensor *out, int nin,
                             const dt_tensor *const *ins, const char *const *names);

/* Stream-ordered scratch on DT_CUDA_STREAM (cudaMallocAsync); free with
 * dt__cuda_scratch_free (NULL-safe), also stream-ordered. */
dt_status dt__cuda_scratch(const char *fn, size_t bytes, void **out);
void dt__cuda_scratch_free(void *p);

/*
 * Contiguous data of @p t: its own when contiguous (*tmp = NULL), else a
 * scratch copy the caller frees with dt__cuda_scratch_free(*tmp).
 */
dt_status dt__cuda_contig(const char *fn, const dt_tensor *t, const void **data, void **tmp);

#endif
