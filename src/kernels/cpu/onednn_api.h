/*
 * The oneDNN 2.x C functions dtensor calls, resolved with dlsym by
 * onednn_loader.c (typed from the installed headers, so a signature change
 * fails the build, not the run). Private to the onednn_*.c files.
 */
#ifndef DT_KERNELS_CPU_ONEDNN_API_H
#define DT_KERNELS_CPU_ONEDNN_API_H

#ifdef DT_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>

#define DT_DNNL_FUNCTIONS(X)                                                                       \
    X(dnnl_version)                                                                                \
    X(dnnl_get_effective_cpu_isa)                                                                  \
    X(dnnl_engine_create)                                                                          \
    X(dnnl_stream_create)                                                                          \
    X(dnnl_stream_wait)                                                                            \
    X(dnnl_memory_desc_init_by_strides)                                                            \
    X(dnnl_memory_create)                                                                          \
    X(dnnl_memory_set_data_handle)                                                                 \
    X(dnnl_memory_destroy)                                                                         \
    X(dnnl_matmul_desc_init)                                                                       \
    X(dnnl_primitive_attr_create)                                                                  \
    X(dnnl_primitive_attr_destroy)                                                                 \
    X(dnnl_primitive_attr_set_output_scales)                                                       \
    X(dnnl_primitive_attr_set_post_ops)                                                            \
    X(dnnl_post_ops_create)                                                                        \
    X(dnnl_post_ops_destroy)                                                                       \
    X(dnnl_post_ops_append_sum)                                                                    \
    X(dnnl_primitive_desc_create)                                                                  \
    X(dnnl_primitive_desc_query)                                                                   \
    X(dnnl_primitive_desc_destroy)                                                                 \
    X(dnnl_primitive_create)                                                                       \
    X(dnnl_primitive_execute)                                                                      \
    X(dnnl_primitive_destroy)

typedef struct dt__dnnl {
#define DT_DNNL_FIELD(name) __typeof__(name) *name;
    DT_DNNL_FUNCTIONS(DT_DNNL_FIELD)
#undef DT_DNNL_FIELD
    /* the OpenMP runtime oneDNN runs on (found through its handle) */
    void (*omp_set_num_threads)(int n);
    int (*omp_get_max_threads)(void);
    dnnl_engine_t engine;
    dnnl_stream_t stream;
} dt__dnnl;

/* The resolved functions; only after dt__onednn_load succeeded. */
const dt__dnnl *dt__dnnl_api(void);

/*
 * Make the calling thread's OpenMP thread count the engine's (an OpenMP
 * setting is per thread) and return it; primitives are keyed by it, since
 * oneDNN fixes a primitive's partitioning when it is created.
 */
int dt__onednn_apply_threads(void);

/* "invalid_arguments", ... for messages. */
const char *dt__dnnl_status_str(dnnl_status_t s);

/* A matmul primitive descriptor for @p mm (its layouts, alpha as output scale, beta as sum). */
struct dt__onednn_mm;
dnnl_status_t dt__onednn_matmul_pd(const struct dt__onednn_mm *mm, dnnl_primitive_desc_t *pd);
#endif

#endif
