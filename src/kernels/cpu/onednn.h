/*
 * oneDNN as dtensor's CPU matmul engine: libdnnl.so.2 (oneDNN 2.x) is
 * dlopened on first use, never linked, so a machine without it runs every
 * GEMM on OpenBLAS. onednn_loader.c loads it (OpenMP threads and wait policy
 * set for the load), onednn_gemm.c runs matmul primitives from an LRU cache,
 * gemm_engine.c picks the engine from DT_GEMM. Internal.
 */
#ifndef DT_KERNELS_CPU_ONEDNN_H
#define DT_KERNELS_CPU_ONEDNN_H

#include <stdbool.h>
#include <stdint.h>

#include "dtensor/core.h"

/* What the loaded oneDNN is (filled by dt__onednn_load). */
typedef struct dt__onednn_info {
    char library[64];     /* "oneDNN (libdnnl.so.2)" */
    char version[32];     /* "2.6.3" */
    char kernel[64];      /* implementation of an f32 matmul: "brg:avx512_core" */
    char kernel_bf16[64]; /* of a bf16 one (f32 accumulation): "brg:avx512_core_bf16", "none" */
    char detail[160];     /* "isa avx512_core_bf16, GNU OpenMP, idle threads passive" */
} dt__onednn_info;

/*
 * Load oneDNN once (thread-safe). DT_ERR_BACKEND naming DT_ONEDNN_LIB and
 * what dlopen/dlsym said when it cannot load; DT_ERR_UNSUPPORTED when this
 * build had no oneDNN 2.x headers.
 */
dt_status dt__onednn_load(const dt__onednn_info **out);

/* Whether dt__onednn_load succeeded already (does not load). */
bool dt__onednn_loaded(void);

/* The OpenMP threads every following matmul uses (cached primitives are per count). */
void dt__onednn_set_num_threads(int n);
int dt__onednn_num_threads(void);

/*
 * One row-major matmul, optionally batched: for each batch i,
 *   C_i = alpha op(A_i) op(B_i) + beta C_i,  op(A) M x K, op(B) K x N,
 * A stored untransposed as M rows of stride lda (transposed: K rows), B as
 * K (transposed: N) rows of stride ldb, C as M rows of stride ldc. Batch i
 * starts at i * sa / sb / sc elements; sa or sb = 0 shares one matrix. With
 * a bias, C_i = op(A_i) op(B_i) + bias in the kernel's epilogue (alpha 1,
 * beta 0: cheaper than a sum post-op, which reads C).
 */
typedef struct dt__onednn_mm {
    int64_t batch, m, n, k;
    bool trans_a, trans_b;
    int64_t lda, ldb, ldc;
    int64_t sa, sb, sc;
    float alpha, beta;
    dt_dtype ab_dtype, c_dtype; /* F32 (0, the default) or BF16; a and b alike */
    const float *bias;          /* n values added to every row of C (NULL: none); alpha 1 */
} dt__onednn_mm;

/*
 * Run @p mm on oneDNN (loads it); a, b and c hold mm's dtypes (bf16 inputs
 * accumulate in f32). Fails naming the shape: DT_ERR_UNSUPPORTED for a
 * layout or dtype oneDNN does not take here (e.g. overlapping batches, bf16
 * on a CPU without AVX-512), else DT_ERR_BACKEND.
 */
dt_status dt__onednn_matmul(const dt__onednn_mm *mm, const void *a, const void *b, void *c);

/*
 * Timing of the matmuls for benchmarks (bench/gpt_step's GEMM share of a
 * step): while on, every dt__onednn_matmul adds the calling thread's CPU time
 * in it to a process-wide total (all of a matmul's time with one compute
 * thread; with more, only the caller's share). Off by default (two clock
 * reads per call when on). dt__onednn_gemm_seconds returns the total.
 */
void dt__onednn_time_gemms(bool on);
double dt__onednn_gemm_seconds(void);

/* Primitives in the cache now, and how many were created/evicted since load. */
void dt__onednn_cache_stats(int *entries, int64_t *created, int64_t *evicted);

/* The engine DT_GEMM picks (gemm_engine.c). */
typedef enum dt__gemm_engine { DT_GEMM_ENGINE_OPENBLAS, DT_GEMM_ENGINE_ONEDNN } dt__gemm_engine;

/*
 * The engine every CPU matmul runs on, decided once per process: DT_GEMM=auto
 * takes oneDNN when it loads (not in sanitizer builds), else OpenBLAS with an
 * info line saying why; DT_GEMM=onednn that cannot load fails with
 * DT_ERR_BACKEND here, so every matmul fails with the reason.
 */
dt_status dt__gemm_engine_get(dt__gemm_engine *out);

/*
 * The engine chosen (deciding now if not yet, even when it failed) and why:
 * "default (DT_GEMM=auto)", "DT_GEMM=onednn, but oneDNN did not load: ...".
 * For dt_runtime_info (blas_info.c).
 */
dt__gemm_engine dt__gemm_engine_chosen(bool *failed, const char **reason);

#endif
