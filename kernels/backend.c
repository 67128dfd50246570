/* backend.c: what every backend shares. */
#include "kernels/backend.h"

#include "common/mem.h"

void gk_backend_free(gk_backend *be)
{
    if (be && be->destroy) be->destroy(be);
}

int gk_backend_mem_info(gk_backend *be, size_t *free_bytes, size_t *total_bytes, const char **bound,
                        gk_err *err)
{
    int rc = be->ops->mem_info(be, free_bytes, total_bytes, err);
    if (rc) return rc;
    if (bound) *bound = NULL;
    if (!be->props.host_memory) return 0;
    gk_host_mem h;
    gk_host_mem_read(&h);
    /* the backend's own figure is mostly the host's MemAvailable read a moment before (cpu, ref,
     * the emulator): one within 1/32 of the host's is that same limit, which is named, not a
     * tighter one of the device's (the two readings once differed and the name was lost) */
    if (h.avail <= *free_bytes + *free_bytes / 32) {
        *free_bytes = h.avail < *free_bytes ? h.avail : *free_bytes;
        if (bound) *bound = h.bound;
    }
    return 0;
}
