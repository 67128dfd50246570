/* host_mem.h: the memory slots of the backends whose "device" is host memory (cpu and ref), and
 * the KV-cache store their attention_fwd_at shares. Owns nothing: allocations belong to the
 * caller (free with gk_host_free). Thread-safe. */
#ifndef GK_HOST_MEM_H
#define GK_HOST_MEM_H

#include <stddef.h>

#include "kernels/backend.h"

/* n bytes, 64-byte aligned, zero-filled; NULL on failure. */
void *gk_host_alloc(gk_backend *be, size_t n);
void gk_host_free(gk_backend *be, void *p);
/* Host to host copy: serves as to_device, to_host and copy. */
void gk_host_copy(gk_backend *be, void *dst, const void *src, size_t n);
void gk_host_zero(gk_backend *be, void *p, size_t n);
/* Host ops are synchronous: nothing to wait for. */
void gk_host_sync(gk_backend *be);
/* be->props of a host backend of kind (GK_KIND_CPU, GK_KIND_REF): device "CPU", no bf16 peak,
 * the host's MemTotal, host memory, no recompute. */
void gk_host_props(gk_backend *be, int kind);
/* mem_info: the host's available memory (common/mem.h) and MemTotal. */
int gk_host_mem_info(gk_backend *be, size_t *free_bytes, size_t *total_bytes, gk_err *err);
/* attention_fwd_at's first half (backend.h), fp32: *t0 checked against n and Tc (else the sticky
 * GK_EUSAGE error naming op, and -1), then qkv_new's B x n rows of 3C copied to the cache's rows
 * t0.. of each batch row (none when qkv_new is NULL). Returns t0. */
int gk_host_cache_store(gk_backend *be, const char *op, float *cache, const float *qkv_new, int B,
                        int Tc, const int *t0, int n, int C);

#endif
