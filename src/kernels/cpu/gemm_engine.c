/*
 * Which engine runs the CPU matmuls (DT_GEMM), decided once per process:
 *   openblas: today's cblas_sgemm path, oneDNN never loaded;
 *   onednn:   oneDNN or nothing: when it cannot load, every matmul fails
 *             with the reason (asked for by name, a silent fallback would
 *             hide a 2x slower run);
 *   auto:     oneDNN when it loads, else OpenBLAS with an info line saying
 *             why. Sanitizer builds take OpenBLAS: LeakSanitizer's exit scan
 *             crashes ("Tracer caught signal 11") once OpenMP threads exist.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "kernels/cpu/onednn.h"

static pthread_once_t decide_once = PTHREAD_ONCE_INIT;
static dt__gemm_engine engine;
static bool failed;            /* DT_GEMM=onednn and it did not load */
static char engine_error[400]; /* the reason every matmul fails, when failed */
static char reason[192];       /* why this engine (dt_runtime_info.gemm_reason) */

/* dt_last_error() without its "gemm: " prefix, to embed in a sentence. */
static const char *load_error(void)
{
    const char *e = dt_last_error();
    return strncmp(e, "gemm: ", 6) == 0 ? e + 6 : e;
}

static void log_choice(void)
{
    const dt__onednn_info *i = NULL;
    if (engine == DT_GEMM_ENGINE_ONEDNN && !failed && dt__onednn_load(&i) == DT_OK)
        DT_LOG_INFO("kernel", "gemm: engine %s %s, kernel %s (bf16: %s), %d threads (%s); %s",
                    i->library, i->version, i->kernel, i->kernel_bf16, dt__onednn_num_threads(),
                    i->detail, reason);
    else if (failed)
        DT_LOG_WARN("kernel", "%s", engine_error);
    else
        DT_LOG_INFO("kernel", "gemm: engine OpenBLAS (kernel on the blas line); %s", reason);
}

static void decide(void)
{
    const char *want = dt__config_str("DT_GEMM");
    if (strcmp(want, "openblas") == 0) {
        engine = DT_GEMM_ENGINE_OPENBLAS;
        snprintf(reason, sizeof(reason), "DT_GEMM=openblas");
    } else if (strcmp(want, "onednn") == 0) {
        engine = DT_GEMM_ENGINE_ONEDNN;
        snprintf(reason, sizeof(reason), "DT_GEMM=onednn");
        if (dt__onednn_load(NULL) != DT_OK) {
            failed = true;
            snprintf(engine_error, sizeof(engine_error),
                     "gemm: DT_GEMM=onednn, but %s; every matmul fails (DT_GEMM=auto or "
                     "openblas runs them on OpenBLAS)",
                     load_error());
            snprintf(reason, sizeof(reason), "DT_GEMM=onednn, but oneDNN did not load: %s",
                     load_error());
        }
    } else {
#ifdef DT_SANITIZE_BUILD
        engine = DT_GEMM_ENGINE_OPENBLAS;
        snprintf(reason, sizeof(reason),
                 "DT_GEMM=auto in a sanitizer build: LeakSanitizer crashes at exit once oneDNN's "
                 "OpenMP threads exist (DT_GEMM=onednn forces it)");
#else
        if (dt__onednn_load(NULL) == DT_OK) {
            engine = DT_GEMM_ENGINE_ONEDNN;
            snprintf(reason, sizeof(reason), "default (DT_GEMM=auto)");
        } else {
            engine = DT_GEMM_ENGINE_OPENBLAS;
            snprintf(reason, sizeof(reason), "DT_GEMM=auto and oneDNN did not load: %s",
                     load_error());
        }
#endif
    }
    log_choice();
}

dt_status dt__gemm_engine_get(dt__gemm_engine *out)
{
    pthread_once(&decide_once, decide);
    if (failed)
        return DT_ERR(DT_ERR_BACKEND, "%s", engine_error);
    *out = engine;
    return DT_OK;
}

dt__gemm_engine dt__gemm_engine_chosen(bool *is_failed, const char **why)
{
    pthread_once(&decide_once, decide);
    *is_failed = failed;
    *why = reason;
    return engine;
}
