/*
 * dtensor/tensor.h - the local tensor handle.
 *
 * A dt_tensor is a refcounted handle: a shape (up to DT_MAX_DIMS dims),
 * strides in elements, an element offset, a dtype, a device and a refcounted
 * storage. Views (reshape, permute, narrow, expand) share the storage.
 * The same handle type also represents a distributed tensor (see placement.h);
 * the functions here describe what the handle itself holds: for a distributed
 * tensor, shape is the global shape and data is NULL (use dt_to_local).
 *
 * Functions here never record autograd history: the differentiable views for
 * model code are in ops.h (dt_reshape, dt_permute, ...).
 *
 * Ownership: every `dt_tensor **out` receives a new reference the caller
 * releases with dt_tensor_release(). Thread safety: retain/release are atomic;
 * mutating one tensor from two threads at once is not supported.
 *
 * Errors (all functions returning dt_status; none is collective): NULL
 * tensors/outputs, ndim outside [0, DT_MAX_DIMS], negative sizes, shapes whose
 * element or byte count overflows int64, unknown dtype values, dims out of
 * range, bad permutations, out-of-range narrows, impossible expands or views
 * -> DT_ERR_INVALID_ARG with dt_last_error() naming the value. Functions that
 * read or write elements need a tensor with local storage: a distributed
 * handle gives DT_ERR_INVALID_ARG ("use dt_to_local"). fill, clone, copy_,
 * to_dtype and contiguous run on any device through its kernel table
 * (copy_ between host and device uses the device's copy kernel); item, item_at, equal
 * and print read device tensors through a host copy (they wait for the device);
 * the random fills of a device tensor are made on the host and copied over.
 * Creation on a device without a registered allocator: DT_ERR_UNSUPPORTED;
 * allocation failure: DT_ERR_NO_MEMORY. *out is written only on success.
 * Negative dims count from the end wherever a dim index is taken.
 */
#ifndef DTENSOR_TENSOR_H
#define DTENSOR_TENSOR_H

#include "dtensor/core.h"
#include "dtensor/memory.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DT_MAX_DIMS 8

typedef struct dt_tensor dt_tensor;

/* ------------------------------------------------------------ creation */

/**
 * Uninitialised tensor of @p shape (ndim 0 = scalar) on @p device, contiguous,
 * data 64-byte aligned, storage tagged with the thread's default memory
 * category (dt_memory_set_default_category).
 */
DT_API dt_status dt_tensor_empty(int ndim, const int64_t *shape, dt_dtype dtype, dt_device device,
                                 dt_tensor **out);
/** zeros / ones / full: on a non-CPU device the fill runs through that device's kernels. */
DT_API dt_status dt_tensor_zeros(int ndim, const int64_t *shape, dt_dtype dtype, dt_device device,
                                 dt_tensor **out);
DT_API dt_status dt_tensor_ones(int ndim, const int64_t *shape, dt_dtype dtype, dt_device device,
                                dt_tensor **out);
/** Every element = @p value converted to @p dtype. */
DT_API dt_status dt_tensor_full(int ndim, const int64_t *shape, dt_dtype dtype, dt_device device,
                                double value, dt_tensor **out);
/** A contiguous CPU tensor holding a copy of @p data (numel * dtype size bytes;
 * @p data may be NULL only when that is 0). */
DT_API dt_status dt_tensor_from_buffer(int ndim, const int64_t *shape, dt_dtype dtype,
                                       const void *data, dt_tensor **out);
/** 1-d CPU tensor [0, 1, ..., n-1] (n >= 0). */
DT_API dt_status dt_tensor_arange(int64_t n, dt_dtype dtype, dt_tensor **out);

/**
 * Fill @p t (any float dtype, CPU) with Normal(mean, std) samples from a
 * counter-based RNG: element i of @p t is treated as the element at
 * @p global_offset (per dim; NULL = zeros) of a tensor of @p global_shape
 * (NULL = t's shape), and its value depends only on (seed, its flat index in
 * the global tensor). A shard filled this way equals the same slice of the
 * full tensor filled with the same seed, whatever the sharding. @p t may be
 * strided (each element gets the value of its logical position).
 *
 * The algorithm, exactly (a Python reference can reproduce it): with g the
 * element's flat row-major index in the global tensor,
 *   r[0..3] = Philox4x32-10(counter = (g mod 2^32, g >> 32, 0, 0),
 *                           key = (seed mod 2^32, seed >> 32))   (Random123)
 *   u01(a, b) = ((a << 21) | (b >> 11)) * 2^-53   (53 bits, in [0, 1))
 *   normal:  mean + std * sqrt(-2 ln(1 - u01(r0, r1))) * cos(2 pi u01(r2, r3))
 *   uniform: lo + (hi - lo) * u01(r0, r1)
 * computed in double, then rounded to t's dtype.
 * Errors: non-float dtype, std < 0 or non-finite parameters, a local block
 * (offset + t's size) outside @p global_shape -> DT_ERR_INVALID_ARG.
 */
DT_API dt_status dt_tensor_fill_normal(dt_tensor *t, double mean, double std, uint64_t seed,
                                       const int64_t *global_shape, const int64_t *global_offset);
/** Uniform [lo, hi) (lo <= hi, finite), by the counter-based rule of
 * dt_tensor_fill_normal. */
DT_API dt_status dt_tensor_fill_uniform(dt_tensor *t, double lo, double hi, uint64_t seed,
                                        const int64_t *global_shape, const int64_t *global_offset);
/** Set every element of @p t (any layout, CPU) to @p value converted to t's dtype. */
DT_API dt_status dt_tensor_fill(dt_tensor *t, double value);

/* ------------------------------------------------------------ references */

/**
 * Add a reference; returns @p t (NULL-safe). A released tensor is not revived:
 * NULL, with an error logged.
 */
DT_API dt_tensor *dt_tensor_retain(dt_tensor *t);
/**
 * Drop a reference; frees the handle (and storage, when last) at zero.
 * NULL-safe. A released handle stays recognisable for a while (its memory is
 * quarantined, not reused at once): releasing it again logs an error and does
 * nothing, and every call that returns a dt_status refuses it with
 * DT_ERR_INVALID_ARG ("argument 'x' is a released tensor"). The same holds
 * for meshes (dt_mesh_release).
 */
DT_API void dt_tensor_release(dt_tensor *t);

/* ------------------------------------------------------------ queries */

/* Queries accept NULL (ndim 0, numel 0, NULL pointers, dtype DT_DTYPE_COUNT). */
DT_API int dt_tensor_ndim(const dt_tensor *t);
/** Size of dim @p d (negative counts from the end); -1 if out of range. */
DT_API int64_t dt_tensor_dim(const dt_tensor *t, int d);
/** Borrowed pointer to ndim sizes / strides (in elements). */
DT_API const int64_t *dt_tensor_shape(const dt_tensor *t);
DT_API const int64_t *dt_tensor_strides(const dt_tensor *t);
DT_API int64_t dt_tensor_numel(const dt_tensor *t);
DT_API size_t dt_tensor_nbytes(const dt_tensor *t); /* numel * dtype size */
DT_API dt_dtype dt_tensor_dtype(const dt_tensor *t);
DT_API dt_device dt_tensor_device(const dt_tensor *t);
DT_API bool dt_tensor_is_contiguous(const dt_tensor *t);
/** Address of the first element (storage + offset); NULL for a distributed tensor. Borrowed. */
DT_API void *dt_tensor_data(const dt_tensor *t);
/** True when @p t is a distributed tensor (placement.h). */
DT_API bool dt_tensor_is_distributed(const dt_tensor *t);
/** Element at flat row-major index @p i of a CPU tensor, converted to double;
 * NaN (and the last error set) when @p i is out of range or t unusable. */
DT_API double dt_tensor_item_at(const dt_tensor *t, int64_t i);
/** The single element of a 1-element CPU tensor. */
DT_API dt_status dt_tensor_item(const dt_tensor *t, double *out);
/** Print shape, dtype and (up to @p max_elems) values. */
DT_API void dt_tensor_print(const dt_tensor *t, FILE *f, int max_elems);

/* ------------------------------------------------------------ views (no copy) */

/**
 * Same storage, new shape; one size may be -1 (inferred). Fails
 * (DT_ERR_INVALID_ARG, naming shape and strides) if the layout cannot be
 * viewed: runs of dims contiguous in memory may be split or merged, never
 * merged across a gap (PyTorch's view rule).
 */
DT_API dt_status dt_tensor_view(dt_tensor *t, int ndim, const int64_t *shape, dt_tensor **out);
/** A view when possible, else a contiguous copy. */
DT_API dt_status dt_tensor_reshape(dt_tensor *t, int ndim, const int64_t *shape, dt_tensor **out);
DT_API dt_status dt_tensor_permute(dt_tensor *t, const int *perm, dt_tensor **out);
DT_API dt_status dt_tensor_transpose(dt_tensor *t, int d0, int d1, dt_tensor **out);
/** Elements [start, start+length) of dim @p dim (0 <= start <= start+length <= size). */
DT_API dt_status dt_tensor_narrow(dt_tensor *t, int dim, int64_t start, int64_t length,
                                  dt_tensor **out);
/** Broadcast size-1 dims (stride 0) and prepend dims to reach @p shape;
 * -1 keeps an existing dim's size. */
DT_API dt_status dt_tensor_expand(dt_tensor *t, int ndim, const int64_t *shape, dt_tensor **out);
/** Insert a size-1 dim at @p dim (in [-(ndim+1), ndim]). */
DT_API dt_status dt_tensor_unsqueeze(dt_tensor *t, int dim, dt_tensor **out);
/** Remove dim @p dim, which must have size 1 (unlike PyTorch, another size is an error). */
DT_API dt_status dt_tensor_squeeze(dt_tensor *t, int dim, dt_tensor **out);

/* ------------------------------------------------------------ copies */

/** @p t itself (retained) if contiguous, else a contiguous copy. */
DT_API dt_status dt_tensor_contiguous(dt_tensor *t, dt_tensor **out);
/** A contiguous copy with its own storage. */
DT_API dt_status dt_tensor_clone(const dt_tensor *t, dt_tensor **out);
/**
 * Copy @p src into @p dst elementwise (same shape, no broadcasting; any
 * layouts; dtypes may differ: converted, f32<->bf16/f16 with
 * round-to-nearest-even, float -> integer truncates and saturates, NaN -> 0).
 * dst and src must not overlap partially.
 */
DT_API dt_status dt_tensor_copy_(dt_tensor *dst, const dt_tensor *src);
/**
 * Same as dt_tensor_copy_, but may return before the data has arrived, as
 * PyTorch's copy_(non_blocking=True): until dt_device_synchronize of the
 * non-CPU side returns, a host dst must not be read and a host src must not be
 * changed or freed. On the CPU and synchronous devices it is dt_tensor_copy_.
 */
DT_API dt_status dt_tensor_copy_async_(dt_tensor *dst, const dt_tensor *src);
/** A contiguous copy converted to @p dtype. */
DT_API dt_status dt_tensor_to_dtype(const dt_tensor *t, dt_dtype dtype, dt_tensor **out);
/**
 * A contiguous copy of @p t on @p device (PyTorch's t.to(device)); @p t itself,
 * retained, when it is already there. Caller releases *out. Blocking: when it
 * returns to a host tensor the data has arrived. DT_ERR_UNSUPPORTED for a
 * device not built in.
 */
DT_API dt_status dt_tensor_to_device(dt_tensor *t, dt_device device, dt_tensor **out);
/** Bitwise equality of shape, dtype and values (test helper; any devices: staged to the host). */
DT_API bool dt_tensor_equal(const dt_tensor *a, const dt_tensor *b);

/* ------------------------------------------------------------ memory category */

/**
 * Re-tag @p t's storage for memory accounting (e.g. DT_MEM_PARAMETER): its
 * bytes move between categories. Views share the storage, so they move too; a
 * distributed tensor re-tags its local shard. NULL-safe.
 */
DT_API void dt_tensor_set_mem_category(dt_tensor *t, dt_mem_category cat);
DT_API dt_mem_category dt_tensor_mem_category(const dt_tensor *t);

#ifdef __cplusplus
}
#endif
#endif /* DTENSOR_TENSOR_H */
