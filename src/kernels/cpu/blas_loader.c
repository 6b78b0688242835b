/*
 * Loading OpenBLAS with the right kernel for this CPU.
 *
 * OpenBLAS (DYNAMIC_ARCH builds, as Debian ships) picks its kernel once, in
 * its library constructor, from OPENBLAS_CORETYPE or its own cpuid table; a
 * CPU newer than that table silently gets the generic "Prescott" kernel
 * (3.5-5x slower SGEMM on AVX-512 machines). So on first use dtensor:
 *   1. maps this CPU's features to a core (AVX-512 F/BW/VL/DQ/CD -> SkylakeX,
 *      AVX2+FMA -> Haswell, AVX -> Sandybridge, SSE4.2 -> Nehalem, else
 *      Prescott), unless OPENBLAS_CORETYPE is set (never overridden) or
 *      DT_BLAS_AUTOSELECT=0;
 *   2. if OpenBLAS is not loaded yet, sets OPENBLAS_CORETYPE for the
 *      duration of dlopen("libopenblas.so.0") (the documented mechanism);
 *   3. if the program already loaded it (linked at link time, or another
 *      library did) and the core it chose is below the CPU's level, re-runs
 *      OpenBLAS's selection (gotoblas_dynamic_quit/init) with the variable
 *      set: same effect, before dtensor issues any BLAS call.
 * This lives in the library, so it works the same under dtrun, mpirun/srun
 * and in single-process programs; the user's environment is left as found.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/env_scope.h"
#include "kernels/cpu/onednn.h"
#include "kernels/kernel_ops.h"

static const char *const lib_names[] = {"libopenblas.so.0", "libopenblas.so"};

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static dt__blas blas;
static void *blas_handle;
static char blas_error[256]; /* why loading failed; "" on success */

static void *open_lib(int extra_flags, const char **name)
{
    for (size_t i = 0; i < sizeof(lib_names) / sizeof(lib_names[0]); i++) {
        void *h = dlopen(lib_names[i], RTLD_NOW | RTLD_LOCAL | extra_flags);
        if (h != NULL) {
            *name = lib_names[i];
            return h;
        }
    }
    return NULL;
}

static bool resolve(void *h)
{
    blas.sgemm = (dt__sgemm_fn)dlsym(h, "cblas_sgemm");
    *(void **)&blas.set_num_threads = dlsym(h, "openblas_set_num_threads");
    *(void **)&blas.get_num_threads = dlsym(h, "openblas_get_num_threads");
    *(void **)&blas.get_corename = dlsym(h, "openblas_get_corename");
    *(void **)&blas.get_config = dlsym(h, "openblas_get_config");
    return blas.sgemm != NULL && blas.set_num_threads != NULL && blas.get_num_threads != NULL &&
           blas.get_corename != NULL && blas.get_config != NULL;
}

/* "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64" -> "0.3.21" */
static void parse_version(const char *config)
{
    const char *p = config != NULL ? strstr(config, "OpenBLAS ") : NULL;
    snprintf(blas.version, sizeof(blas.version), "%s", "unknown");
    if (p == NULL)
        return;
    p += strlen("OpenBLAS ");
    size_t n = strcspn(p, " ");
    if (n >= sizeof(blas.version))
        n = sizeof(blas.version) - 1;
    memcpy(blas.version, p, n);
    blas.version[n] = '\0';
}

/* Re-run OpenBLAS's kernel selection with OPENBLAS_CORETYPE=core for the call. */
static dt_status reselect_core(void *h, const char *core)
{
    void (*quit)(void) = NULL, (*init)(void) = NULL;
    *(void **)&quit = dlsym(h, "gotoblas_dynamic_quit");
    *(void **)&init = dlsym(h, "gotoblas_dynamic_init");
    if (quit == NULL || init == NULL)
        return DT_ERR(DT_ERR_UNSUPPORTED,
                      "blas: this OpenBLAS has no dynamic kernel selection; cannot switch to %s",
                      core);
    char *saved = dt__env_set_saving("OPENBLAS_CORETYPE", core);
    quit();
    init();
    dt__env_restore("OPENBLAS_CORETYPE", saved);
    const char *now = blas.get_corename();
    if (now == NULL || strcasecmp(now, core) != 0)
        return DT_ERR(DT_ERR_BACKEND, "blas: asked OpenBLAS for kernel %s, it uses %s", core,
                      now != NULL ? now : "(null)");
    return DT_OK;
}

static void warn_if_generic(void)
{
    if (!dt__blas_core_is_generic(&blas))
        return;
    char feat[128];
    dt__cpu_features_str(feat, sizeof(feat));
    dt__gemm_engine engine = DT_GEMM_ENGINE_OPENBLAS;
    if (dt__gemm_engine_get(&engine) == DT_OK && engine == DT_GEMM_ENGINE_ONEDNN) {
        /* nothing multiplies on OpenBLAS then: not worth a warning */
        DT_LOG_INFO("kernel",
                    "OpenBLAS kernel %s is below what this CPU supports [%s]; unused: "
                    "matmuls run on oneDNN (DT_GEMM)",
                    blas.get_corename(), feat);
        return;
    }
    DT_LOG_WARN_HOST("kernel",
                     "OpenBLAS uses kernel %s, a fallback below what this CPU supports [%s]: "
                     "GEMM runs several times slower (every rank of this host). Fix: unset "
                     "OPENBLAS_CORETYPE and DT_BLAS_AUTOSELECT so dtensor picks the kernel, or "
                     "set OPENBLAS_CORETYPE=%s",
                     blas.get_corename(), feat, dt__blas_core_for_level(dt__cpu_level()));
}

static void load_once(void)
{
    const char *user = dt__config_str("OPENBLAS_CORETYPE");
    int level = dt__cpu_level();
    bool autoselect = dt__config_int("DT_BLAS_AUTOSELECT") != 0 && user == NULL && level >= 0;
    const char *wanted = autoselect ? dt__blas_core_for_level(level) : NULL;
    const char *name = NULL;

    void *h = open_lib(RTLD_NOLOAD, &name);
    bool preloaded = h != NULL;
    if (!preloaded) {
        char *saved_core = NULL, *saved_threads = NULL;
        if (wanted != NULL) /* read by OpenBLAS's constructor */
            saved_core = dt__env_set_saving("OPENBLAS_CORETYPE", wanted);
        /* The constructor also starts its worker threads, one per core unless
         * told otherwise, and idle workers poll for ~0.1 s: measured, that made
         * a 2-rank 8 B all-reduce 80 us instead of 0.55 us for the first 0.1 s.
         * Start only the threads this rank will use. */
        bool set_threads = dt__config_str("OPENBLAS_NUM_THREADS") == NULL;
        if (set_threads) {
            char n[16];
            snprintf(n, sizeof(n), "%d", dt__kernels_num_threads());
            saved_threads = dt__env_set_saving("OPENBLAS_NUM_THREADS", n);
        }
        h = open_lib(0, &name);
        if (wanted != NULL)
            dt__env_restore("OPENBLAS_CORETYPE", saved_core);
        if (set_threads)
            dt__env_restore("OPENBLAS_NUM_THREADS", saved_threads);
    }
    if (h == NULL) {
        snprintf(blas_error, sizeof(blas_error), "blas: cannot load OpenBLAS: %s", dlerror());
        return;
    }
    if (!resolve(h)) {
        snprintf(blas_error, sizeof(blas_error),
                 "blas: %s lacks cblas_sgemm or the openblas_* queries", name);
        dlclose(h);
        return;
    }
    blas_handle = h;
    snprintf(blas.library, sizeof(blas.library), "OpenBLAS (%s)", name);
    snprintf(blas.wanted, sizeof(blas.wanted), "%s", wanted != NULL ? wanted : "");
    parse_version(blas.get_config());
    blas.how =
        user != NULL ? "OPENBLAS_CORETYPE" : (wanted != NULL ? "auto-selected" : "library default");
    if (preloaded && wanted != NULL &&
        dt__blas_core_level(blas.get_corename()) < dt__blas_core_level(wanted)) {
        if (reselect_core(h, wanted) != DT_OK)
            DT_LOG_WARN("kernel", "%s", dt_last_error());
        else
            blas.how = "auto-selected (re-selected: OpenBLAS was loaded before dtensor)";
    }
    blas.set_num_threads(dt__kernels_num_threads());
    DT_LOG_INFO("kernel", "blas: %s %s, kernel %s (%s), %d threads", blas.library, blas.version,
                blas.get_corename(), blas.how, blas.get_num_threads());
    warn_if_generic();
}

dt_status dt__blas_get(const dt__blas **out)
{
    pthread_once(&blas_once, load_once);
    if (blas_handle == NULL)
        return DT_ERR(DT_ERR_BACKEND, "%s", blas_error);
    *out = &blas;
    return DT_OK;
}

dt_status dt__blas_force_core(const char *core)
{
    const dt__blas *b = NULL;
    DT_CHECK(dt__blas_get(&b));
    if (dt__blas_core_level(core) < 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "blas: unknown OpenBLAS core '%s'", core);
    DT_CHECK(reselect_core(blas_handle, core));
    return DT_OK;
}

bool dt__blas_core_is_generic(const dt__blas *b)
{
    int have = dt__blas_core_level(b->get_corename());
    return have >= 0 && have < dt__cpu_level();
}
