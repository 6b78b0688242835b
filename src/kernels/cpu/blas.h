/*
 * OpenBLAS as dtensor uses it: loaded with dlopen on first use (after picking
 * the kernel for this CPU), entry points resolved with dlsym. See
 * blas_loader.c for the selection rules. Internal; used by the CPU kernels,
 * dt_runtime_info_get, the kernel tests and bench/kernels.
 */
#ifndef DT_KERNELS_CPU_BLAS_H
#define DT_KERNELS_CPU_BLAS_H

#include <stdbool.h>

#include "dtensor/core.h"

/* CBLAS enum values (cblas.h), so this header does not need cblas.h. */
enum { DT_CBLAS_ROW_MAJOR = 101, DT_CBLAS_NO_TRANS = 111, DT_CBLAS_TRANS = 112 };

typedef void (*dt__sgemm_fn)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                             const float *a, int lda, const float *b, int ldb, float beta, float *c,
                             int ldc);

typedef struct dt__blas {
    dt__sgemm_fn sgemm;
    void (*set_num_threads)(int n);
    int (*get_num_threads)(void);
    char *(*get_corename)(void);
    char *(*get_config)(void);
    char library[64]; /* "OpenBLAS (libopenblas.so.0)" */
    char version[64]; /* "0.3.21" */
    char wanted[32];  /* the core auto-selection asked for ("" when it did not) */
    const char *how;  /* "auto-selected", "OPENBLAS_CORETYPE", "library default" */
} dt__blas;

/*
 * The loaded BLAS (loads it on first call; thread-safe). Fails with
 * DT_ERR_BACKEND naming what dlopen/dlsym said when OpenBLAS is missing.
 */
dt_status dt__blas_get(const dt__blas **out);

/* CPU features as a space-separated list ("avx2 fma avx512f ..."). */
void dt__cpu_features_str(char *buf, size_t len);

/* Capability level of this CPU: 0 sse2, 1 sse4.2, 2 avx, 3 avx2+fma, 4 avx-512 (f/bw/vl/dq/cd). */
int dt__cpu_level(void);

/* The OpenBLAS core name for a level ("Prescott", ..., "SkylakeX"). */
const char *dt__blas_core_for_level(int level);

/* Level of an OpenBLAS core name (case-insensitive); -1 when unknown. */
int dt__blas_core_level(const char *corename);

/*
 * Kernels auto-selection could choose on this CPU, best first (the level's
 * core and every lower one), as static strings; returns how many (<= max).
 */
int dt__blas_candidates(const char **names, int max);

/*
 * Switch an already loaded OpenBLAS (DYNAMIC_ARCH build) to @p core by
 * re-running its kernel selection with OPENBLAS_CORETYPE set for the call.
 * Not thread-safe against concurrent BLAS calls. DT_ERR_UNSUPPORTED when the
 * library has no dynamic kernel selection; DT_ERR_BACKEND if it did not take.
 */
dt_status dt__blas_force_core(const char *core);

/* True when the core in use is below what this CPU supports. */
bool dt__blas_core_is_generic(const dt__blas *b);

#endif
