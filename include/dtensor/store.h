/*
 * dtensor/store.h - the bootstrap key-value store.
 *
 * A TCP store served by one process (rank 0) and used by every rank to swap
 * small blobs at start-up (UCX worker addresses, the NCCL unique id). Every
 * client authenticates with the job token; a misbehaving client is dropped
 * while the server keeps serving the others.
 *
 * Thread safety: a dt_store handle is used by one thread at a time.
 */
#ifndef DTENSOR_STORE_H
#define DTENSOR_STORE_H

#include "dtensor/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_store dt_store;

enum {
    DT_STORE_PARAM_FIELD_HOST = 1u << 0,
    DT_STORE_PARAM_FIELD_PORT = 1u << 1,
    DT_STORE_PARAM_FIELD_IS_SERVER = 1u << 2,
    DT_STORE_PARAM_FIELD_TOKEN = 1u << 3,
    DT_STORE_PARAM_FIELD_TIMEOUT = 1u << 4,
    DT_STORE_PARAM_FIELD_BIND = 1u << 5,
};

typedef struct dt_store_params {
    uint64_t field_mask;
    const char *host;  /* server address to connect to; default MASTER_ADDR or 127.0.0.1 */
    int port;          /* default MASTER_PORT; 0 on a server = pick a free port */
    bool is_server;    /* serve (in a background thread) and also act as a client */
    const char *token; /* default DT_JOB_TOKEN; NULL/empty = no token */
    double timeout_s;  /* connect and wait timeout; default DT_TIMEOUT_S */
    const char *bind;  /* server bind address; default DT_STORE_BIND (127.0.0.1) */
} dt_store_params;

/** Connect to (and, with is_server, start) a TCP store. Caller destroys. */
DT_API dt_status dt_store_create(const dt_store_params *params, dt_store **out);
/** Close the connection; a server stops serving. NULL-safe. */
DT_API void dt_store_destroy(dt_store *store);
/** The port the server listens on (useful with port 0). */
DT_API int dt_store_port(const dt_store *store);

DT_API dt_status dt_store_set(dt_store *store, const char *key, const void *value, size_t len);
/**
 * Wait until @p key exists (or timeout: DT_ERR_TIMEOUT naming the key) and
 * return a copy of its value in *value (caller frees with free()).
 */
DT_API dt_status dt_store_get(dt_store *store, const char *key, void **value, size_t *len);
/** Wait until all @p n keys exist; @p timeout_s < 0 = the store's timeout. */
DT_API dt_status dt_store_wait(dt_store *store, const char *const *keys, int n, double timeout_s);
/** Atomically add @p delta to the integer at @p key (missing = 0); new value out. */
DT_API dt_status dt_store_add(dt_store *store, const char *key, int64_t delta,
                              int64_t *new_value);
/** Delete every key that starts with @p prefix; count deleted out (may be NULL). */
DT_API dt_status dt_store_delete_prefix(dt_store *store, const char *prefix, int64_t *deleted);

/**
 * Out-of-band all-gather of @p len bytes per rank under @p prefix: rank @p rank
 * of @p size publishes @p mine; @p all receives size*len bytes in rank order.
 */
DT_API dt_status dt_store_allgather(dt_store *store, const char *prefix, int rank, int size,
                                    const void *mine, size_t len, void *all);

#ifdef __cplusplus
}
#endif
#endif /* DTENSOR_STORE_H */
