/* The public device calls: names, parsing, synchronisation through the kernel tables. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/kernel_ops.h"

const char *dt_device_type_name(dt_device_type type)
{
    switch (type) {
    case DT_DEVICE_CPU:
        return "cpu";
    case DT_DEVICE_CUDA:
        return "cuda";
    case DT_DEVICE_SIM:
        return "sim";
    case DT_DEVICE_TYPE_COUNT:
        break;
    }
    return "unknown";
}

dt_status dt_device_parse(const char *name, dt_device *out)
{
    DT_ARG_NOT_NULL(name);
    DT_ARG_NOT_NULL(out);
    if (strcmp(name, "cpu") == 0 || strcmp(name, "sim") == 0 || strcmp(name, "cuda") == 0) {
        out->type =
            name[0] == 'c' ? (name[1] == 'p' ? DT_DEVICE_CPU : DT_DEVICE_CUDA) : DT_DEVICE_SIM;
        out->index = 0;
        return DT_OK;
    }
    if (strncmp(name, "cuda:", 5) == 0 && name[5] >= '0' && name[5] <= '9') {
        char *end = NULL;
        long i = strtol(name + 5, &end, 10);
        if (*end == '\0' && i <= 1024) {
            out->type = DT_DEVICE_CUDA;
            out->index = (int)i;
            return DT_OK;
        }
    }
    return DT_ERR(DT_ERR_INVALID_ARG,
                  "dt_device_parse: device '%s' is not cpu, sim, cuda or cuda:N", name);
}

dt_status dt_device_synchronize(dt_device device)
{
    const dt_kernel_ops *k = dt__kernels_for(device);
    if (k == NULL)
        return DT_ERR(DT_ERR_UNSUPPORTED, "dt_device_synchronize: device %s:%d is not built in",
                      dt_device_type_name(device.type), device.index);
    return k->synchronize != NULL ? k->synchronize(device.index) : DT_OK;
}
