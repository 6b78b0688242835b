/*
 * Loading oneDNN (DT_ONEDNN_LIB, default libdnnl.so.2) with dlopen.
 *
 * Debian's oneDNN runs on GNU OpenMP, which reads its settings once, when
 * libgomp loads: OMP_NUM_THREADS (threads of a parallel region) and
 * OMP_WAIT_POLICY (idle threads spin ~0.3 s by default). Spinning idle
 * threads are the trap idle OpenBLAS workers were: with 4 ranks on 2 cores
 * they take the cores the communication needs. So, for the dlopen only,
 * OMP_NUM_THREADS is set to this rank's thread count when unset, and
 * OMP_WAIT_POLICY=passive when it, GOMP_SPINCOUNT and KMP_BLOCKTIME are all
 * unset; the environment is then put back exactly as found.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/env_scope.h"
#include "kernels/cpu/onednn_api.h"
#include "kernels/kernel_ops.h"

static pthread_once_t load_once_ctl = PTHREAD_ONCE_INIT;
static dt__onednn_info info;
static char load_error[320]; /* why loading failed; "" on success */
static atomic_bool loaded;
static atomic_int want_threads = 1;

#ifdef DT_HAVE_ONEDNN
static dt__dnnl api;
static _Thread_local int applied_threads; /* this thread's OpenMP setting, 0: not yet */
static atomic_bool forked;                /* in a child forked after loading */

static bool omp_already_loaded(void)
{
    void *h = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h != NULL)
        dlclose(h);
    return h != NULL;
}

/* dlopen with the OpenMP settings for this rank; says in @p idle what idle threads do. */
static void *open_with_omp_env(const char *lib, char *idle, size_t idle_len)
{
    bool omp_before = omp_already_loaded();
    bool set_threads = dt__config_str("OMP_NUM_THREADS") == NULL;
    const char *policy = dt__config_str("OMP_WAIT_POLICY");
    bool set_passive = policy == NULL && dt__config_str("GOMP_SPINCOUNT") == NULL &&
                       dt__config_str("KMP_BLOCKTIME") == NULL;
    char *saved_threads = NULL, *saved_policy = NULL;
    if (set_threads) {
        char n[16];
        snprintf(n, sizeof(n), "%d", dt__kernels_num_threads());
        saved_threads = dt__env_set_saving("OMP_NUM_THREADS", n);
    }
    if (set_passive)
        saved_policy = dt__env_set_saving("OMP_WAIT_POLICY", "passive");
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (set_threads)
        dt__env_restore("OMP_NUM_THREADS", saved_threads);
    if (set_passive)
        dt__env_restore("OMP_WAIT_POLICY", saved_policy);
    if (omp_before)
        snprintf(idle, idle_len, "OpenMP loaded before dtensor (its wait policy stands)");
    else if (set_passive)
        snprintf(idle, idle_len, "idle threads passive");
    else
        snprintf(idle, idle_len, "idle threads as OMP_WAIT_POLICY/GOMP_SPINCOUNT say");
    return h;
}

static bool resolve(void *h, const char **missing)
{
#define DT_DNNL_RESOLVE(name)                                                                      \
    if ((*(void **)&api.name = dlsym(h, #name)) == NULL) {                                         \
        *missing = #name;                                                                          \
        return false;                                                                              \
    }
    DT_DNNL_FUNCTIONS(DT_DNNL_RESOLVE)
#undef DT_DNNL_RESOLVE
    /* dlsym on a handle searches its dependencies too: the OpenMP runtime */
    *(void **)&api.omp_set_num_threads = dlsym(h, "omp_set_num_threads");
    *(void **)&api.omp_get_max_threads = dlsym(h, "omp_get_max_threads");
    return true;
}

static const char *isa_name(dnnl_cpu_isa_t isa)
{
    switch (isa) {
    case dnnl_cpu_isa_sse41:
        return "sse41";
    case dnnl_cpu_isa_avx:
        return "avx";
    case dnnl_cpu_isa_avx2:
        return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
        return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic:
        return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops:
        return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core:
        return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
        return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
        return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
        return "avx512_core_amx";
    default:
        return "generic";
    }
}

static const char *runtime_name(unsigned rt)
{
    switch (rt) {
    case DNNL_RUNTIME_OMP:
        return "OpenMP";
    case DNNL_RUNTIME_SEQ:
        return "sequential";
    case DNNL_RUNTIME_TBB:
        return "TBB";
    case DNNL_RUNTIME_THREADPOOL:
        return "threadpool";
    default:
        return "unknown runtime";
    }
}

/* The implementation oneDNN picks for a plain 512^3 matmul of @p dtype inputs
 * into @p out (@p none when it has none: bf16 on a CPU without AVX-512). */
static void probe_kernel(dt_dtype dtype, char *out, size_t cap, const char *none)
{
    dt__onednn_mm mm = {.batch = 1,
                        .m = 512,
                        .n = 512,
                        .k = 512,
                        .lda = 512,
                        .ldb = 512,
                        .ldc = 512,
                        .alpha = 1.0f,
                        .ab_dtype = dtype};
    dnnl_primitive_desc_t pd = NULL;
    dt__onednn_apply_threads();
    const char *impl = NULL;
    dnnl_status_t s = dt__onednn_matmul_pd(&mm, &pd);
    if (s == dnnl_success &&
        api.dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
        impl != NULL)
        snprintf(out, cap, "%s", impl);
    else
        snprintf(out, cap, "%s", s == dnnl_unimplemented ? none : "unknown");
    if (pd != NULL)
        api.dnnl_primitive_desc_destroy(pd);
}

/* A forked child cannot use the parent's OpenMP workers (libgomp would wait for them forever). */
static void child_after_fork(void)
{
    atomic_store(&forked, true);
}

static bool start_engine(const char *name)
{
    const dnnl_version_t *v = api.dnnl_version();
    if (v->major != 2) {
        snprintf(load_error, sizeof(load_error),
                 "gemm: DT_ONEDNN_LIB=%s is oneDNN %d.%d.%d; dtensor needs oneDNN 2.x", name,
                 v->major, v->minor, v->patch);
        return false;
    }
    dnnl_status_t s = api.dnnl_engine_create(&api.engine, dnnl_cpu, 0);
    if (s == dnnl_success)
        s = api.dnnl_stream_create(&api.stream, api.engine, dnnl_stream_default_flags);
    if (s != dnnl_success) {
        snprintf(load_error, sizeof(load_error), "gemm: oneDNN (%s) has no CPU engine: %s", name,
                 dt__dnnl_status_str(s));
        return false;
    }
    snprintf(info.version, sizeof(info.version), "%d.%d.%d", v->major, v->minor, v->patch);
    return true;
}

static void load_once(void)
{
    const char *name = dt__config_str("DT_ONEDNN_LIB");
    atomic_store(&want_threads, dt__kernels_num_threads());
    char idle[64];
    void *h = open_with_omp_env(name, idle, sizeof(idle));
    if (h == NULL) {
        snprintf(load_error, sizeof(load_error), "gemm: cannot load oneDNN (DT_ONEDNN_LIB=%s): %s",
                 name, dlerror());
        return;
    }
    const char *missing = NULL;
    if (!resolve(h, &missing)) {
        snprintf(load_error, sizeof(load_error), "gemm: DT_ONEDNN_LIB=%s lacks %s: not oneDNN 2.x",
                 name, missing);
        dlclose(h);
        return;
    }
    if (!start_engine(name))
        return; /* keep the library mapped: oneDNN's globals may hold state */
    snprintf(info.library, sizeof(info.library), "oneDNN (%s)", name);
    const dnnl_version_t *v = api.dnnl_version();
    snprintf(info.detail, sizeof(info.detail), "isa %s, %s%s, %s",
             isa_name(api.dnnl_get_effective_cpu_isa()), runtime_name(v->cpu_runtime),
             api.omp_set_num_threads != NULL ? "" : " (thread count not settable)", idle);
    pthread_atfork(NULL, NULL, child_after_fork);
    atomic_store(&loaded, true);
    probe_kernel(DT_DTYPE_F32, info.kernel, sizeof(info.kernel), "unknown");
    probe_kernel(DT_DTYPE_BF16, info.kernel_bf16, sizeof(info.kernel_bf16), "none");
}

const dt__dnnl *dt__dnnl_api(void)
{
    return &api;
}

int dt__onednn_apply_threads(void)
{
    int n = atomic_load(&forked) ? 1 : atomic_load(&want_threads);
    if (applied_threads != n && api.omp_set_num_threads != NULL) {
        api.omp_set_num_threads(n);
        applied_threads = n;
    }
    return api.omp_get_max_threads != NULL ? api.omp_get_max_threads() : n;
}

const char *dt__dnnl_status_str(dnnl_status_t s)
{
    switch (s) {
    case dnnl_success:
        return "success";
    case dnnl_out_of_memory:
        return "out_of_memory";
    case dnnl_invalid_arguments:
        return "invalid_arguments";
    case dnnl_unimplemented:
        return "unimplemented";
    case dnnl_iterator_ends:
        return "iterator_ends";
    case dnnl_runtime_error:
        return "runtime_error";
    case dnnl_not_required:
        return "not_required";
    default:
        return "unknown status";
    }
}
#else
static void load_once(void)
{
    snprintf(load_error, sizeof(load_error),
             "gemm: dtensor was built without the oneDNN 2.x headers (Debian: libdnnl-dev); "
             "rebuild with them to use oneDNN");
}
#endif

dt_status dt__onednn_load(const dt__onednn_info **out)
{
    pthread_once(&load_once_ctl, load_once);
    if (!atomic_load(&loaded)) {
#ifdef DT_HAVE_ONEDNN
        return DT_ERR(DT_ERR_BACKEND, "%s", load_error);
#else
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s", load_error);
#endif
    }
    if (out != NULL)
        *out = &info;
    return DT_OK;
}

bool dt__onednn_loaded(void)
{
    return atomic_load(&loaded);
}

void dt__onednn_set_num_threads(int n)
{
    atomic_store(&want_threads, n > 0 ? n : 1);
}

int dt__onednn_num_threads(void)
{
#ifdef DT_HAVE_ONEDNN
    if (atomic_load(&forked))
        return 1;
#endif
    return atomic_load(&want_threads);
}
