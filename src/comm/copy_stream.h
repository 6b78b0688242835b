/*
 * Copies with non-temporal (streaming) stores, for destinations that
 * overflow the caches and that this rank will not read again soon: storing
 * around the caches saves reading each destination line first (a normal
 * store's read-for-ownership), a third of a large copy's memory traffic.
 */
#ifndef DT_COMM_COPY_STREAM_H
#define DT_COMM_COPY_STREAM_H

#include <stddef.h>

/* Transfers at least this big write their destinations with streaming stores. */
#define DT_COPY_STREAM_MIN_BYTES (4u << 20)

/* memcpy(dst, src, n) with streaming stores, for non-overlapping buffers; the
 * caller fences (dt__copy_stream_fence) before another rank may read dst. */
void dt__copy_stream(void *dst, const void *src, size_t n);
/* Order the streaming stores before the stores that follow. */
void dt__copy_stream_fence(void);

#endif
