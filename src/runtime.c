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
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "dtensor/runtime.h"
#include "kernels/kernel_ops.h"

struct dt_runtime {
    dt_launch_env env;
    dt_device device;
    double timeout_s;
    dt_store *store; /* NULL for a world of one */
    dt_comm *world;
};

static dt_status pick_device(const dt_init_params *params, const dt_launch_env *env,
                             dt_device *out)
{
    dt_device_type type = DT_DEVICE_CPU;
    if (params != NULL && (params->field_mask & DT_INIT_PARAM_FIELD_DEVICE)) {
        type = params->device;
    } else {
        const char *s = dt__config_str("DT_DEVICE");
        if (s != NULL && strcmp(s, "cuda") == 0)
            type = DT_DEVICE_CUDA;
        else if (s == NULL || strcmp(s, "auto") == 0)
            type = (dt__kernels_for((dt_device){DT_DEVICE_CUDA, 0}) != NULL) ? DT_DEVICE_CUDA
                                                                              : DT_DEVICE_CPU;
        else if (strcmp(s, "cpu") != 0)
            return DT_ERR(DT_ERR_INVALID_ARG, "dt_init: DT_DEVICE='%s' is not cpu, cuda or auto",
                          s);
    }
    if (type != DT_DEVICE_CPU && type != DT_DEVICE_CUDA)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_init: invalid device type %d", (int)type);
    dt_device d = {type, type == DT_DEVICE_CUDA ? env->local_rank : 0};
    if (dt__kernels_for(d) == NULL)
        return DT_ERR(DT_ERR_UNSUPPORTED, "dt_init: device %s is not built into this library",
                      type == DT_DEVICE_CUDA ? "cuda" : "cpu");
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

dt_status dt_init(const dt_init_params *params, dt_runtime **out)
{
    DT_ARG_NOT_NULL(out);
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
    if (rt->env.size == 1) {
        DT_CHECK_GOTO(dt__comm_self_create(&rt->world), st, err_free);
        rt->world->timeout_s = rt->timeout_s;
    } else {
        DT_CHECK_GOTO(connect_store(rt), st, err_free);
        DT_CHECK_GOTO(dt__comm_ucx_create_world(rt->store, rt->env.rank, rt->env.size,
                                                rt->timeout_s, &rt->world),
                      st, err_destroy_store);
    }
    DT_LOG_DEBUG("comm", "dt_init: rank %d of %d (local %d of %d, from %s), world backend %s",
                 rt->env.rank, rt->env.size, rt->env.local_rank, rt->env.local_size,
                 rt->env.source, dt_comm_backend(rt->world));
    *out = rt;
    return DT_OK;

err_destroy_store:
    dt_store_destroy(rt->store);
err_free:
    free(rt);
    return st;
}

void dt_runtime_destroy(dt_runtime *rt)
{
    if (rt == NULL)
        return;
    dt_comm_destroy(rt->world);
    dt_store_destroy(rt->store);
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
    return rt ? rt->world : NULL;
}

dt_store *dt_runtime_store(dt_runtime *rt)
{
    return rt ? rt->store : NULL;
}
