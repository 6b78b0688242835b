/*
 * What BLAS, GEMM engine, kernel and threads this process computes with, as
 * the kernels layer sees it. dt_runtime_info_get (src/runtime.c) copies it
 * into the public dt_runtime_info: the public struct belongs to the runtime
 * layer, above kernels. The fields mean what dt_runtime_info's do
 * (include/dtensor/runtime.h), with the same sizes (checked in runtime.c).
 */
#ifndef DT_KERNELS_CPU_BLAS_INFO_H
#define DT_KERNELS_CPU_BLAS_INFO_H

#include <stdbool.h>

#include "dtensor/core.h"

typedef struct dt__compute_info {
    char blas_library[64];
    char blas_version[64];
    char blas_kernel[64];
    int blas_threads;
    char cpu_features[128];
    bool blas_kernel_generic;
    int num_threads;
    char gemm_engine[16];
    char gemm_library[64];
    char gemm_version[32];
    char gemm_kernel[64];
    int gemm_threads;
    char gemm_detail[160];
    char gemm_reason[192];
    char gemm_kernel_bf16[64];
} dt__compute_info;

/* Fill @p out, loading BLAS (and the GEMM engine) first if needed; fails
 * when BLAS cannot be loaded. */
dt_status dt__compute_info_get(dt__compute_info *out);

#endif
