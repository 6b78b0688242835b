/*
 * dt_init / dt_runtime_*: who am I (the launcher's environment), which
 * device, how many compute threads, the bootstrap store (served by rank 0)
 * and the world comm. A world of one process needs neither a store nor a
 * transport: its world comm is the "self" backend.
 */
#include <stdlib.h>
#include <string.h>

#include "comm/comm_impl.h"
#include "comm/launch_env.h"
#include "comm/store/store_server.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "dtensor/runtime.h"
#include "kernels/cpu/blas_info.h"
#include "kernels/kernel_ops.h"
#ifdef DT_HAVE_CUDA
#include "comm/nccl/nccl_comm.h"
#include "kernels/cuda/kernels_cuda.h"
#endif

struct dt_runtime {
    dt_launch_env env;
    dt_device device;
    double timeout_s;
    dt_store *store;       /* NULL for a world of one */
    dt_comm *host;         /* UCX (or self) world: host buffers */
    dt_comm *device_world; /* NCCL world on a CUDA device with size > 1, else NULL */
};

/* The comm dt_runtime_world returns: NCCL on a multi-rank CUDA run, else the host world. */
static dt_comm *world_of(const dt_runtime *rt)
{
    return rt->device_world != NULL ? rt->device_world : rt->host;
}

/* Whether DT_DEVICE=auto should pick CUDA: built in AND a GPU is present. */
static bool cuda_usable(void)
{
#ifdef DT_HAVE_CUDA
    return dt__kernels_for((dt_device){DT_DEVICE_CUDA, 0}) != NULL && dt__cuda_device_count() > 0;
#else
    return false;
#endif
}

static dt_status pick_device(const dt_init_params *params, const dt_launch_env *env, dt_device *out)
{
    dt_device_type type = DT_DEVICE_CPU;
    if (params != NULL && (params->field_mask & DT_INIT_PARAM_FIELD_DEVICE)) {
        type = params->device;
    } else {
        const char *s = dt__config_str("DT_DEVICE");
        dt_device parsed;
        if (s == NULL || strcmp(s, "auto") == 0)
            type = cuda_usable() ? DT_DEVICE_CUDA : DT_DEVICE_CPU;
        else if (strchr(s, ':') == NULL && dt_device_parse(s, &parsed) == DT_OK)
            type = parsed.type;
        else
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_init: DT_DEVICE='%s' is not cpu, cuda, sim or auto", s);
    }
    if ((int)type < 0 || type >= DT_DEVICE_TYPE_COUNT)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_init: invalid device type %d", (int)type);
    dt_device d = {type, type == DT_DEVICE_CUDA ? env->local_rank : 0};
    if (dt__kernels_for(d) == NULL)
        return DT_ERR(DT_ERR_UNSUPPORTED, "dt_init: device %s is not built into this library",
                      dt_device_type_name(type));
#ifdef DT_HAVE_CUDA
    /* one GPU per local rank, else ranks share them round-robin (and then talk
     * over UCX with staged device buffers: NCCL refuses two ranks on one GPU) */
    int gpus = dt__cuda_device_count();
    if (type == DT_DEVICE_CUDA && gpus == 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_init: DT_DEVICE=cuda but no CUDA device is visible");
    if (type == DT_DEVICE_CUDA && d.index >= gpus)
        d.index = env->local_rank % gpus;
#endif
    *out = d;
    return DT_OK;
}

static dt_status connect_store(dt_runtime *rt)
{
    dt_store_params sp = {
        .field_mask = DT_STORE_PARAM_FIELD_HOST | DT_STORE_PARAM_FIELD_PORT |
                      DT_STORE_PARAM_FIELD_IS_SERVER | DT_STORE_PARAM_FIELD_TOKEN |
                      DT_STORE_PARAM_FIELD_TIMEOUT,
        .host = rt->env.master_addr,
        .port = rt->env.master_port,
        .is_server = (rt->env.rank == 0),
        .token = rt->env.token,
        .timeout_s = rt->timeout_s,
    };
    return dt_store_create(&sp, &rt->store);
}

/* One field of the kernels' description into the public struct; the sizes
 * must agree (kernels/cpu/blas_info.h mirrors dt_runtime_info). */
#define DT__INFO_COPY(dst, src, f)                                                                 \
    do {                                                                                           \
        _Static_assert(sizeof((dst).f) == sizeof((src).f), "dt_runtime_info." #f);                 \
        memcpy(&(dst).f, &(src).f, sizeof((dst).f));                                               \
    } while (0)

dt_status dt_runtime_info_get(dt_runtime_info *out)
{
    DT_ARG_NOT_NULL(out);
    dt__compute_info c;
    DT_CHECK(dt__compute_info_get(&c));
    dt_runtime_info info;
    memset(&info, 0, sizeof(info));
    DT__INFO_COPY(info, c, blas_library);
    DT__INFO_COPY(info, c, blas_version);
    DT__INFO_COPY(info, c, blas_kernel);
    DT__INFO_COPY(info, c, blas_threads);
    DT__INFO_COPY(info, c, cpu_features);
    DT__INFO_COPY(info, c, blas_kernel_generic);
    DT__INFO_COPY(info, c, num_threads);
    DT__INFO_COPY(info, c, gemm_engine);
    DT__INFO_COPY(info, c, gemm_library);
    DT__INFO_COPY(info, c, gemm_version);
    DT__INFO_COPY(info, c, gemm_kernel);
    DT__INFO_COPY(info, c, gemm_threads);
    DT__INFO_COPY(info, c, gemm_detail);
    DT__INFO_COPY(info, c, gemm_reason);
    DT__INFO_COPY(info, c, gemm_kernel_bf16);
    *out = info;
    return DT_OK;
}

/*
 * Load BLAS and the GEMM engine now so their kernels are logged (DT_LOG=info)
 * and a generic fallback warned about at start-up, not at the first GEMM. Not
 * fatal: a program that never multiplies on the CPU runs without OpenBLAS.
 */
static void report_blas(void)
{
    dt_runtime_info info;
    if (dt_runtime_info_get(&info) != DT_OK) {
        DT_LOG_WARN("kernel", "dt_init: no BLAS: %s", dt_last_error());
        return;
    }
    DT_LOG_DEBUG("kernel",
                 "dt_init: %s %s kernel %s, %d BLAS threads, %d compute threads; GEMM engine %s "
                 "kernel %s",
                 info.blas_library, info.blas_version, info.blas_kernel, info.blas_threads,
                 info.num_threads, info.gemm_engine, info.gemm_kernel);
}

/* The transports: UCX (or self) for host memory, plus NCCL on a multi-rank CUDA run. */
static dt_status create_worlds(dt_runtime *rt)
{
    if (rt->env.size == 1) {
        DT_CHECK(dt__comm_self_create(&rt->host));
        rt->host->timeout_s = rt->timeout_s;
        return DT_OK;
    }
    DT_CHECK(connect_store(rt));
    dt_status st =
        dt__comm_ucx_create_world(rt->store, rt->env.rank, rt->env.size, rt->timeout_s, &rt->host);
    if (st != DT_OK)
        goto err_store;
#ifdef DT_HAVE_CUDA
    if (rt->device.type == DT_DEVICE_CUDA && rt->env.local_size > dt__cuda_device_count())
        DT_LOG_INFO("comm",
                    "dt_init: %d local ranks share %d GPU(s): device buffers go over "
                    "UCX through host copies, not NCCL",
                    rt->env.local_size, dt__cuda_device_count());
    else if (rt->device.type == DT_DEVICE_CUDA && dt__config_int("DT_NCCL") != 0) {
        st = dt__comm_nccl_create_world(rt->store, rt->env.rank, rt->env.size, rt->device.index,
                                        rt->timeout_s, &rt->device_world);
        if (st != DT_OK)
            goto err_host;
    }
#endif
    return DT_OK;

#ifdef DT_HAVE_CUDA
err_host:
    dt_comm_destroy(rt->host);
    rt->host = NULL;
#endif
err_store:
    dt_store_destroy(rt->store);
    rt->store = NULL;
    return st;
}

dt_status dt_init(const dt_init_params *params, dt_runtime **out)
{
    DT_ARG_NOT_NULL(out);
    DT_CHECK(dt__config_validate("dt_init")); /* a bad DT_* value fails here, named */
    dt_status st = DT_OK;
    dt_runtime *rt = calloc(1, sizeof(*rt));
    if (rt == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_init: no memory for the runtime");
    DT_CHECK_GOTO(dt__launch_env_read(&rt->env), st, err_free);
    dt__log_set_rank(rt->env.size > 1 ? rt->env.rank : -1);
    rt->timeout_s = DT_PARAM_VALUE(params, timeout_s, DT_INIT_PARAM_FIELD_TIMEOUT,
                                   dt__config_double("DT_TIMEOUT_S"));
    if (!(rt->timeout_s > 0)) {
        st = DT_ERR(DT_ERR_INVALID_ARG, "dt_init: timeout %g s is not positive", rt->timeout_s);
        goto err_free;
    }
    DT_CHECK_GOTO(pick_device(params, &rt->env, &rt->device), st, err_free);
    if (params != NULL && (params->field_mask & DT_INIT_PARAM_FIELD_NUM_THREADS)) {
        if (params->num_threads < 0) {
            st = DT_ERR(DT_ERR_INVALID_ARG, "dt_init: num_threads %d is negative",
                        params->num_threads);
            goto err_free;
        }
        dt__kernels_set_num_threads(params->num_threads);
    }
    report_blas();
    DT_CHECK_GOTO(create_worlds(rt), st, err_free);
    DT_LOG_DEBUG("comm", "dt_init: rank %d of %d (local %d of %d, from %s), world backend %s",
                 rt->env.rank, rt->env.size, rt->env.local_rank, rt->env.local_size, rt->env.source,
                 dt_comm_backend(world_of(rt)));
    *out = rt;
    return DT_OK;

err_free:
    free(rt);
    return st;
}

/* Whether @p c's family was aborted (read without progress: no error recorded). */
static bool comm_aborted(const dt_comm *c)
{
    return c != NULL && c->family != NULL && c->family->status != DT_OK;
}

/*
 * Let queued device work finish before the program exits: exit handlers run
 * oneDNN's static destructors, which unmap JIT code that a matmul still
 * running on the sim stream executes (train_gpt --device sim crashed at exit).
 */
static void drain_devices(const dt_runtime *rt)
{
    dt_device devs[2] = {{DT_DEVICE_SIM, 0}, rt->device};
    int n = rt->device.type == DT_DEVICE_CUDA ? 2 : 1;
    for (int i = 0; i < n; i++)
        if (dt_device_synchronize(devs[i]) != DT_OK)
            DT_LOG_WARN("runtime", "dt_runtime_destroy: %s", dt_last_error());
}

void dt_runtime_destroy(dt_runtime *rt)
{
    if (rt == NULL)
        return;
    drain_devices(rt);
    /* after a failure a stopped rank never hangs up: rank 0 must not wait for it */
    bool failed = comm_aborted(rt->device_world) || comm_aborted(rt->host);
    dt_comm_destroy(rt->device_world);
    dt_comm_destroy(rt->host);
    dt__store_destroy_linger(rt->store, failed ? 0.5 : -1.0);
    free(rt);
}

int dt_runtime_rank(const dt_runtime *rt)
{
    return rt ? rt->env.rank : -1;
}

int dt_runtime_size(const dt_runtime *rt)
{
    return rt ? rt->env.size : 0;
}

int dt_runtime_local_rank(const dt_runtime *rt)
{
    return rt ? rt->env.local_rank : -1;
}

int dt_runtime_local_size(const dt_runtime *rt)
{
    return rt ? rt->env.local_size : 0;
}

dt_device dt_runtime_device(const dt_runtime *rt)
{
    return rt ? rt->device : dt_device_cpu();
}

dt_comm *dt_runtime_world(dt_runtime *rt)
{
    return rt ? world_of(rt) : NULL;
}

dt_comm *dt_runtime_host_world(dt_runtime *rt)
{
    return rt ? rt->host : NULL;
}

dt_store *dt_runtime_store(dt_runtime *rt)
{
    return rt ? rt->store : NULL;
}
