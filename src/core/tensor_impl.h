/*
 * The layout behind the opaque dt_tensor, shared by the layers inside the
 * library (kernels, autograd, ops, placement). Not installed.
 */
#ifndef DT_CORE_TENSOR_IMPL_H
#define DT_CORE_TENSOR_IMPL_H

#include <stdatomic.h>

#include "dtensor/tensor.h"

/* Refcounted memory block; accounted in the allocator under `category`. */
typedef struct dt_storage {
    atomic_int refcount;
    void *data;
    size_t nbytes;
    dt_device device;
    dt_mem_category category;
    size_t block_bytes; /* size of the block the allocator handed out (>= nbytes) */
} dt_storage;

/*
 * Objects of upper layers that a tensor holds a reference to (its autograd
 * node, its distributed spec) start with this header, so core can drop the
 * reference without knowing their type: core calls obj->release(obj).
 */
typedef struct dt_refobj {
    void (*release)(void *self); /* drops one reference */
} dt_refobj;

struct dt_autograd_node; /* src/autograd/: starts with a dt_refobj */
struct dt_spec;          /* placement/: the spec of a distributed tensor; starts with a dt_refobj */

struct dt_tensor {
    uint32_t magic; /* DT__MAGIC_TENSOR while alive (handle.h) */
    atomic_int refcount;
    int ndim;
    int64_t shape[DT_MAX_DIMS];
    int64_t strides[DT_MAX_DIMS]; /* in elements */
    int64_t offset;               /* in elements, into storage */
    dt_dtype dtype;
    dt_device device;
    dt_storage *storage; /* NULL for a distributed tensor */

    /* autograd (src/autograd/): */
    bool requires_grad;
    dt_tensor *grad;                  /* accumulated gradient of a leaf, owned */
    struct dt_autograd_node *grad_fn; /* node that produced this tensor, owned ref */
    int grad_fn_output;               /* which output of grad_fn this is */
    bool retains_grad;
    struct dt__grad_hook *grad_hooks; /* post-accumulate-grad hooks of a leaf, owned */

    /* distributed (placement/): when non-NULL, shape is the global shape and
     * `local` holds this rank's shard. */
    struct dt_spec *dist;
    dt_tensor *local;
};

/* A post-accumulate-grad hook (autograd/grad_hooks.c); core frees the list
 * with the tensor. */
typedef struct dt__grad_hook {
    dt_status (*fn)(dt_tensor *t, void *user);
    void *user;
    void (*free_user)(void *user);
    struct dt__grad_hook *next;
} dt__grad_hook;

/* Internal helpers implemented in src/core/ */

/* A new tensor handle with contiguous strides for shape, refcount 1, no storage. */
dt_status dt__tensor_alloc_handle(int ndim, const int64_t *shape, dt_dtype dtype, dt_device device,
                                  dt_tensor **out);
/* A handle sharing @p t's storage with the given geometry (a view). */
dt_status dt__tensor_make_view(dt_tensor *t, int ndim, const int64_t *shape, const int64_t *strides,
                               int64_t offset, dt_tensor **out);
/* Contiguous strides for @p shape into @p strides. */
void dt__contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);
/* Validate ndim/shape (0 <= ndim <= DT_MAX_DIMS, sizes >= 0, numel fits); names the bad value. */
dt_status dt__check_shape(const char *fn, int ndim, const int64_t *shape);
/* Product of the sizes (1 for ndim 0); no overflow check (dt__check_shape does that). */
int64_t dt__shape_numel(int ndim, const int64_t *shape);
/* Product of shape[from..to) (1 when from >= to). */
int64_t dt__shape_prod(const int64_t *shape, int from, int to);
/* Format "[2, 3, 4]" into buf; returns buf. */
const char *dt__shape_str(int ndim, const int64_t *shape, char *buf, size_t len);

/* Storage from the allocator (category = the thread's default category). */
dt_status dt__storage_create(size_t nbytes, dt_device device, dt_storage **out);
void dt__storage_release(dt_storage *s);
void dt__storage_set_category(dt_storage *s, dt_mem_category cat);

/*
 * Moving @p t's data (a distributed tensor's local shard) to another device
 * in place, in two steps so a caller moving many tensors changes nothing
 * unless every copy succeeded: prepare makes a contiguous copy on @p device;
 * commit (which cannot fail) gives it to @p t as its storage and releases
 * @p moved. The handle stays, so every holder sees the move; views of the old
 * storage keep the old data. Not for tensors recorded in an autograd graph.
 */
dt_status dt__tensor_move_prepare(const dt_tensor *t, dt_device device, dt_tensor **moved);
void dt__tensor_move_commit(dt_tensor *t, dt_tensor *moved);

/* Strided host copy with dtype conversion: dst and src have the same shape.
 * Integer -> integer conversions go through int64 (saturating), the rest
 * through double; f64 -> f16/bf16 is correctly rounded (via f32 rounded to odd). */
void dt__host_copy(dt_tensor *dst, const dt_tensor *src);

/* dtypes (dtype.c) */
bool dt__dtype_valid(dt_dtype dtype);
bool dt__dtype_is_float(dt_dtype dtype); /* f32, f64, f16, bf16 */
bool dt__dtype_is_int(dt_dtype dtype);   /* i32, i64, u16, u8 */
/* DT_ERR_INVALID_ARG "<fn>: unknown dtype value N" unless valid. */
dt_status dt__check_dtype(const char *fn, dt_dtype dtype);
/* One element at @p p as double / stored from double (saturating for integers, NaN -> 0). */
double dt__load_elem(const void *p, dt_dtype dtype);
void dt__store_elem(void *p, dt_dtype dtype, double v);
/* Same through int64 (exact for every integer dtype). */
int64_t dt__load_elem_int(const void *p, dt_dtype dtype);
void dt__store_elem_int(void *p, dt_dtype dtype, int64_t v);

/* Normalise dim @p d (negative counts from the end) of an @p ndim-dim tensor
 * into *out; DT_ERR_INVALID_ARG naming fn and d when out of range. */
dt_status dt__wrap_dim(const char *fn, int d, int ndim, int *out);
/* Reject NULL or distributed tensors (no local storage), naming fn and what. */
dt_status dt__check_local_tensor(const char *fn, const char *what, const dt_tensor *t);
/* Same, and reject tensors not on the CPU (DT_ERR_UNSUPPORTED). */
dt_status dt__check_host_tensor(const char *fn, const char *what, const dt_tensor *t);
/* Offset in elements from dt_tensor_data(t) of the element at flat row-major
 * index @p i (0 <= i < numel). */
int64_t dt__elem_offset(const dt_tensor *t, int64_t i);

/* Philox4x32-10 block (rng.c): 4 random words for a 128-bit counter and 64-bit key. */
void dt__philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

#endif
