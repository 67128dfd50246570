/* host_mem.c: memory slots of the host backends and their KV-cache store (see host_mem.h). */
#include "kernels/cpu/host_mem.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/mem.h"

/* Slots of at least this many bytes are 2 MB aligned and asked to be backed by huge pages
 * (transparent huge pages in "madvise" mode, the usual default, give them only when asked).
 * Decoding streams the weights once a token: under a hypervisor each 4 KB page's TLB miss is a
 * two-level walk, and a core reads 2 MB pages markedly faster (tests/bench/cpu-results.md). */
#define HUGE_MIN ((size_t)4 << 20)
#define HUGE_ALIGN ((size_t)2 << 20)

void *gk_host_alloc(gk_backend *be, size_t n)
{
    (void)be;
    size_t sz = n ? (n + 63) / 64 * 64 : 64;
    if (sz < HUGE_MIN) {
        void *p = aligned_alloc(64, sz);
        if (p)
            memset(p, 0, sz);
        return p;
    }
    sz = (sz + HUGE_ALIGN - 1) / HUGE_ALIGN * HUGE_ALIGN;
    void *p = aligned_alloc(HUGE_ALIGN, sz);
    if (!p)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, sz, MADV_HUGEPAGE); /* advice only: without huge pages the slot still works */
#endif
    memset(p, 0, sz); /* first touch after the advice, so the pages are huge from the start */
    return p;
}

void gk_host_free(gk_backend *be, void *p)
{
    (void)be;
    free(p);
}

void gk_host_copy(gk_backend *be, void *dst, const void *src, size_t n)
{
    (void)be;
    if (n)
        memmove(dst, src, n);
}

void gk_host_zero(gk_backend *be, void *p, size_t n)
{
    (void)be;
    if (n)
        memset(p, 0, n);
}

void gk_host_sync(gk_backend *be) { (void)be; }

void gk_host_props(gk_backend *be, int kind)
{
    gk_host_mem h;
    gk_host_mem_read(&h);
    be->props = (gk_backend_props){.kind = kind, .device = "CPU", .memory_bytes = h.total,
                                   .host_memory = 1, .recompute = 0};
}

int gk_host_mem_info(gk_backend *be, size_t *free_bytes, size_t *total_bytes, gk_err *err)
{
    (void)be;
    (void)err;
    gk_host_mem h;
    gk_host_mem_read(&h);
    *free_bytes = h.avail;
    *total_bytes = h.total;
    return 0;
}

int gk_host_cache_store(gk_backend *be, const char *op, float *cache, const float *qkv_new, int B,
                        int Tc, const int *t0, int n, int C)
{
    int p = t0 ? *t0 : 0;
    if (p < 0 || n < 1 || p > Tc - n) {
        GK_BACKEND_FAIL(be, GK_EUSAGE, "%s attention_fwd_at: rows %d..%d outside a cache of %d", op,
                        p, p + n - 1, Tc);
        return -1;
    }
    size_t row = 3 * (size_t)C;
    if (qkv_new)
        for (int b = 0; b < B; b++)
            memmove(cache + ((size_t)b * Tc + p) * row, qkv_new + (size_t)b * n * row,
                    sizeof(float) * n * row);
    return p;
}
