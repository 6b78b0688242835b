/*
 * The default initialisation of new Linear and Embedding modules (nn.h): a
 * parameter is filled by global index under dt_param_seed(seed, key), where
 * key stands for the FQN the module does not have yet: its type and sizes and
 * how many modules of that type and sizes this process made before, since the
 * last dt_nn_manual_seed. So two layers of the same sizes differ, as
 * PyTorch's do, while every rank that builds the same model in the same order
 * (SPMD programs do) draws the same full tensors whatever its mesh.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "nn/module_impl.h"

typedef struct key_count {
    struct key_count *next;
    uint64_t made;
    char key[];
} key_count;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t base_seed = DT_NN_DEFAULT_INIT_SEED;
static key_count *counts; /* one per type-and-sizes key made so far */

void dt_nn_manual_seed(uint64_t seed)
{
    pthread_mutex_lock(&lock);
    while (counts != NULL) {
        key_count *next = counts->next;
        free(counts);
        counts = next;
    }
    base_seed = seed;
    pthread_mutex_unlock(&lock);
}

/* "<what>#<k>" for the k-th module of key @p what (k from 0), and the seed. */
static dt_status next_key(const char *what, char *out, size_t len, uint64_t *seed)
{
    dt_status s = DT_OK;
    pthread_mutex_lock(&lock);
    key_count *c = counts;
    while (c != NULL && strcmp(c->key, what) != 0)
        c = c->next;
    if (c == NULL && (c = calloc(1, sizeof(*c) + strlen(what) + 1)) != NULL) {
        memcpy(c->key, what, strlen(what) + 1);
        c->next = counts;
        counts = c;
    }
    if (c == NULL)
        s = DT_ERR(DT_ERR_NO_MEMORY, "default init: no memory for key '%s'", what);
    else
        snprintf(out, len, "%s#%" PRIu64, what, c->made++);
    *seed = base_seed;
    pthread_mutex_unlock(&lock);
    return s;
}

dt_status dt__nn_default_init(dt_module *m, const char *what, int n, const char *const *names,
                              double bound)
{
    char key[96], fqn[128];
    uint64_t seed = 0;
    DT_CHECK(next_key(what, key, sizeof(key), &seed));
    dt_status s = DT_OK;
    for (int i = 0; i < n && s == DT_OK; i++) {
        snprintf(fqn, sizeof(fqn), "%s.%s", key, names[i]);
        uint64_t ps = dt_param_seed(seed, fqn);
        dt__init_rule rule = bound > 0.0 ? (dt__init_rule){DT__INIT_UNIFORM, -bound, bound, ps}
                                         : (dt__init_rule){DT__INIT_NORMAL, 0.0, 1.0, ps};
        s = dt__param_init_slot(m, names[i], fqn, &rule); /* deferred: only remembered */
    }
    return s;
}
