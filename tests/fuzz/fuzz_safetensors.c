/*
 * libFuzzer target for the safetensors reader: any input must open cleanly or
 * fail with a status, never crash or read out of bounds. When it opens, every
 * query and read (whole tensors and boxes) must work on it too.
 * Built by tests/fuzz/run.sh (clang -fsanitize=fuzzer); the same entry point
 * replays the committed corpus in the normal suite (fuzz_corpus_replay.c).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dtensor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void exercise(const dt_safetensors *f)
{
    for (int i = 0; i < dt_safetensors_metadata_count(f); i++)
        (void)dt_safetensors_metadata_get(f, dt_safetensors_metadata_key_at(f, i));
    for (int i = 0; i < dt_safetensors_count(f); i++) {
        dt_safetensors_info info;
        int j = -1;
        if (dt_safetensors_info_at(f, i, &info) != DT_OK ||
            dt_safetensors_find(f, info.name, &j) != DT_OK || j != i)
            abort(); /* a file that opened must describe itself consistently */
        dt_tensor *t = NULL;
        if (dt_safetensors_load(f, info.name, &t) == DT_OK) {
            /* the second half of dim 0 (or the scalar) as a box */
            int64_t off[DT_MAX_DIMS] = {0}, shape[DT_MAX_DIMS];
            memcpy(shape, info.shape, sizeof(shape));
            if (info.ndim > 0) {
                off[0] = info.shape[0] / 2;
                shape[0] = info.shape[0] - off[0];
            }
            dt_tensor *box = NULL;
            if (dt_tensor_empty(info.ndim, shape, info.dtype, dt_device_cpu(), &box) == DT_OK) {
                if (dt_safetensors_read_box(f, i, off, box) != DT_OK)
                    abort();
                dt_tensor_release(box);
            }
            dt_tensor_release(t);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy, so any read past the end trips ASan */
    uint8_t *copy = malloc(size > 0 ? size : 1);
    if (copy == NULL)
        return 0;
    memcpy(copy, data, size);
    dt_safetensors *f = NULL;
    if (dt_safetensors_open_memory(copy, size, &f) == DT_OK) {
        exercise(f);
        dt_safetensors_close(f);
    }
    free(copy);
    return 0;
}
