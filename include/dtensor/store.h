/*
 * dtensor/store.h - the bootstrap key-value store.
 *
 * A TCP store served by one process (rank 0) and used by every rank to swap
 * small blobs at start-up (UCX worker addresses, the NCCL unique id). Every
 * client authenticates with the job token; a misbehaving client is dropped
 * while the server keeps serving the others.
 *
 * Thread safety: a dt_store handle is used by one thread at a time.
 *
 * Every call that waits is bounded by the store's timeout_s (or its own
 * timeout): a missing key gives DT_ERR_TIMEOUT naming the key, a vanished
 * server DT_ERR_PEER_LOST; after a client-side failure the handle reports
 * DT_ERR_PEER_LOST for every later call (its stream may be out of step).
 * Launch-time defaults (MASTER_ADDR, MASTER_PORT, DT_JOB_TOKEN) are set by
 * dtrun; see src/comm/launch_env.h for mpirun/srun.
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
/**
 * Close the connection. On the serving rank the server keeps serving until
 * every other client has disconnected (at most min(timeout_s, 30 s)), so ranks
 * finishing their last request are not cut off; then it stops. NULL-safe.
 */
DT_API void dt_store_destroy(dt_store *store);
/** The port the server listens on (useful with port 0). */
DT_API int dt_store_port(const dt_store *store);

/**
 * Set @p key (a C string, at most 64 KiB) to @p len bytes (at most ~64 MiB),
 * replacing any value; waiters on the key wake up. Errors: DT_ERR_INVALID_ARG,
 * DT_ERR_PEER_LOST (store gone), DT_ERR_TIMEOUT (store unresponsive).
 */
DT_API dt_status dt_store_set(dt_store *store, const char *key, const void *value, size_t len);
/**
 * Wait until @p key exists (or timeout: DT_ERR_TIMEOUT naming the key) and
 * return a copy of its value in *value (caller frees with free()).
 */
DT_API dt_status dt_store_get(dt_store *store, const char *key, void **value, size_t *len);
/** Wait until all @p n keys exist; @p timeout_s < 0 = the store's timeout. */
DT_API dt_status dt_store_wait(dt_store *store, const char *const *keys, int n, double timeout_s);
/**
 * Atomically add @p delta to the integer at @p key (missing = 0; stored as
 * decimal text, so dt_store_get returns e.g. "-2"); new value out (may be NULL).
 * A key holding something else, or overflow: DT_ERR_INVALID_ARG naming the key.
 */
DT_API dt_status dt_store_add(dt_store *store, const char *key, int64_t delta, int64_t *new_value);
/** Delete every key that starts with @p prefix; count deleted out (may be NULL). */
DT_API dt_status dt_store_delete_prefix(dt_store *store, const char *prefix, int64_t *deleted);

/**
 * Out-of-band all-gather of @p len bytes per rank under @p prefix: rank @p rank
 * of @p size publishes @p mine as key "<prefix>/<rank>"; @p all receives
 * size*len bytes in rank order. Collective over the @p size ranks. Keys stay
 * in the store: use a fresh prefix per call (or dt_store_delete_prefix). A rank
 * that published another length: DT_ERR_FORMAT naming it.
 */
DT_API dt_status dt_store_allgather(dt_store *store, const char *prefix, int rank, int size,
                                    const void *mine, size_t len, void *all);

#ifdef __cplusplus
}
#endif
#endif /* DTENSOR_STORE_H */
