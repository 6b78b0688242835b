/* What BLAS, GEMM engine, kernel and threads this process computes with (blas_info.h). */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/blas_info.h"
#include "kernels/cpu/onednn.h"
#include "kernels/kernel_ops.h"

/* The gemm_* fields: the engine DT_GEMM chose (a failed one is described by its reason). */
static void describe_gemm(const dt__blas *b, dt__compute_info *info)
{
    bool failed = false;
    const char *reason = "";
    dt__gemm_engine e = dt__gemm_engine_chosen(&failed, &reason);
    const dt__onednn_info *o = NULL;
    snprintf(info->gemm_reason, sizeof(info->gemm_reason), "%s", reason);
    if (e == DT_GEMM_ENGINE_OPENBLAS) {
        snprintf(info->gemm_engine, sizeof(info->gemm_engine), "openblas");
        snprintf(info->gemm_library, sizeof(info->gemm_library), "%s", b->library);
        snprintf(info->gemm_version, sizeof(info->gemm_version), "%.31s", b->version);
        snprintf(info->gemm_kernel, sizeof(info->gemm_kernel), "%s", info->blas_kernel);
        snprintf(info->gemm_detail, sizeof(info->gemm_detail), "kernel %s", b->how);
        snprintf(info->gemm_kernel_bf16, sizeof(info->gemm_kernel_bf16), "converted to f32");
        info->gemm_threads = info->blas_threads;
        return;
    }
    snprintf(info->gemm_engine, sizeof(info->gemm_engine), "onednn");
    if (failed || dt__onednn_load(&o) != DT_OK)
        return;
    snprintf(info->gemm_library, sizeof(info->gemm_library), "%s", o->library);
    snprintf(info->gemm_version, sizeof(info->gemm_version), "%s", o->version);
    snprintf(info->gemm_kernel, sizeof(info->gemm_kernel), "%s", o->kernel);
    snprintf(info->gemm_kernel_bf16, sizeof(info->gemm_kernel_bf16), "%s",
             strcmp(o->kernel_bf16, "none") == 0 ? "converted to f32" : o->kernel_bf16);
    snprintf(info->gemm_detail, sizeof(info->gemm_detail), "%s", o->detail);
    info->gemm_threads = dt__onednn_num_threads();
}

dt_status dt__compute_info_get(dt__compute_info *out)
{
    const dt__blas *b = NULL;
    DT_CHECK(dt__blas_get(&b));
    dt__compute_info info;
    memset(&info, 0, sizeof(info));
    snprintf(info.blas_library, sizeof(info.blas_library), "%s", b->library);
    snprintf(info.blas_version, sizeof(info.blas_version), "%s", b->version);
    const char *core = b->get_corename();
    snprintf(info.blas_kernel, sizeof(info.blas_kernel), "%s", core != NULL ? core : "unknown");
    info.blas_threads = b->get_num_threads();
    dt__cpu_features_str(info.cpu_features, sizeof(info.cpu_features));
    info.blas_kernel_generic = dt__blas_core_is_generic(b);
    info.num_threads = dt__kernels_num_threads();
    describe_gemm(b, &info);
    *out = info;
    return DT_OK;
}
