/*
 * libFuzzer target for the sharded checkpoint's index.json reader: any input
 * parses or fails with a status, never crashes or reads out of bounds; a
 * parsed index must find each of its own tensors by name.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/ck_index.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size > 0 ? size : 1); /* exact size: overreads trip ASan */
    if (copy == NULL)
        return 0;
    memcpy(copy, data, size);
    dt_ck_index *x = NULL;
    if (dt__ck_index_parse(copy, size, "fuzz", &x) == DT_OK) {
        for (int i = 0; i < x->n; i++)
            if (dt__ck_index_find(x, x->entries[i].name) != &x->entries[i])
                abort();
        dt__ck_index_free(x);
    }
    free(copy);
    return 0;
}
