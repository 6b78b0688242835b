/* A user program built against an installed dtensor. */
#include <dtensor.h>
#include <stdio.h>

int main(void)
{
    dt_tensor *t = NULL;
    int64_t shape[2] = {2, 3};
    if (dt_tensor_ones(2, shape, DT_DTYPE_F32, dt_device_cpu(), &t) != DT_OK) {
        fprintf(stderr, "consumer: %s\n", dt_last_error());
        return 1;
    }
    int64_t n = dt_tensor_numel(t);
    dt_tensor_release(t);
    if (dt_version() != DT_VERSION_CODE || n != 6) {
        fprintf(stderr, "consumer: version %d or numel %lld wrong\n", dt_version(), (long long)n);
        return 1;
    }
    printf("consumer: dtensor %d ok\n", dt_version());
    return 0;
}
