/* The host around this rank (host_info.c). */
#ifndef DT_CORE_HOST_INFO_H
#define DT_CORE_HOST_INFO_H

#include <stdint.h>

/* Ranks sharing this host, from whichever launcher started us (1 if none). */
int dt__host_local_ranks(void);

/* Bytes of memory this process's host offers: MemTotal, or its cgroup's
 * limit when lower; 0 when neither can be read. */
uint64_t dt__host_memory_bytes(void);

#endif
