/* dt_runtime_info_get: what BLAS, kernel and threads this process computes with. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "dtensor/runtime.h"
#include "kernels/cpu/blas.h"
#include "kernels/kernel_ops.h"

dt_status dt_runtime_info_get(dt_runtime_info *out)
{
    DT_ARG_NOT_NULL(out);
    const dt__blas *b = NULL;
    DT_CHECK(dt__blas_get(&b));
    dt_runtime_info info;
    memset(&info, 0, sizeof(info));
    snprintf(info.blas_library, sizeof(info.blas_library), "%s", b->library);
    snprintf(info.blas_version, sizeof(info.blas_version), "%s", b->version);
    const char *core = b->get_corename();
    snprintf(info.blas_kernel, sizeof(info.blas_kernel), "%s", core != NULL ? core : "unknown");
    info.blas_threads = b->get_num_threads();
    dt__cpu_features_str(info.cpu_features, sizeof(info.cpu_features));
    info.blas_kernel_generic = dt__blas_core_is_generic(b);
    info.num_threads = dt__kernels_num_threads();
    *out = info;
    return DT_OK;
}
