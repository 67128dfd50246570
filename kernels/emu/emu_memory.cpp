/* emu_memory.cpp: the emulated device's memory (declared in emu_runtime.h and emu_internal.h).
 * Owns: device and pinned host allocations on the host heap (device memory filled with 0xff, as
 * uninitialized memory must not read as zeros), their records for cudaFree's checks, and the
 * device's size: GPT_EMU_MEM=SIZE (24G: decimal units K, M, G, T; 24Gi: binary, as the tools read
 * sizes) makes it a device of SIZE bytes, which cudaMalloc fails past (cudaErrorMemoryAllocation,
 * naming it) and cudaMemGetInfo and cudaGetDeviceProperties report, so that what fits a 24 GB card
 * is tested without one; unset, it is the host's (MemAvailable free of MemTotal). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unordered_map>

#include "kernels/emu/emu_internal.h"

using namespace gk_emu;

static std::mutex mem_mu;
static std::unordered_map<void *, size_t> device_blocks, host_blocks;
static size_t device_used; /* bytes of device_blocks, in 256-byte granules */

/* "MemTotal" or "MemAvailable" of /proc/meminfo in bytes (0 when unreadable). */
static size_t meminfo(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0, n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') kb = strtoull(line + n + 1, nullptr, 10);
    fclose(f);
    return kb * 1024;
}

/* GPT_EMU_MEM in bytes: 0 unset, (size_t)-1 when it is not a size. */
static size_t mem_limit()
{
    const char *v = getenv("GPT_EMU_MEM");
    if (!v || !*v) return 0;
    if (*v < '0' || *v > '9') return -1; /* strtoull would take spaces, signs and wrap "-1" */
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    const char *units = "KMGT", *u = *end ? strchr(units, *end & ~0x20) : nullptr;
    size_t mul = 1, base = end[0] && end[1] == 'i' ? 1024 : 1000;
    if (errno || (*end && (!u || end[1 + (base == 1024)]))) return -1;
    for (const char *k = units; u && k <= u; k++) mul *= base;
    return n && n <= (size_t)-2 / mul ? n * mul : (size_t)-1;
}

/* GPT_EMU_MEM's limit, or an error recorded for call when it does not parse (0: none). */
static cudaError_t read_limit(const char *call, size_t *limit)
{
    *limit = mem_limit();
    if (*limit != (size_t)-1) return cudaSuccess;
    record_error(cudaErrorInvalidValue, false,
                 "%s: GPT_EMU_MEM='%s': expected a size in bytes such as 24G or 80Gi", call,
                 getenv("GPT_EMU_MEM"));
    return cudaErrorInvalidValue;
}

size_t gk_emu::device_memory_total()
{
    size_t limit = mem_limit();
    return limit && limit != (size_t)-1 ? limit : meminfo("MemTotal");
}

bool gk_emu::device_memory_own() { return mem_limit() != 0; }

static size_t granules(size_t size) { return (size + 255) & ~(size_t)255; }

/* A block of size bytes in blocks; with limit, a device block only within it (ENOSPC past it,
 * *used: the device's bytes in use then). */
static int host_alloc(void **ptr, size_t size, std::unordered_map<void *, size_t> &blocks,
                      bool device, size_t limit, size_t *used = nullptr)
{
    *ptr = nullptr;
    if (!size) return 0;
    std::lock_guard<std::mutex> lock(mem_mu);
    if (used) *used = device_used;
    if (device && limit && granules(size) > limit - device_used) return ENOSPC;
    void *p = aligned_alloc(256, granules(size));
    if (!p) return ENOMEM;
    if (device) memset(p, 0xff, size), device_used += granules(size);
    blocks[p] = size;
    *ptr = p;
    return 0;
}

static cudaError_t host_free(void *ptr, std::unordered_map<void *, size_t> &blocks)
{
    if (!ptr) return cudaSuccess;
    {
        std::lock_guard<std::mutex> lock(mem_mu);
        auto it = blocks.find(ptr);
        if (it == blocks.end()) return cudaErrorInvalidValue;
        if (&blocks == &device_blocks) device_used -= granules(it->second);
        blocks.erase(it);
    }
    free(ptr);
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **ptr, size_t size)
{
    if (!ptr) return fail(cudaErrorInvalidValue, "cudaMalloc");
    *ptr = nullptr;
    if (cudaError_t e = sticky_error()) return e;
    if (cudaError_t e = capture_forbids("cudaMalloc")) return e;
    if (nth_call_fails("GK_EMU_FAIL_MALLOC", 0)) {
        record_error(cudaErrorMemoryAllocation, false,
                     "cudaMalloc(%zu bytes): failure injected by GK_EMU_FAIL_MALLOC", size);
        return cudaErrorMemoryAllocation;
    }
    size_t limit, used;
    if (cudaError_t e = read_limit("cudaMalloc", &limit)) return e;
    int rc = host_alloc(ptr, size, device_blocks, true, limit, &used);
    if (rc == ENOSPC) {
        record_error(cudaErrorMemoryAllocation, false,
                     "cudaMalloc(%zu bytes): out of memory: %zu of the device's %zu bytes "
                     "(GPT_EMU_MEM) in use",
                     size, used, limit);
        return cudaErrorMemoryAllocation;
    }
    return rc ? fail(cudaErrorMemoryAllocation, "cudaMalloc") : cudaSuccess;
}

cudaError_t cudaFree(void *ptr)
{
    if (cudaError_t e = capture_forbids("cudaFree")) return e;
    return host_free(ptr, device_blocks) ? fail(cudaErrorInvalidValue, "cudaFree") : cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    if (!ptr) return fail(cudaErrorInvalidValue, "cudaMallocHost");
    if (cudaError_t e = capture_forbids("cudaMallocHost")) return e;
    return host_alloc(ptr, size, host_blocks, false, 0)
               ? fail(cudaErrorMemoryAllocation, "cudaMallocHost")
               : cudaSuccess;
}

cudaError_t cudaFreeHost(void *ptr)
{
    if (cudaError_t e = capture_forbids("cudaFreeHost")) return e;
    return host_free(ptr, host_blocks) ? fail(cudaErrorInvalidValue, "cudaFreeHost") : cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    if (!free_bytes || !total_bytes) return fail(cudaErrorInvalidValue, "cudaMemGetInfo");
    if (device_lost()) return cudaErrorDevicesUnavailable;
    size_t limit;
    if (cudaError_t e = read_limit("cudaMemGetInfo", &limit)) return e;
    if (!limit) {
        *free_bytes = meminfo("MemAvailable");
        *total_bytes = meminfo("MemTotal");
        return cudaSuccess;
    }
    std::lock_guard<std::mutex> lock(mem_mu);
    *free_bytes = device_used < limit ? limit - device_used : 0;
    *total_bytes = limit;
    return cudaSuccess;
}
